"""Checking stored batches against their checksums: what is served, and what rests.

A batch's CRC-32C (Kafka's RecordBatch v2) covers everything from its attributes to
its end; its framing (length, magic) and the order of base offsets are checked too.
The base offset and partition leader epoch lie outside the CRC (the leader stamps
them in place), so a flip there is caught only when it breaks the offset order.

* :func:`verify_batches` checks bytes about to be served (a fetch, a replica fetch)
  and says how many of them are whole and valid: the valid prefix may be served,
  the rest never.
* :func:`scan_segment` checks a stretch of a segment file (the background scrub),
  and :func:`find_damage` the log from a suspect offset on (the repair locates the
  first bad batch with it before cutting the log there).

CRC-32C runs in C (the ``crc32c`` package, hardware instructions), so a check costs
a pass over the bytes at memory speed and one Python step per batch, never per record.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

from strand.errors import CorruptRecordError
from strand.log.log import PartitionLog
from strand.log.segment import LogSegment
from strand.records.batch import (
    ATTRIBUTES_POS,
    COMPRESSION_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    Buffer,
    batch_size_at,
    validate_batch,
)
from strand.records.compression import Compression

# A scrub step reads at most this much of a segment at once (plus one batch larger).
SCAN_CHUNK = 1 << 20
# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# (skip to) recordCount
_CHECKED_FIELDS = struct.Struct(">qiibIhi30xi")
_MAX_CODEC = max(Compression)


@dataclass(frozen=True, slots=True)
class Verified:
    """The outcome of :func:`verify_batches`."""

    valid_bytes: int  # the whole, valid batches at the start of the bytes
    batches: int  # how many there are
    next_offset: int  # the offset after the last of them (-1: none)
    error: str | None = None  # why the batch after them is bad (None: all good)


@dataclass(frozen=True, slots=True)
class Damage:
    """The first bad batch found in a segment: the log is trustworthy before it."""

    segment_base_offset: int
    position: int  # byte of the segment where the bad batch starts
    offset: int  # the first offset that cannot be trusted (the bad batch's, at most)
    detail: str

    def describe(self) -> str:
        return (f"batch at byte {self.position} of segment {self.segment_base_offset:020d}.log "
                f"(offset {self.offset}): {self.detail}")


@dataclass(frozen=True, slots=True)
class ScanStep:
    """The outcome of one :func:`scan_segment` step."""

    next_position: int  # where the next step starts (the segment's size: done)
    next_offset: int  # the least base offset the next batch may have
    batches: int
    bytes: int
    damage: Damage | None = None


def verify_batches(data: Buffer, min_offset: int = -1) -> Verified:
    """Check consecutive batches: framing, magic, CRC, base offsets never going back
    (each at or after ``min_offset``, then after the previous batch). A batch cut off
    at the end of ``data`` counts as bad: reads return whole batches only.

    The loop reads only the header fields it checks and hands the CRC to C, so small
    batches cost about a microsecond each; a batch that fails is checked again by
    :func:`validate_batch` for the message that says why."""
    view = memoryview(data)
    total = len(view)
    position = batches = 0
    expected = min_offset
    next_offset = -1
    unpack = _CHECKED_FIELDS.unpack_from
    crc = crc32c.crc32c
    while position < total:
        if total - position < HEADER_SIZE:
            return _bad(view, position, total, batches, next_offset)
        (base_offset, length, _, magic, stored_crc, attributes, last_offset_delta,
         record_count) = unpack(view, position)
        end = position + length + LOG_OVERHEAD
        if (magic != MAGIC or length + LOG_OVERHEAD < HEADER_SIZE or end > total
                or attributes & COMPRESSION_MASK > _MAX_CODEC or last_offset_delta < 0
                or record_count < 0
                or crc(view[position + ATTRIBUTES_POS:end]) != stored_crc):
            return _bad(view, position, total, batches, next_offset)
        if base_offset < expected:
            return Verified(position, batches, next_offset,
                            f"base offset {base_offset} goes back (expected at least "
                            f"{expected})")
        expected = next_offset = base_offset + last_offset_delta + 1
        position = end
        batches += 1
    return Verified(position, batches, next_offset)


def _bad(view: memoryview, position: int, total: int, batches: int,
         next_offset: int) -> Verified:
    try:
        validate_batch(view, position, total)
    except CorruptRecordError as exc:
        return Verified(position, batches, next_offset, str(exc))
    # The fast checks are a subset of validate_batch's; reaching here is a bug.
    raise AssertionError(f"batch at byte {position} failed a check validate_batch passes")


def scan_segment(segment: LogSegment, position: int, min_offset: int,
                 max_bytes: int = SCAN_CHUNK) -> ScanStep:
    """Verify the whole batches of ``segment`` from byte ``position`` (a batch start),
    about ``max_bytes`` of them; ``min_offset`` is the least base offset the first may
    have. Blocking: run it in a disk thread."""
    end = segment.size
    if position >= end:
        return ScanStep(end, min_offset, 0, 0)
    remaining = end - position
    data = segment.read_at(position, min(max(max_bytes, HEADER_SIZE), remaining))
    size = batch_size_at(data, 0)
    if size is not None and len(data) < size <= remaining:
        data = segment.read_at(position, size)  # one batch larger than a step
    checked = verify_batches(data, min_offset)
    stop = position + checked.valid_bytes
    next_offset = checked.next_offset if checked.batches else min_offset
    if checked.error is None or _cut_by_step(data, checked.valid_bytes, remaining):
        return ScanStep(stop, next_offset, checked.batches, checked.valid_bytes)
    return ScanStep(stop, next_offset, checked.batches, checked.valid_bytes, Damage(
        segment.base_offset, stop, max(next_offset, segment.base_offset), checked.error))


def _cut_by_step(data: bytes, valid: int, remaining: int) -> bool:
    """Whether the batch after the ``valid`` bytes is only cut off by the end of the
    step (the next step reads it whole) rather than damaged."""
    if valid == 0 or len(data) >= remaining:
        return False  # the step read a whole batch, or up to the segment's end
    size = batch_size_at(data, valid)
    return size is None or (size >= HEADER_SIZE and valid + size > len(data)
                            and valid + size <= remaining)


def find_damage(partition_log: PartitionLog, from_offset: int) -> Damage | None:
    """The first bad batch of the log at or after the segment holding ``from_offset``
    (None: every batch there is valid). Reads those segments whole: blocking."""
    segments = partition_log.segments
    start = 0
    for i, segment in enumerate(segments):
        if segment.base_offset <= from_offset:
            start = i
    for segment in segments[start:]:
        position, min_offset = 0, segment.base_offset
        while position < segment.size:
            step = scan_segment(segment, position, min_offset)
            if step.damage is not None:
                return step.damage
            if step.next_position == position:
                break  # nothing whole left: the segment's size moved under us
            position, min_offset = step.next_position, step.next_offset
    return None
