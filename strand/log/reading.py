"""Reads over a snapshot of a log's segment list: no lock, bounded by the offsets the
caller read before starting (see :mod:`strand.log.log`)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from strand.errors import OffsetOutOfRangeError
from strand.log.segment import LogSegment


def read_batches(
    segments: Sequence[LogSegment], bases: Sequence[int], start: int, end: int,
    offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool,
) -> bytes:
    """Whole batches from the one holding ``offset`` of the log [``start``, ``end``),
    up to ``max_bytes``, none at or past ``max_offset``."""
    if offset < start or offset > end:
        raise OffsetOutOfRangeError(
            f"offset {offset} is out of range: the log holds [{start}, {end})"
        )
    upper = end if max_offset is None else min(max_offset, end)
    if offset >= upper:
        return b""
    for segment in segments[max(0, bisect_right(bases, offset) - 1) :]:
        data = segment.read(offset, max_bytes, upper, min_one_batch)
        if data is not None:
            return data
    return b""


def offset_for_timestamp(
    segments: Sequence[LogSegment], start: int, timestamp: int, max_offset: int | None
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or after ``start`` with a timestamp
    >= ``timestamp`` (None past ``max_offset``)."""
    for segment in segments:
        if segment.max_timestamp < timestamp:
            continue
        found = segment.find_offset_by_timestamp(timestamp, start)
        if found is not None:
            if max_offset is not None and found[0] >= max_offset:
                return None
            return found
    return None
