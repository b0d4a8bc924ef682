"""The leader's record validation (Kafka's LogValidator): every lie a batch with a
correct CRC can tell is refused with Kafka's code, and nothing is written."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import cramjam
import pytest

from strand.errors import ErrorCode, StrandError
from strand.log.config import LogConfig
from strand.log.log import PartitionLog
from strand.records import BatchBuilder, Compression, RecordBatch, build_end_txn_marker
from strand.records.batch import TIMESTAMP_TYPE_FLAG, validate_batch
from strand.records.control import ControlType
from strand.records.validation import validate_producer_batch
from strand.records.varint import encode_varint
from tests.support.malformed import (
    ATTRIBUTES_POS,
    HEADER_SIZE,
    ISSUE_CASES,
    LAST_OFFSET_DELTA_POS,
    RECORD_COUNT_POS,
    fix_crc,
    fix_length,
    valid_batch,
)

MAX_TIMESTAMP_POS = 35
PRODUCER_ID_POS = 43


def refusal(data: bytes, **kwargs: bool) -> StrandError:
    header = validate_batch(data)  # the CRC is right: only the records are wrong
    with pytest.raises(StrandError) as excinfo:
        validate_producer_batch(data, 0, header, **kwargs)
    return excinfo.value


def record(index: int, *, key: bytes = b"k", value: bytes = b"v", ts_delta: int = 0,
           raw_headers: bytes = b"\x00", raw_key: bytes | None = None) -> bytes:
    body = (b"\x00" + encode_varint(ts_delta) + encode_varint(index)
            + (raw_key if raw_key is not None else encode_varint(len(key)) + key)
            + encode_varint(len(value)) + value + raw_headers)
    return encode_varint(len(body)) + body


def batch_of(body: bytes, count: int, *, codec: int = 0) -> bytes:
    """A valid header (timestamps 1000) around ``body`` claiming ``count`` records."""
    head = bytearray(valid_batch(1, timestamp=1000)[:HEADER_SIZE])
    struct.pack_into(">i", head, RECORD_COUNT_POS, count)
    struct.pack_into(">i", head, LAST_OFFSET_DELTA_POS, max(count - 1, 0))
    struct.pack_into(">h", head, ATTRIBUTES_POS, codec)
    return fix_crc(fix_length(head + body))


@pytest.mark.parametrize("case", list(ISSUE_CASES), ids=list(ISSUE_CASES))
def test_issue_cases_are_refused_with_kafkas_code(case: str) -> None:
    build, code = ISSUE_CASES[case]
    error = refusal(build())
    assert error.code == code, error
    assert str(error)


@pytest.mark.parametrize("case", list(ISSUE_CASES), ids=list(ISSUE_CASES))
def test_the_log_writes_nothing_of_a_request_with_a_bad_batch(case: str, tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "p-0", LogConfig())
    log.append_as_leader(valid_batch(2), leader_epoch=0)
    with pytest.raises(StrandError):
        # A good batch before the bad one in the same request is not written either.
        log.append_as_leader(valid_batch(2) + ISSUE_CASES[case][0](), leader_epoch=0)
    assert log.log_end_offset == 2
    assert [r.value for b in _batches(log) for r in b.records()] == [b"v-0", b"v-1"]
    log.close()


def _batches(log: PartitionLog) -> list[RecordBatch]:
    from strand.records import iter_record_batches

    return list(iter_record_batches(log.read(0, 1 << 20)))


@pytest.mark.parametrize("codec", list(Compression), ids=[c.name.lower() for c in Compression])
def test_valid_batches_pass(codec: Compression) -> None:
    builder = BatchBuilder(compression=codec, producer_id=4, producer_epoch=0, base_sequence=0)
    builder.append(b"a", key=b"k", headers=[("h", b"1"), ("ключ", None)], timestamp=5)
    builder.append(None, key=None, timestamp=-1)
    builder.append(b"x" * 3000, key=b"", timestamp=9)
    for _ in range(200):  # past 64 records: two-byte offset deltas
        builder.append(b"y", timestamp=7)
    data = builder.build()
    validate_producer_batch(data, 0, validate_batch(data))


def test_control_batches_from_coordinators_pass() -> None:
    marker = build_end_txn_marker(ControlType.COMMIT, producer_id=7, producer_epoch=1,
                                  coordinator_epoch=3, timestamp=10)
    validate_producer_batch(marker, 0, validate_batch(marker), require_keys=True)


CASES: dict[str, tuple[Callable[[], bytes], ErrorCode, str]] = {
    "zero-records": (lambda: batch_of(b"", 0), ErrorCode.INVALID_RECORD, "at least one"),
    "fewer-records-than-claimed": (lambda: batch_of(record(0, value=b"v" * 20)
                                                    + record(1, value=b"v" * 20), 3),
                                   ErrorCode.INVALID_RECORD, "malformed"),
    "trailing-bytes": (lambda: batch_of(record(0) + record(1), 1),
                       ErrorCode.INVALID_RECORD, "unconsumed"),
    "offset-delta-skips": (lambda: batch_of(record(0) + record(2), 2),
                           ErrorCode.INVALID_RECORD, "offset delta 2, expected 1"),
    "offset-delta-repeats": (lambda: batch_of(record(0) + record(0), 2),
                             ErrorCode.INVALID_RECORD, "offset delta 0, expected 1"),
    "key-longer-than-record": (lambda: batch_of(record(0, raw_key=encode_varint(50) + b"k"), 1),
                               ErrorCode.INVALID_RECORD, "malformed"),
    "negative-header-count": (lambda: batch_of(record(0, raw_headers=encode_varint(-1)), 1),
                              ErrorCode.INVALID_RECORD, "headers"),
    "null-header-key": (lambda: batch_of(record(0, raw_headers=b"\x02\x01\x00"), 1),
                        ErrorCode.INVALID_RECORD, "header key"),
    "header-key-not-utf8": (lambda: batch_of(record(0, raw_headers=b"\x02\x02\xff\x01"), 1),
                            ErrorCode.INVALID_RECORD, "malformed"),
    "overlong-varint": (lambda: batch_of(record(0, ts_delta=0)[:2] + b"\xff" * 11, 1),
                        ErrorCode.INVALID_RECORD, "malformed"),
    "max-timestamp-lies": (lambda: batch_of(record(0, ts_delta=5), 1),
                           ErrorCode.INVALID_RECORD, "max timestamp 1000 is not"),
    "zstd-garbage": (lambda: batch_of(b"\x28\xb5\x2f\xfd" + b"\x00" * 20, 1, codec=4),
                     ErrorCode.CORRUPT_MESSAGE, "zstd"),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_malformed_records_are_refused(case: str) -> None:
    build, code, message = CASES[case]
    error = refusal(build())
    assert error.code == code, error
    assert message in str(error)


def test_producer_id_without_sequence() -> None:
    buf = bytearray(valid_batch(1))
    struct.pack_into(">q", buf, PRODUCER_ID_POS, 42)
    error = refusal(fix_crc(buf))
    assert error.code == ErrorCode.INVALID_RECORD and "sequence" in str(error)


def test_producer_may_not_claim_log_append_time() -> None:
    buf = bytearray(valid_batch(1))
    struct.pack_into(">h", buf, ATTRIBUTES_POS, TIMESTAMP_TYPE_FLAG)
    assert refusal(fix_crc(buf)).code == ErrorCode.INVALID_TIMESTAMP


def test_compacted_topics_need_keys() -> None:
    builder = BatchBuilder()
    builder.append(b"a", key=b"k")
    builder.append(b"b", key=None)
    error = refusal(builder.build(), require_keys=True)
    assert error.code == ErrorCode.INVALID_RECORD and "offset delta 1 has no key" in str(error)


def test_a_small_batch_may_not_inflate_past_the_limit() -> None:
    builder = BatchBuilder(compression=Compression.ZSTD)
    builder.append(bytes(4 << 20), key=b"k")
    data = builder.build()
    assert len(data) < 4096
    header = validate_batch(data)
    validate_producer_batch(data, 0, header)  # within the default limit
    with pytest.raises(StrandError) as excinfo:
        validate_producer_batch(data, 0, header, max_uncompressed=1 << 20)
    assert excinfo.value.code == ErrorCode.CORRUPT_MESSAGE
    assert "within 1048576 bytes" in str(excinfo.value)


def test_snappy_bound_is_checked_before_inflating() -> None:
    payload = bytes(cramjam.snappy.compress_raw(bytes(2 << 20)))
    data = batch_of(payload, 1, codec=2)
    with pytest.raises(StrandError, match="inflates to"):
        validate_producer_batch(data, 0, validate_batch(data), max_uncompressed=1 << 20)
