"""Build RecordBatch v2 bytes from records (producer side, and the log cleaner)."""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence

import crc32c

from strand.errors import InvalidRecordError, InvalidTimestampError
from strand.records.batch import (
    CONTROL_FLAG,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_FLAG,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    TimestampType,
)
from strand.records.compression import Compression, compress
from strand.records.record import Header
from strand.records.varint import (
    UNSIGNED_VARINT_TABLE,
    UNSIGNED_VARINT_TABLE_LIMIT,
    encode_varint,
)

_NULL = b"\x01"  # zig-zag(-1): a null key, value or header value
_NO_HEADERS = b"\x00"
_ATTRIBUTES = b"\x00"  # record attributes: unused, always 0
_INT64_MAX = (1 << 63) - 1
_INT32_MAX = (1 << 31) - 1
NO_TIMESTAMP = -1


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class BatchBuilder:
    """Accumulates records and builds one batch.

    Each record costs a handful of table look-ups and one ``bytes.join``; the only
    per-byte work (compression, CRC) runs in C.
    """

    __slots__ = (
        "_attributes",
        "_base_offset",
        "_base_sequence",
        "_base_timestamp",
        "_compression",
        "_last_offset_delta",
        "_max_timestamp",
        "_partition_leader_epoch",
        "_parts",
        "_producer_epoch",
        "_producer_id",
        "_record_count",
        "_size",
    )

    def __init__(
        self,
        *,
        compression: Compression | str = Compression.NONE,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        transactional: bool = False,
        control: bool = False,
        base_offset: int = 0,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> None:
        # A name too ("lz4", as the producer's compression_type): unknown → typed error.
        self._compression = Compression.parse(compression)
        attributes = int(self._compression)
        if timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_FLAG
        if transactional:
            attributes |= TRANSACTIONAL_FLAG
        if control:
            attributes |= CONTROL_FLAG
        self._attributes = attributes
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._base_offset = base_offset
        self._partition_leader_epoch = partition_leader_epoch
        self._parts: list[bytes] = []
        self._base_timestamp: int | None = None
        self._max_timestamp = -1
        self._last_offset_delta = -1
        self._record_count = 0
        self._size = 0

    @property
    def record_count(self) -> int:
        return self._record_count

    @property
    def uncompressed_size(self) -> int:
        """Bytes of the batch if built now without compression."""
        return HEADER_SIZE + self._size

    def append(
        self,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[Header] = (),
        timestamp: int | None = None,
        offset: int | None = None,
    ) -> int:
        """Add a record; returns its offset delta.

        ``offset`` (absolute) lets the cleaner keep a record's original offset; it
        must increase from record to record. By default offsets are contiguous.
        """
        if timestamp is None:
            timestamp = now_ms()
        elif not NO_TIMESTAMP <= timestamp <= _INT64_MAX:
            raise InvalidTimestampError(f"timestamp {timestamp} is not in [-1, 2^63-1]")
        base_ts = self._base_timestamp
        if base_ts is None:
            base_ts = self._base_timestamp = timestamp
        elif timestamp - base_ts > _INT64_MAX:
            # Kafka stores the delta as a 64-bit varlong; beyond that readers would wrap it.
            raise InvalidTimestampError(
                f"timestamp {timestamp} is too far from the batch's first ({base_ts})")
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        if offset is None:
            offset_delta = self._last_offset_delta + 1
        else:
            offset_delta = offset - self._base_offset
            if offset_delta <= self._last_offset_delta:
                raise InvalidRecordError(f"offset {offset} does not follow the previous record")
        if offset_delta > _INT32_MAX:
            raise InvalidRecordError(f"offset delta {offset_delta} does not fit in 32 bits")
        self._last_offset_delta = offset_delta

        table = UNSIGNED_VARINT_TABLE
        limit = UNSIGNED_VARINT_TABLE_LIMIT
        ts_delta = timestamp - base_ts
        z = (ts_delta << 1) if ts_delta >= 0 else ((-ts_delta) << 1) - 1
        parts = [_ATTRIBUTES, table[z] if z < limit else encode_varint(ts_delta)]
        parts.append(
            table[offset_delta << 1]
            if offset_delta < limit >> 1
            else encode_varint(offset_delta)
        )
        if key is None:
            parts.append(_NULL)
        else:
            n = len(key) << 1
            parts.append(table[n] if n < limit else encode_varint(len(key)))
            parts.append(key)
        if value is None:
            parts.append(_NULL)
        else:
            n = len(value) << 1
            parts.append(table[n] if n < limit else encode_varint(len(value)))
            parts.append(value)
        if headers:
            parts.append(encode_varint(len(headers)))
            for header_key, header_value in headers:
                encoded_key = header_key.encode()
                parts.append(encode_varint(len(encoded_key)))
                parts.append(encoded_key)
                if header_value is None:
                    parts.append(_NULL)
                else:
                    parts.append(encode_varint(len(header_value)))
                    parts.append(header_value)
        else:
            parts.append(_NO_HEADERS)
        body = b"".join(parts)
        n = len(body) << 1
        prefix = table[n] if n < limit else encode_varint(len(body))
        self._parts.append(prefix)
        self._parts.append(body)
        self._size += len(prefix) + len(body)
        self._record_count += 1
        return offset_delta

    def set_producer_state(self, producer_id: int, producer_epoch: int,
                           base_sequence: int, transactional: bool = False) -> None:
        """Stamp the idempotent producer's id, epoch and sequence, and whether the
        batch belongs to a transaction (set when the producer sends the batch, after
        its records were appended)."""
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        if transactional:
            self._attributes |= TRANSACTIONAL_FLAG
        else:
            self._attributes &= ~TRANSACTIONAL_FLAG

    def set_last_offset_delta(self, last_offset_delta: int) -> None:
        """Keep a batch's original offset span when the cleaner drops its tail records."""
        if last_offset_delta < self._last_offset_delta:
            raise ValueError("last offset delta cannot shrink below the last record")
        self._last_offset_delta = last_offset_delta

    def build(self) -> bytes:
        if self._record_count == 0:
            raise ValueError("a record batch needs at least one record")
        payload = b"".join(self._parts)
        if self._compression != Compression.NONE:
            payload = compress(self._compression, payload)
        base_ts = self._base_timestamp if self._base_timestamp is not None else -1
        try:
            packed = HEADER.pack(
                self._base_offset,
                HEADER_SIZE + len(payload) - LOG_OVERHEAD,
                self._partition_leader_epoch,
                MAGIC,
                0,
                self._attributes,
                self._last_offset_delta,
                base_ts,
                self._max_timestamp,
                self._producer_id,
                self._producer_epoch,
                self._base_sequence,
                self._record_count,
            )
        except struct.error as exc:  # e.g. a producer epoch from a request, past int16
            raise InvalidRecordError(f"a batch header field is out of range: {exc}") from None
        header = bytearray(packed)
        crc = crc32c.crc32c(payload, crc32c.crc32c(memoryview(header)[21:]))
        header[17:21] = crc.to_bytes(4, "big")
        return bytes(header) + payload


def build_empty_batch(header: BatchHeader) -> bytes:
    """A batch with ``header``'s fields and offset span but no record: what compaction
    keeps of a producer's last batch once all its records are gone (as Kafka does),
    so the producer's epoch and last sequence can still be rebuilt from the log."""
    attributes = header.attributes & ~0x07  # no payload: no compression
    packed = bytearray(HEADER.pack(
        header.base_offset, HEADER_SIZE - LOG_OVERHEAD, header.partition_leader_epoch,
        MAGIC, 0, attributes, header.last_offset_delta, header.base_timestamp,
        header.max_timestamp, header.producer_id, header.producer_epoch,
        header.base_sequence, 0))
    crc = crc32c.crc32c(b"", crc32c.crc32c(memoryview(packed)[21:]))
    packed[17:21] = crc.to_bytes(4, "big")
    return bytes(packed)
