"""Log compaction (``cleanup.policy=compact``): keep the latest value of every key.

One pass, as Kafka's cleaner does it:

1. The cleanable range is every segment that lies wholly below the first
   uncleanable offset: the active segment's base, the last stable offset (every
   transaction in the range is decided), and the first segment younger than
   ``min.compaction.lag.ms``. The active segment is never touched.
2. Build a map key → latest offset over that range (records of aborted transactions
   left out).
3. Rewrite the range group by group (consecutive segments whose total fits one
   segment): a record stays if it is the latest of its key; a tombstone (null value)
   stays until its segment's newest timestamp is older than ``delete.retention.ms``,
   so consumers that are behind still see the delete. Batches whose records all stay
   are copied byte for byte; others are rebuilt with the same codec, producer fields
   and offsets, so every record keeps its offset. Transactions follow Kafka's rules
   (:mod:`strand.log.cleaner_txns`): aborted batches go, markers go once their
   transaction has no data left and ``delete.retention.ms`` passed, each producer's
   last batch stays.
4. Swap each group in crash-safely: write ``<base>.log.cleaned`` and fsync it, rename
   it to ``.log.swap`` (the commit point), delete the old segments, rename the swap
   to ``.log``. The loader finishes a swap interrupted at any step; a ``.cleaned``
   file is simply discarded.

The key map holds every distinct key of the cleanable range in memory.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from strand.log.cleaner_txns import TxnCleaning, last_batches
from strand.log.config import INT_MAX
from strand.log.files import CLEANED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, fsync_directory, segment_path
from strand.log.log import PartitionLog
from strand.log.segment import LogSegment
from strand.records.batch import BatchHeader
from strand.records.builder import BatchBuilder, build_empty_batch
from strand.records.reader import RecordBatch
from strand.records.record import Record

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CleanResult:
    segments_before: int
    segments_after: int
    bytes_before: int
    bytes_after: int
    records_removed: int
    tombstones_removed: int
    cleaned_up_to: int
    markers_removed: int = 0


def first_uncleanable_offset(log: PartitionLog, now_ms: int) -> int:
    segments = log.segments
    limit = min(segments[-1].base_offset, log.last_stable_offset)
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for segment in segments[:-1]:
            if now_ms - segment.max_timestamp < lag:
                limit = min(limit, segment.base_offset)
                break
    return limit


def cleanable_segments(log: PartitionLog, now_ms: int) -> list[LogSegment]:
    limit = first_uncleanable_offset(log, now_ms)
    return [s for s in log.segments[:-1] if s.next_offset <= limit]


def dirty_ratio(log: PartitionLog, now_ms: int) -> float:
    segments = cleanable_segments(log, now_ms)
    total = sum(s.size for s in segments)
    if total == 0:
        return 0.0
    dirty = sum(s.size for s in segments if s.next_offset > log.cleaner_offset)
    return dirty / total


def needs_cleaning(log: PartitionLog, now_ms: int) -> bool:
    """Whether the dirty part has reached ``min.cleanable.dirty.ratio``, or a dirty
    segment has waited longer than ``max.compaction.lag.ms``."""
    config = log.config
    if not config.compact:
        return False
    ratio = dirty_ratio(log, now_ms)
    if ratio > 0 and ratio >= config.min_cleanable_dirty_ratio:
        return True
    return any(
        s.next_offset > log.cleaner_offset
        and now_ms - s.max_timestamp > config.max_compaction_lag_ms
        for s in cleanable_segments(log, now_ms)
    )


def _group_segments(segments: Sequence[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    groups: list[list[LogSegment]] = []
    for segment in segments:
        if groups:
            group = groups[-1]
            fits = sum(s.size for s in group) + segment.size <= max_bytes
            span_ok = segment.next_offset - group[0].base_offset <= INT_MAX
            if fits and span_ok:
                group.append(segment)
                continue
        groups.append([segment])
    return groups


class LogCleaner:
    """Compacts one log at a time; safe to run beside appends and reads."""

    def clean(self, log: PartitionLog, now_ms: int) -> CleanResult | None:
        segments = cleanable_segments(log, now_ms)
        if not segments:
            return None
        cleaned_up_to = segments[-1].next_offset
        aborted = log.aborted_transactions(segments[0].base_offset, cleaned_up_to)
        last_batch = last_batches(log.segments)
        latest = self._build_offset_map(segments, TxnCleaning.start(aborted, last_batch))
        txns = TxnCleaning.start(aborted, last_batch)
        horizon = now_ms - log.config.delete_retention_ms
        bytes_before = sum(s.size for s in segments)
        removed = tombstones = 0
        new_segments: list[LogSegment] = []
        for group in _group_segments(segments, log.config.segment_bytes):
            path, group_removed, group_tombstones = self._write_cleaned(
                group, latest, horizon, log.directory, txns)
            swapped = self._swap_in(log, group, path, now_ms, txns)
            if swapped is None:
                logger.warning("log changed during cleaning; stopping this pass",
                               extra={"segments": [s.base_offset for s in group]})
                path.unlink(missing_ok=True)
                break
            new_segments.append(swapped)
            removed += group_removed
            tombstones += group_tombstones
        else:
            log.cleaner_offset = max(log.cleaner_offset, cleaned_up_to)
            log.checkpoint()
        return CleanResult(
            segments_before=len(segments),
            segments_after=len(new_segments),
            bytes_before=bytes_before,
            bytes_after=sum(s.size for s in new_segments),
            records_removed=removed,
            tombstones_removed=tombstones,
            cleaned_up_to=cleaned_up_to,
            markers_removed=txns.removed_markers,
        )

    @staticmethod
    def _build_offset_map(segments: Sequence[LogSegment],
                          txns: TxnCleaning) -> dict[bytes, int]:
        latest: dict[bytes, int] = {}
        for segment in segments:
            for header, data in segment.read_all():
                if header.is_control or txns.aborted_data(header):
                    continue
                for record in RecordBatch(data, validate=False).records():
                    if record.key is not None:
                        latest[record.key] = record.offset
        return latest

    @staticmethod
    def _write_cleaned(
        group: Sequence[LogSegment], latest: dict[bytes, int], horizon: int, directory: Path,
        txns: TxnCleaning,
    ) -> tuple[Path, int, int]:
        path = segment_path(directory, group[0].base_offset, LOG_SUFFIX + CLEANED_SUFFIX)
        removed = tombstones = 0
        with open(path, "wb") as out:
            for segment in group:
                tombstones_expire = segment.max_timestamp <= horizon
                for header, data in segment.read_all():
                    if header.is_control:
                        if txns.keep_marker(header, bytes(data), tombstones_expire):
                            out.write(data)
                        continue
                    records = RecordBatch(data, validate=False).records()
                    if txns.aborted_data(header):
                        removed += len(records)
                        continue
                    kept: list[Record] = []
                    for record in records:
                        if record.key is None or latest.get(record.key) != record.offset:
                            removed += 1
                        elif record.value is None and tombstones_expire:
                            removed += 1
                            tombstones += 1
                        else:
                            kept.append(record)
                    if kept:
                        txns.data_retained(header)
                    if len(kept) == len(records):
                        out.write(data)
                    elif kept:
                        out.write(_rebuild_batch(header, kept))
                    elif txns.is_producers_last(header):
                        # Its producer's state (epoch, sequence) is rebuilt from it.
                        out.write(build_empty_batch(header))
            out.flush()
            os.fsync(out.fileno())
        return path, removed, tombstones

    @staticmethod
    def _swap_in(
        log: PartitionLog, group: Sequence[LogSegment], cleaned: Path, now_ms: int,
        txns: TxnCleaning,
    ) -> LogSegment | None:
        base = group[0].base_offset
        with log.mutation_lock:
            current = log.segments
            if group[-1] is current[-1] or not all(s in current for s in group):
                return None
            swap = segment_path(log.directory, base, LOG_SUFFIX + SWAP_SUFFIX)
            os.replace(cleaned, swap)
            fsync_directory(log.directory)  # commit point: recovery now finishes the swap
            for segment in group:
                segment.delete_files()
            os.replace(swap, segment_path(log.directory, base, LOG_SUFFIX))
            fsync_directory(log.directory)
            segment, _ = LogSegment.open(log.directory, base, log.config, recover=True,
                                         now_ms=now_ms)
            # The aborted transactions whose markers stayed.
            segment.txn_index.replace(txns.index_entries(
                entry for old in group for entry in old.txn_index.entries))
            segment.txn_index_stale = False
            segment.flush()
            if not log.replace_segments(group, segment):  # pragma: no cover - lock held
                raise RuntimeError("segments changed under the log lock")
            return segment


def _rebuild_batch(header: BatchHeader, kept: list[Record]) -> bytes:
    builder = BatchBuilder(
        compression=header.compression,
        timestamp_type=header.timestamp_type,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        transactional=header.is_transactional,
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
    )
    for record in kept:
        builder.append(record.value, key=record.key, headers=record.headers,
                       timestamp=record.timestamp, offset=record.offset)
    builder.set_last_offset_delta(header.last_offset_delta)
    return builder.build()
