"""What a leader checks in a producer's batch before writing it (Kafka's LogValidator).

``validate_batch`` (strand.records.batch) checks framing, magic and the CRC; a CRC
only proves the bytes are the ones the client sent, not that they make sense. This
module checks the records themselves, as Kafka's ``LogValidator`` with
``DefaultRecordBatch``/``DefaultRecord`` do, so that nothing a consumer cannot
decode is ever written and replicated:

* the header: at least one record, offset deltas 0..n-1 (``last_offset_delta ==
  record_count - 1``), a producer id only with a sequence, no LogAppendTime from a
  producer, and a record count the body can hold at all (each record takes at least
  7 bytes: a count of 2^31-1 in a 100-byte batch is refused before any work);
* a compressed body decompresses, within ``max_uncompressed`` bytes (a small batch
  may not inflate into gigabytes on the leader);
* the records, read by aiokafka's record reader: each record's fields end exactly
  where its length says, headers have a count >= 0 and non-null UTF-8 keys, no field
  runs past the body, exactly ``record_count`` records and no byte after them;
* offset delta i for the i-th record, and the header's max timestamp is the latest
  record timestamp (CreateTime: LogAppendTime batches are refused above);
* every record's attributes byte below 0x80: aiokafka reads that byte as a varint,
  Kafka and Strand as one byte, so from a larger one on they would read different
  records (found by fuzzing, fuzz/harnesses/record_batch.py);
* a key on every record of a compacted topic.

Why aiokafka's reader: it is Cython (no per-field Python), kept by aio-libs, and its
acceptance is a subset of Strand's own decoder's (strand.records.reader), so whatever
passes here decodes for every consumer. A tight pure-Python walk that built no
objects cost 10-20x more per record (bench/validation_bench.py). Its C varint reader
reads until a byte below 0x80 without a bound, so it is handed a copy followed by
zero bytes that lie outside the buffer it is given: a varint running off the end
stops on them, and the end-of-record checks then refuse it.

Codes follow Kafka: damage to a record's structure, or a count, offset or timestamp
the records contradict, is INVALID_RECORD; a body that does not decompress is
CORRUPT_MESSAGE (Kafka fails it as an unknown server error; the data is corrupt and
a retry cannot help); LogAppendTime set by a producer is INVALID_TIMESTAMP.
"""

from __future__ import annotations

import struct
from operator import attrgetter
from typing import Any

from aiokafka.errors import CorruptRecordException
from aiokafka.record.default_records import DefaultRecordBatch

from strand.errors import InvalidRecordError, InvalidTimestampError
from strand.records.batch import (
    ATTRIBUTES_POS,
    COMPRESSION_MASK,
    HEADER_SIZE,
    NO_PRODUCER_ID,
    TIMESTAMP_TYPE_FLAG,
    BatchHeader,
    Buffer,
)
from strand.records.compression import Compression, decompress_bounded
from strand.records.varint import decode_varint

__all__ = [
    "MAX_UNCOMPRESSED_BATCH_BYTES",
    "MIN_RECORD_SIZE",
    "validate_producer_batch",
]

# length varint (1) + attributes (1) + timestamp delta, offset delta, key length,
# value length, header count (1 each): the smallest record there is.
MIN_RECORD_SIZE = 7
# The most one compressed batch may inflate to on the leader (and on consumers).
MAX_UNCOMPRESSED_BATCH_BYTES = 64 << 20
# Zero bytes after the copy handed to the reader; a varint stops on the first one.
_GUARD = bytes(16)
_INT16 = struct.Struct(">h")
_OFFSET = attrgetter("offset")
_TIMESTAMP = attrgetter("timestamp")
_KEY = attrgetter("key")


# One decode error type per reader: aiokafka's, plus what its pure-Python fallback
# (AIOKAFKA_NO_EXTENSIONS) lets through, plus the MemoryError of its C reader for a
# length varint near 2^63 (its bounds check overflows; the allocation is refused).
_READER_ERRORS = (CorruptRecordException, IndexError, ValueError, UnicodeDecodeError,
                  OverflowError, MemoryError)


