"""The records of __transaction_state: round trips, tombstones, Kafka's key layout,
and clean refusal of anything that is not a record this Strand wrote."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.transactions.txn_metadata import MAX_EPOCH, Completion, TxnTransit
from services.transactions.txn_records import (
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    record,
)
from services.transactions.txn_state import TxnState
from strand.errors import CorruptRecordError

WRITTEN = [s for s in TxnState if s not in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE)]
ids = st.text(min_size=1, max_size=60)
partitions = st.frozensets(st.tuples(st.text(min_size=1, max_size=20),
                                     st.integers(0, 2**31 - 1)), max_size=12)


@st.composite
def transits(draw: st.DrawFn) -> TxnTransit:
    state = draw(st.sampled_from(WRITTEN))
    open_ = state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
    parts = draw(partitions) if open_ else frozenset()
    # An open or ending transaction may carry the previous one whose markers are due.
    completing = draw(st.none() | st.builds(
        Completion, st.integers(0, 2**63 - 1), st.integers(0, MAX_EPOCH), st.booleans(),
        partitions)) if open_ else None
    return TxnTransit(
        producer_id=draw(st.integers(0, 2**63 - 1)),
        last_producer_id=draw(st.integers(-1, 2**63 - 1)),
        producer_epoch=draw(st.integers(0, MAX_EPOCH)),
        last_producer_epoch=draw(st.integers(-1, MAX_EPOCH)),
        timeout_ms=draw(st.integers(1, 2**31 - 1)),
        state=state, partitions=parts,
        start_ms=draw(st.integers(-1, 2**62)), last_update_ms=draw(st.integers(0, 2**62)),
        completing=completing)


def test_a_completion_is_written_as_version_2_and_only_then() -> None:
    base = TxnTransit(5, 5, 3, 2, 60_000, TxnState.ONGOING, frozenset({("orders", 1)}), 10, 20)
    assert encode_value(base)[:2] == b"\x00\x01"
    ended = Completion(5, 2, True, frozenset({("orders", 0), ("audit", 4)}))
    with_completion = TxnTransit(5, 5, 3, 2, 60_000, TxnState.ONGOING,
                                 frozenset({("orders", 1)}), 10, 20, ended)
    raw = encode_value(with_completion)
    assert raw[:2] == b"\x00\x02" and decode_value(raw) == with_completion
    # a Completion in a state that has no transaction is damage
    empty = TxnTransit(5, 5, 3, 2, 60_000, TxnState.EMPTY, frozenset(), -1, 20, ended)
    with pytest.raises(CorruptRecordError, match="completing"):
        decode_value(encode_value(empty))


@given(ids)
def test_key_round_trips(transactional_id: str) -> None:
    assert decode_key(encode_key(transactional_id)) == transactional_id


def test_key_is_kafkas_transaction_log_key_v0() -> None:
    # int16 version 0, then the id as an int16-length string (TransactionLogKey v0)
    assert encode_key("app-1") == b"\x00\x00\x00\x05app-1"


@given(transits())
def test_value_round_trips(transit: TxnTransit) -> None:
    assert decode_value(encode_value(transit)) == transit


def test_tombstone_is_a_null_value() -> None:
    tombstone = record("expired", None)
    assert tombstone.key == encode_key("expired") and tombstone.value is None
    assert decode_value(None) is None


@pytest.mark.parametrize("state", [TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE])
def test_pending_only_states_are_never_written(state: TxnState) -> None:
    transit = TxnTransit(1, -1, 0, -1, 60_000, state, frozenset(), -1, 0)
    with pytest.raises(ValueError):
        encode_value(transit)


ONGOING = TxnTransit(7, -1, 3, -1, 60_000, TxnState.ONGOING,
                     frozenset({("orders", 0), ("orders", 2), ("audit", 1)}), 100, 200)


@pytest.mark.parametrize("data", [
    b"",
    b"\x00",
    b"\x00\x02" + encode_value(ONGOING)[2:],  # an unknown version
    encode_value(ONGOING)[:-1],  # truncated
    encode_value(ONGOING) + b"\x00",  # trailing bytes
    encode_value(ONGOING)[:26] + b"\x09" + encode_value(ONGOING)[27:],  # state 9
    encode_value(ONGOING)[:26] + b"\x06" + encode_value(ONGOING)[27:],  # Dead
    encode_value(ONGOING)[:26] + b"\x00" + encode_value(ONGOING)[27:],  # Empty, with partitions
    encode_value(ONGOING)[:-4] + struct.pack(">i", 0),  # a partition listed twice
    b"\x00\x01" + b"\xff" * 60,
], ids=["empty", "one byte", "version", "truncated", "trailing", "state", "dead",
        "empty with partitions", "duplicate", "garbage"])
def test_bad_values_are_refused(data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_value(data)


@pytest.mark.parametrize("data", [b"", b"\x00\x01\x00\x01a", b"\x00\x00\x00\x05app",
                                  b"\x00\x00\x00\x00", b"\x00\x00\x00\x02\xff\xfe"])
def test_bad_keys_are_refused(data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_key(data)


@settings(deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_decode_cleanly_or_not_at_all(data: bytes) -> None:
    """Garbage is either refused with CorruptRecordError or is a record that encodes
    back to exactly the same bytes: never another exception, never a misreading."""
    try:
        transit = decode_value(data)
    except CorruptRecordError:
        pass
    else:
        assert transit is not None and encode_value(transit) == data
    try:
        key = decode_key(data)
    except CorruptRecordError:
        pass
    else:
        assert encode_key(key) == data


@settings(deadline=None)
@given(transits(), st.data())
def test_any_single_byte_change_is_refused_or_read_exactly(transit: TxnTransit,
                                                           data: st.DataObject) -> None:
    raw = bytearray(encode_value(transit))
    index = data.draw(st.integers(0, len(raw) - 1))
    raw[index] ^= data.draw(st.integers(1, 255))
    try:
        decoded = decode_value(bytes(raw))
    except CorruptRecordError:
        return
    assert decoded is not None and encode_value(decoded) == bytes(raw)
