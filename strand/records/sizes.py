"""How many bytes a record takes in a v2 batch, computed without encoding it.

Kafka's ``DefaultRecord.sizeInBytes``: the record's length varint plus its body
(attributes byte, timestamp delta, offset delta, key, value, headers), exactly what
``BatchBuilder.append`` writes. The producer sizes every record before appending it
(for ``batch_size`` and ``buffer_memory``), so the size is split in two: the part
that depends only on the record (``record_fields_size``, computed once per record)
and its framing at a given place in a batch (``record_size_from_fields``).
"""

from __future__ import annotations

from collections.abc import Sequence

from strand.records.record import Header
from strand.records.varint import varint_size

__all__ = ["record_fields_size", "record_size", "record_size_from_fields"]


def record_size(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
) -> int:
    """Bytes a record adds to a v2 batch at these deltas (Kafka's ``sizeInBytes``)."""
    return record_size_from_fields(
        record_fields_size(key, value, headers), offset_delta, timestamp_delta
    )


def record_fields_size(
    key: bytes | None, value: bytes | None, headers: Sequence[Header]
) -> int:
    """The part of a record's size that does not depend on its place in a batch: key,
    value and headers, each with its length varint (-1, one byte, for null)."""
    size = 0
    if key is None:
        size += 1
    else:
        n = len(key)
        size += varint_size(n) + n
    if value is None:
        size += 1
    else:
        n = len(value)
        size += varint_size(n) + n
    size += varint_size(len(headers))
    for header_key, header_value in headers:  # rare: sized for brevity, not speed
        n = len(header_key.encode())
        size += varint_size(n) + n
        size += 1 if header_value is None else varint_size(len(header_value)) + len(header_value)
    return size


def record_size_from_fields(fields_size: int, offset_delta: int, timestamp_delta: int) -> int:
    """A record's whole size from its ``record_fields_size`` and its deltas in the batch."""
    # attributes byte, timestamp delta, offset delta, the fields; then the length prefix.
    body = 1 + varint_size(timestamp_delta) + varint_size(offset_delta) + fields_size
    return varint_size(body) + body