def validate_producer_batch(
    buf: Buffer,
    pos: int,
    header: BatchHeader,
    *,
    require_keys: bool = False,
    max_uncompressed: int = MAX_UNCOMPRESSED_BATCH_BYTES,
) -> None:
    """Check that the batch at ``pos`` (framing and CRC already validated, giving
    ``header``) holds exactly the records its header claims.

    ``require_keys``: refuse a record without a key (compacted topics).
    Raises InvalidRecordError, CorruptRecordError or InvalidTimestampError.
    """
    count = header.record_count
    if count < 1:
        raise InvalidRecordError(f"a producer batch must hold at least one record, "
                                 f"its header says {count}")
    if header.last_offset_delta != count - 1:
        raise InvalidRecordError(
            f"a producer batch must hold records with offset deltas 0..n-1; got "
            f"{count} records, last offset delta {header.last_offset_delta}")
    # Transaction markers (control batches, written by coordinators; producers' are
    # refused by the produce path) carry a producer id without a sequence.
    if (header.producer_id != NO_PRODUCER_ID and header.base_sequence < 0
            and not header.is_control):
        raise InvalidRecordError(f"batch of producer id {header.producer_id} has invalid "
                                 f"sequence number {header.base_sequence}")
    if header.attributes & TIMESTAMP_TYPE_FLAG:
        raise InvalidTimestampError("a producer may not mark a batch LogAppendTime; the "
                                    "topic's message.timestamp.type decides that")
    start = pos + HEADER_SIZE
    end = pos + header.size_in_bytes
    view = memoryview(buf)
    compression = header.compression
    if compression == Compression.NONE:
        body_size = end - start
        if count > body_size // MIN_RECORD_SIZE:
            raise _count_error(count, body_size)
        copy = b"".join((view[pos:end], _GUARD))
    else:
        if count > max_uncompressed // MIN_RECORD_SIZE:
            raise _count_error(count, max_uncompressed)
        body = decompress_bounded(compression, view[start:end], max_uncompressed)
        body_size = len(body)
        if count > body_size // MIN_RECORD_SIZE:
            raise _count_error(count, body_size)
        # The same header, marked uncompressed, over the decompressed records.
        fixed = bytearray(view[pos:start])
        _INT16.pack_into(fixed, ATTRIBUTES_POS,
                         header.attributes & ~COMPRESSION_MASK)
        copy = b"".join((fixed, body, _GUARD))
    batch = memoryview(copy)[: len(copy) - len(_GUARD)]
    try:
        records = list(DefaultRecordBatch(batch))
    except _READER_ERRORS as exc:
        detail = exc.args[0] if exc.args else type(exc).__name__
        raise InvalidRecordError(
            f"batch of {count} records is malformed: {detail}") from None
    _check_attributes_bytes(copy, HEADER_SIZE, count)
    _check_records(records, header, require_keys and not header.is_control)


def _check_attributes_bytes(data: bytes, pos: int, count: int) -> None:
    """Refuse a record whose attributes byte (unused: 0 from every producer) has its
    top bit set. Kafka and Strand's decoder read it as one byte; aiokafka's reader reads
    it as a varint, so from such a byte on it reads other records than every consumer
    will, and the checks above would pass a batch consumers read otherwise or not at
    all. Called once aiokafka has read the batch: the length varints frame it. A walk
    over the lengths only, ~0.1 us a record (bench/validation_bench.py)."""
    for index in range(count):
        # Lengths aiokafka accepted are >= 0: zig-zag decoding is a shift.
        first = data[pos]
        if first < 0x80:  # one byte: records up to 63 bytes
            length = first >> 1
            pos += 1
        elif data[pos + 1] < 0x80:  # two bytes: up to 8191
            length = ((first & 0x7F) | (data[pos + 1] << 7)) >> 1
            pos += 2
        else:
            length, pos = decode_varint(data, pos)
        if data[pos] & 0x80:
            raise InvalidRecordError(
                f"record {index} has attributes byte {data[pos]:#04x}; record attributes "
                f"are unused and must be below 0x80 (producers write 0)")
        pos += length


def _count_error(count: int, size: int) -> InvalidRecordError:
    return InvalidRecordError(
        f"record count {count} does not fit in {size} bytes of records "
        f"(a record takes at least {MIN_RECORD_SIZE})")


def _check_records(records: list[Any], header: BatchHeader, require_keys: bool) -> None:
    """Offsets, max timestamp and keys, each in one C-level pass over the records."""
    base = header.base_offset
    offsets = list(map(_OFFSET, records))
    if offsets != list(range(base, base + len(records))):
        index = next(i for i, offset in enumerate(offsets) if offset != base + i)
        raise InvalidRecordError(
            f"record {index} has offset delta {offsets[index] - base}, expected {index}")
    timestamps = list(map(_TIMESTAMP, records))
    try:
        latest = max(timestamps)
    except TypeError:  # aiokafka reports a timestamp of -1 as None
        latest = max(-1 if t is None else t for t in timestamps)
    if latest is None:
        latest = -1
    if header.max_timestamp != latest:
        raise InvalidRecordError(
            f"batch max timestamp {header.max_timestamp} is not its latest record's "
            f"timestamp {latest}")
    if require_keys and None in map(_KEY, records):
        index = list(map(_KEY, records)).index(None)
        raise InvalidRecordError(
            f"compacted topic: the record at offset delta {index} has no key")
