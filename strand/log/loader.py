"""Turn a partition directory into a consistent list of segments.

Runs on every open, in this order (as Kafka's LogLoader does):

1. Remove leftovers that never became part of the log: ``*.tmp`` checkpoints,
   ``*.cleaned`` compaction output, ``*.deleted`` segment files.
2. Finish interrupted compaction swaps: a ``.log.swap`` file is a complete,
   fsynced cleaned segment; the segments it replaces are deleted and it is renamed
   into place. A crash at any point of a swap therefore ends in the same log.
3. Delete index files whose ``.log`` is gone.
4. Open segments. After an unclean shutdown every segment from the one holding the
   recovery point onwards is recovered: each batch's length, magic, CRC and offset
   order is checked and the segment is truncated at the first bad byte; if a
   segment had to be truncated, every later segment is deleted (its data no longer
   follows on). Otherwise indexes are loaded and sanity-checked, and rebuilt when
   missing or inconsistent.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from strand.errors import CorruptRecordError, StorageError
from strand.log.config import LogConfig
from strand.log.files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TMP_SUFFIX,
    TXN_INDEX_SUFFIX,
    fsync_directory,
    parse_base_offset,
    segment_path,
)
from strand.log.segment import LogSegment
from strand.records.batch import HEADER_SIZE, read_header

log = logging.getLogger(__name__)


@dataclass(slots=True)
class LoadResult:
    segments: list[LogSegment]
    truncated_bytes: int
    deleted_segments: int


def _swap_next_offset(path: Path, base_offset: int) -> int:
    """Next offset of a complete swap file (it was fsynced before being renamed)."""
    next_offset = base_offset
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        position = 0
        while size - position >= HEADER_SIZE:
            header = read_header(os.pread(f.fileno(), HEADER_SIZE, position))
            if header.size_in_bytes < HEADER_SIZE or header.size_in_bytes > size - position:
                # A damaged swap (a length of 0 would loop here forever): the segments
                # it replaces may be gone already, so neither side can be trusted.
                raise CorruptRecordError(
                    f"{path.name}: batch at byte {position} declares "
                    f"{header.size_in_bytes} bytes; the compaction swap is damaged")
            next_offset = header.next_offset
            position += header.size_in_bytes
    return next_offset


def _delete_segment_files(directory: Path, base_offset: int) -> None:
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        segment_path(directory, base_offset, suffix).unlink(missing_ok=True)


def _remove_leftovers(directory: Path) -> None:
    for path in directory.iterdir():
        name = path.name
        if name.endswith((TMP_SUFFIX, CLEANED_SUFFIX, DELETED_SUFFIX)):
            path.unlink(missing_ok=True)


def _complete_swaps(directory: Path) -> None:
    swaps = sorted(
        (base, path)
        for path in directory.glob(f"*{LOG_SUFFIX}{SWAP_SUFFIX}")
        if (base := parse_base_offset(path.name)) is not None
    )
    for base, swap in swaps:
        end = _swap_next_offset(swap, base)
        for log_path in directory.glob(f"*{LOG_SUFFIX}"):
            other = parse_base_offset(log_path.name)
            if other is not None and base <= other < end:
                _delete_segment_files(directory, other)
        _delete_segment_files(directory, base)
        os.replace(swap, segment_path(directory, base, LOG_SUFFIX))
        log.info("completed interrupted compaction swap", extra={"segment": swap.name})
    if swaps:
        fsync_directory(directory)


def _remove_orphan_indexes(directory: Path) -> None:
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        for path in directory.glob(f"*{suffix}"):
            base = parse_base_offset(path.name)
            if base is None or not segment_path(directory, base, LOG_SUFFIX).exists():
                path.unlink(missing_ok=True)


def load_segments(
    directory: Path,
    config: LogConfig,
    *,
    clean_shutdown: bool,
    recovery_point: int,
    log_start_offset: int,
    now_ms: int,
) -> LoadResult:
    _remove_leftovers(directory)
    _complete_swaps(directory)
    _remove_orphan_indexes(directory)
    bases = sorted(
        base
        for path in directory.glob(f"*{LOG_SUFFIX}")
        if (base := parse_base_offset(path.name)) is not None
    )
    # Recover from the segment holding the recovery point (everything after it may
    # never have reached the disk).
    first_unflushed = 0
    for i, base in enumerate(bases):
        if base <= recovery_point:
            first_unflushed = i
    segments: list[LogSegment] = []
    truncated = 0
    deleted = 0
    for i, base in enumerate(bases):
        recover = not clean_shutdown and i >= first_unflushed
        segment, cut = LogSegment.open(directory, base, config, recover=recover,
                                       now_ms=now_ms)
        if segments and segment.base_offset < segments[-1].next_offset:
            segment.close()
            raise StorageError(
                f"{directory}: segment {base} overlaps the previous one "
                f"(which ends at {segments[-1].next_offset})"
            )
        segments.append(segment)
        if cut:
            truncated += cut
            log.warning("recovery truncated a torn segment tail",
                        extra={"segment": segment.log_path.name, "bytes": cut})
            for later in bases[i + 1 :]:
                _delete_segment_files(directory, later)
                deleted += 1
            break
    if not segments:
        segments.append(LogSegment.create(directory, log_start_offset, config, now_ms))
    return LoadResult(segments, truncated, deleted)
