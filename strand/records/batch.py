"""RecordBatch v2 header: layout, validation and in-place stamping.

Byte layout (Kafka's DefaultRecordBatch, magic 2)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
    maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
    recordCount int32 | records...

``batchLength`` counts the bytes after itself. The CRC-32C covers everything from
``attributes`` to the end, so the broker can stamp the base offset and the
partition leader epoch without touching the checksum, and never decodes records
to validate or store a batch.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

from strand.errors import CorruptRecordError
from strand.records.compression import Compression

Buffer = bytes | bytearray | memoryview

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
MAGIC = 2

BASE_OFFSET_POS = 0
LENGTH_POS = 8
PARTITION_LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21
LAST_OFFSET_DELTA_POS = 23
BASE_TIMESTAMP_POS = 27
MAX_TIMESTAMP_POS = 35
RECORDS_POS = HEADER_SIZE

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_OFFSET_AND_LENGTH = struct.Struct(">qi")
# baseOffset, batchLength, (skip to) lastOffsetDelta: all a scan for an offset needs.
SPAN = struct.Struct(">qi11xi")
SPAN_SIZE = SPAN.size  # 27
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@dataclass(slots=True)  # not frozen: a frozen 13-field __init__ costs ~3x on the hot path
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        codec = self.attributes & COMPRESSION_MASK
        if codec > Compression.ZSTD:
            raise CorruptRecordError(f"unknown compression codec {codec}")
        return Compression(codec)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes & TIMESTAMP_TYPE_FLAG) >> 3)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the fixed header at ``pos`` (no validation beyond the byte count)."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"record batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} available"
        )
    return BatchHeader(*HEADER.unpack_from(buf, pos))


def batch_size_at(buf: Buffer, pos: int) -> int | None:
    """Total size of the batch starting at ``pos``, or None if its length field is cut off."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    return int(_INT32.unpack_from(buf, pos + LENGTH_POS)[0]) + LOG_OVERHEAD


def compute_crc(buf: Buffer, pos: int, size: int) -> int:
    view = memoryview(buf)[pos + ATTRIBUTES_POS : pos + size]
    return int(crc32c.crc32c(view))


def validate_batch(buf: Buffer, pos: int = 0, end: int | None = None) -> BatchHeader:
    """Check a batch's framing, magic, field ranges and CRC without decoding its records.

    ``end`` bounds the batch (default: the end of ``buf``). Raises CorruptRecordError.
    """
    limit = len(buf) if end is None else end
    if limit - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"record batch at byte {pos} is cut off: {limit - pos} bytes, header is {HEADER_SIZE}"
        )
    header = BatchHeader(*HEADER.unpack_from(buf, pos))
    size = header.batch_length + LOG_OVERHEAD
    if size < HEADER_SIZE:
        raise CorruptRecordError(f"record batch length {header.batch_length} is too small")
    if pos + size > limit:
        raise CorruptRecordError(
            f"record batch at byte {pos} declares {size} bytes, only {limit - pos} available"
        )
    if header.magic != MAGIC:
        raise CorruptRecordError(f"unsupported record batch magic {header.magic} (expected 2)")
    if header.attributes & COMPRESSION_MASK > Compression.ZSTD:
        raise CorruptRecordError(
            f"unknown compression codec {header.attributes & COMPRESSION_MASK}"
        )
    if header.record_count < 0 or header.last_offset_delta < 0:
        raise CorruptRecordError("record batch has a negative record count or offset delta")
    actual = compute_crc(buf, pos, size)
    if actual != header.crc:
        raise CorruptRecordError(
            f"record batch CRC mismatch: stored {header.crc:#010x}, computed {actual:#010x}"
        )
    return header


def iter_batches(buf: Buffer) -> Iterator[tuple[int, BatchHeader]]:
    """Validate and yield (position, header) for each batch of a concatenation of batches.

    The whole buffer must consist of complete, valid batches.
    """
    pos = 0
    total = len(buf)
    while pos < total:
        header = validate_batch(buf, pos, total)
        yield pos, header
        pos += header.size_in_bytes


def split_batches(buf: Buffer) -> list[tuple[int, BatchHeader]]:
    return list(iter_batches(buf))


def stamp(buf: bytearray | memoryview, pos: int, base_offset: int, leader_epoch: int) -> None:
    """Write the base offset and partition leader epoch in place (outside the CRC)."""
    _INT64.pack_into(buf, pos + BASE_OFFSET_POS, base_offset)
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_POS, leader_epoch)


def stamped_prefix(buf: Buffer, pos: int, base_offset: int, leader_epoch: int) -> bytes:
    """The first bytes of a batch up to the magic byte, re-stamped (for scatter writes)."""
    prefix = bytearray(memoryview(buf)[pos : pos + MAGIC_POS])
    stamp(prefix, 0, base_offset, leader_epoch)
    return bytes(prefix)


def set_log_append_time(buf: bytearray, pos: int, size: int, timestamp: int) -> None:
    """Mark a batch LogAppendTime with ``timestamp`` as its max timestamp; fixes the CRC."""
    (attributes,) = _INT16.unpack_from(buf, pos + ATTRIBUTES_POS)
    _INT16.pack_into(buf, pos + ATTRIBUTES_POS, attributes | TIMESTAMP_TYPE_FLAG)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_POS, timestamp)
    _UINT32.pack_into(buf, pos + CRC_POS, compute_crc(buf, pos, size))


def peek_offset_and_size(buf: Buffer, pos: int) -> tuple[int, int]:
    base_offset, length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
    return int(base_offset), int(length) + LOG_OVERHEAD
