"""Inputs the fuzzer found (fuzz/harnesses/record_batch.py, docs/fuzzing.md) that made a
record decoder fail untyped or work far harder than the input deserved."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import cramjam
import crc32c
import pytest

from strand.errors import CorruptRecordError, InvalidRecordError
from strand.records import BatchBuilder, Compression, RecordBatch, iter_record_batches
from strand.records.batch import HEADER, validate_batch
from strand.records.compression import compress, decompress_bounded
from strand.records.control import ControlType, build_end_txn_marker
from strand.records.validation import validate_producer_batch
from strand.records.varint import encode_varint

LENGTH_POS, CRC_POS, ATTRIBUTES_POS = 8, 17, 21


def _batch(count: int = 2) -> bytearray:
    builder = BatchBuilder()
    for i in range(count):
        builder.append(b"value-%d" % i, key=b"k", timestamp=1_700_000_000_000 + i)
    return bytearray(builder.build())


@pytest.mark.parametrize("length", [0, 48, -12, -200])
@pytest.mark.parametrize("check_crcs", [True, False])
def test_a_batch_length_shorter_than_its_header_is_corrupt(length: int,
                                                           check_crcs: bool) -> None:
    """A consumer (check_crcs off) walked backwards on a negative length and hit a
    struct.error at a negative offset; a length too short to frame a batch is damage."""
    data = _batch() + _batch() + _batch() + _batch()  # long enough to walk back into
    struct.pack_into(">i", data, LENGTH_POS, length)
    with pytest.raises(CorruptRecordError, match="less than its 61-byte header"):
        for batch in iter_record_batches(bytes(data), validate=check_crcs):
            batch.records()


def _counting(monkeypatch: pytest.MonkeyPatch, codec: str) -> list[int]:
    """Sizes of the output buffers ``decompress_bounded`` tries for ``codec``."""
    sizes: list[int] = []
    real: Callable[[Any, bytearray], int] = getattr(cramjam, codec).decompress_into

    def counted(data: Any, out: bytearray) -> int:
        sizes.append(len(out))
        return real(data, out)

    monkeypatch.setattr(getattr(cramjam, codec), "decompress_into", counted)
    return sizes


@pytest.mark.parametrize(("codec", "name"), [(Compression.LZ4, "lz4"),
                                             (Compression.GZIP, "gzip"),
                                             (Compression.ZSTD, "zstd")])
def test_damaged_compressed_records_fail_at_once(monkeypatch: pytest.MonkeyPatch,
                                                 codec: Compression, name: str) -> None:
    """A few damaged bytes used to be retried into ever larger zeroed buffers up to the
    64 MiB limit (about 100 MB allocated, tens of milliseconds of leader CPU each)."""
    sizes = _counting(monkeypatch, name)
    with pytest.raises(CorruptRecordError):
        decompress_bounded(codec, b"\x00\x01 not compressed at all \xff" * 4, 64 << 20)
    assert len(sizes) == 1


def test_records_larger_than_the_first_buffer_still_grow_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = _counting(monkeypatch, "lz4")
    data = bytes(4 << 20)  # compresses into a few KiB: far past the first buffer
    assert decompress_bounded(Compression.LZ4, compress(Compression.LZ4, data),
                              64 << 20) == data
    assert len(sizes) > 1 and sizes == sorted(sizes)


def _producer_batch(record_body: bytes) -> bytes:
    """One record of ``record_body`` (after its length) in a batch with a valid CRC."""
    record = encode_varint(len(record_body)) + record_body
    header = bytearray(HEADER.pack(0, 0, -1, 2, 0, 0, 0, 1, 1, -1, -1, -1, 1))
    data = header + record
    struct.pack_into(">i", data, LENGTH_POS, len(data) - 12)
    struct.pack_into(">I", data, CRC_POS, crc32c.crc32c(bytes(data[ATTRIBUTES_POS:])))
    return bytes(data)


def test_a_value_length_near_2_63_is_an_invalid_record() -> None:
    """A 10-byte length varint whose value is near 2^63 overflowed the bounds check of
    aiokafka's C reader, which then raised MemoryError on the leader (an unknown server
    error for a 90-byte produce request) instead of INVALID_RECORD."""
    huge_length = bytes.fromhex("b0ffffffffffffffff2d")
    body = b"\x00" + encode_varint(0) + encode_varint(0) + encode_varint(1) + b"k" \
        + huge_length + b"\x00"
    data = _producer_batch(body)
    header = validate_batch(data)
    with pytest.raises(InvalidRecordError, match="malformed"):
        validate_producer_batch(data, 0, header)


@pytest.mark.parametrize("fields", [{"producer_epoch": 40_000}, {"producer_epoch": -40_000},
                                    {"producer_id": 1 << 63}])
def test_a_marker_with_header_fields_out_of_range_is_an_invalid_record(
        fields: dict[str, int]) -> None:
    """A WriteTxnMarkers request's int32 producer epoch reached the int16 header field:
    the storage node's marker build raised struct.error (found through
    fuzz/harnesses/gateway_requests.py)."""
    marker = {"producer_id": 7, "producer_epoch": 1, "coordinator_epoch": 1, **fields}
    with pytest.raises(InvalidRecordError, match="out of range"):
        build_end_txn_marker(ControlType.ABORT, **marker)


@pytest.mark.parametrize("attributes", [0x80, 0xFF])
def test_a_record_attributes_byte_aiokafka_reads_as_a_varint_is_refused(
        attributes: int) -> None:
    """aiokafka's reader, which the leader validates with, reads a record's attributes
    byte as a varint; Kafka and Strand read one byte. The fuzzer found a batch both read
    without error but into different records (another key, another timestamp): the
    leader accepted what consumers then read otherwise."""
    data = _batch(3)
    second = 61 + 1 + data[61] // 2  # past the first record's length byte and body
    data[second + 1] = attributes  # the second record's attributes byte
    batch = _producer_batch_crc(data)
    with pytest.raises(InvalidRecordError, match="attributes byte"):
        validate_producer_batch(batch, 0, validate_batch(batch))


def test_the_crash_input_is_refused_where_the_readers_disagreed() -> None:
    """The fuzzer's own input: two records; aiokafka read the second's key as b'\\xff'
    and its timestamp one later, Strand's decoder (as Kafka) b'\\x02'."""
    body = bytes.fromhex("12000000026b0476300012ff00020202ffff3100")
    header = HEADER.pack(0, 0, -1, 2, 0, 0, 1, 1_700_000_000_000, 1_700_000_000_001,
                         -1, -1, 0, 2)
    batch = _producer_batch_crc(bytearray(header + body))
    assert [r.key for r in RecordBatch(batch).records()] == [b"k", b"\x02"]
    with pytest.raises(InvalidRecordError, match="record 1 has attributes byte 0xff"):
        validate_producer_batch(batch, 0, validate_batch(batch))


def _producer_batch_crc(data: bytearray) -> bytes:
    struct.pack_into(">i", data, LENGTH_POS, len(data) - 12)
    struct.pack_into(">I", data, CRC_POS, crc32c.crc32c(bytes(data[ATTRIBUTES_POS:])))
    return bytes(data)
