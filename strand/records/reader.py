"""Decode record batches into records (consumer side, the cleaner, tests)."""

from __future__ import annotations

from collections.abc import Iterator

from strand.errors import CorruptRecordError
from strand.records.batch import (
    HEADER_SIZE,
    BatchHeader,
    TimestampType,
    read_header,
    validate_batch,
)
from strand.records.compression import Compression, decompress
from strand.records.record import Header, Record
from strand.records.varint import decode_varint

Buffer = bytes | bytearray | memoryview


class RecordBatch:
    """One batch: its header fields and, decoded on demand, its records."""

    __slots__ = ("_data", "header")

    def __init__(self, data: Buffer, *, validate: bool = True) -> None:
        self.header: BatchHeader = validate_batch(data) if validate else read_header(data)
        if len(data) != self.header.size_in_bytes:
            data = memoryview(data)[: self.header.size_in_bytes]
        self._data = data

    @property
    def raw(self) -> bytes:
        return bytes(self._data)

    def records(self) -> list[Record]:
        h = self.header
        payload = memoryview(self._data)[HEADER_SIZE:]
        compression = h.compression
        body = bytes(payload) if compression == Compression.NONE else decompress(
            compression, payload
        )
        log_append_time = (
            h.max_timestamp if h.timestamp_type == TimestampType.LOG_APPEND_TIME else None
        )
        return decode_records(body, h.record_count, h.base_offset, h.base_timestamp,
                              log_append_time)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())


def iter_record_batches(buf: Buffer, *, validate: bool = True) -> Iterator[RecordBatch]:
    """Yield each complete batch of a concatenation; a cut-off tail is ignored.

    A fetch may end in a partial batch (Kafka's semantics), so the tail is skipped
    rather than reported; damage inside a complete batch is reported.
    """
    view = memoryview(buf)
    pos = 0
    total = len(view)
    while total - pos >= HEADER_SIZE:
        header = read_header(view, pos)
        if header.size_in_bytes < HEADER_SIZE:
            # Not a cut-off tail: a length that cannot frame a batch (and, negative,
            # would move the walk backwards).
            raise CorruptRecordError(
                f"record batch at byte {pos} declares {header.size_in_bytes} bytes, "
                f"less than its {HEADER_SIZE}-byte header")
        end = pos + header.size_in_bytes
        if end > total:
            break
        yield RecordBatch(view[pos:end], validate=validate)
        pos = end


def decode_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None = None,
) -> list[Record]:
    out: list[Record] = []
    pos = 0
    dv = decode_varint
    try:
        for _ in range(count):
            length, pos = dv(data, pos)
            end = pos + length
            pos += 1  # record attributes (unused)
            ts_delta, pos = dv(data, pos)
            offset_delta, pos = dv(data, pos)
            n, pos = dv(data, pos)
            if n < 0:
                key = None
            else:
                key = data[pos : pos + n]
                pos += n
            n, pos = dv(data, pos)
            if n < 0:
                value = None
            else:
                value = data[pos : pos + n]
                pos += n
            header_count, pos = dv(data, pos)
            if header_count < 0:
                raise CorruptRecordError(f"invalid number of record headers {header_count}")
            headers: list[Header] = []
            for _ in range(header_count):
                n, pos = dv(data, pos)
                if n < 0:
                    raise CorruptRecordError("record header key is null")
                header_key = data[pos : pos + n].decode()
                pos += n
                n, pos = dv(data, pos)
                if n < 0:
                    headers.append((header_key, None))
                else:
                    headers.append((header_key, data[pos : pos + n]))
                    pos += n
            if pos != end:
                raise CorruptRecordError(
                    f"record at offset delta {offset_delta} has length {length}, "
                    f"fields take {length + pos - end}"
                )
            timestamp = base_timestamp + ts_delta if log_append_time is None else log_append_time
            out.append(Record(base_offset + offset_delta, timestamp, key, value, headers))
    except (IndexError, UnicodeDecodeError, ValueError) as exc:
        raise CorruptRecordError(f"record data is malformed: {exc}") from exc
    if pos != len(data):
        raise CorruptRecordError(f"{len(data) - pos} bytes follow the batch's {count} records")
    return out
