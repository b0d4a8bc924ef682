"""Producer-id block arithmetic (the pid-block record) and the checks of a grant's
caller: blocks follow each other without overlap or gap, start at 0, stay int64, and
run out with a clear error as Kafka's do."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.controller.producer_ids import MAX_COORDINATOR_ID_LENGTH, check_caller
from strand.cluster.keys import KeySpace
from strand.cluster.model import (
    FIRST_RESERVED_PRODUCER_ID,
    MAX_PRODUCER_ID,
    PRODUCER_ID_BLOCK_SIZE,
    ProducerIdBlockRecord,
    ProducerIdsBlock,
    next_producer_ids_block,
)
from strand.errors import InvalidRequestError, UnknownServerError


def test_the_first_block_starts_at_zero_with_kafkas_size() -> None:
    block = next_producer_ids_block(None)
    assert (block.first, block.size, block.last) == (0, 1000, 999)
    assert PRODUCER_ID_BLOCK_SIZE == 1000


def test_a_block_continues_from_the_stored_record() -> None:
    block = next_producer_ids_block(ProducerIdBlockRecord(4000, "txn-1", 7))
    assert (block.first, block.last, block.next_first) == (4000, 4999, 5000)


@given(start=st.integers(0, FIRST_RESERVED_PRODUCER_ID - 50 * 1000), sizes=st.lists(
    st.integers(1, 1000), min_size=1, max_size=50))
def test_successive_blocks_are_contiguous_and_disjoint(start: int, sizes: list[int]) -> None:
    record = ProducerIdBlockRecord(start)
    expected = start
    for size in sizes:
        block = next_producer_ids_block(record, size)
        assert block.first == expected
        assert block.last == expected + size - 1
        expected = block.next_first
        record = ProducerIdBlockRecord(block.next_first)


def test_blocks_end_before_the_reserved_ids_then_ids_are_exhausted() -> None:
    """The top of the int64 range belongs to the coordinators' shard writers
    (strand.coordination.shard_fence): no block reaches into it."""
    last = next_producer_ids_block(ProducerIdBlockRecord(FIRST_RESERVED_PRODUCER_ID - 1000))
    assert (last.first, last.last, last.next_first) == (
        FIRST_RESERVED_PRODUCER_ID - 1000, FIRST_RESERVED_PRODUCER_ID - 1,
        FIRST_RESERVED_PRODUCER_ID)
    for after in (last.next_first, FIRST_RESERVED_PRODUCER_ID - 999, MAX_PRODUCER_ID - 1000):
        with pytest.raises(UnknownServerError, match="producer ids exhausted"):
            next_producer_ids_block(ProducerIdBlockRecord(after))


def test_a_corrupt_negative_pointer_grants_nothing() -> None:
    with pytest.raises(UnknownServerError):
        next_producer_ids_block(ProducerIdBlockRecord(-1000))


@pytest.mark.parametrize(("first", "size"), [(-1, 10), (0, 0), (MAX_PRODUCER_ID, 2)])
def test_a_block_is_int64_ids_only(first: int, size: int) -> None:
    with pytest.raises(ValueError, match="not a block"):
        ProducerIdsBlock(first, size)


def test_the_record_round_trips_through_json() -> None:
    record = ProducerIdBlockRecord(MAX_PRODUCER_ID, "txn-a", 0x7A3B)
    assert ProducerIdBlockRecord.from_json(record.to_json()) == record


def test_the_key_is_named_in_the_design() -> None:
    keys = KeySpace("c1")
    assert keys.pid_block == "/strand/c1/pid-block"
    assert keys.parse(keys.pid_block) is None  # not a cache record


@pytest.mark.parametrize(("coordinator", "epoch", "what"), [
    ("", 5, "not an instance id"), ("a/b", 5, "not an instance id"),
    ("x" * (MAX_COORDINATOR_ID_LENGTH + 1), 5, "not an instance id"),
    ("txn-1", 0, "not a lease id"), ("txn-1", -3, "not a lease id")])
def test_a_caller_that_names_no_registration_is_refused(coordinator: str, epoch: int,
                                                        what: str) -> None:
    with pytest.raises(InvalidRequestError, match=what):
        check_caller(coordinator, epoch)


def test_a_well_formed_caller_passes_the_local_check() -> None:
    check_caller("txn-1", 0x694D8A1B2C)
