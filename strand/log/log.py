"""The partition log: an ordered list of segments with offsets, epochs and checkpoints.

Thread-safety: every mutation holds the log's lock. Reads take no lock: they work on
a snapshot of the segment list (replaced, never mutated in place) and bound
themselves by the log end offset read before they start, so a concurrent append,
roll, truncation, retention or compaction never shows them a half-written batch
(deleted segment files are unlinked and their descriptors left to the garbage
collector). ``close()`` and ``delete()`` do close descriptors: stop reading first.

A failed write marks the log failed until :meth:`recover_from_failure`; a damaged
batch is marked in the directory until :meth:`truncate_at_damage` cuts it away
(:mod:`strand.log.failure`).

Producer state (:mod:`strand.log.producer_state_manager`) follows every change: the
leader checks producer batches and answers a retry with its original offsets,
followers apply them, truncation rebuilds it, snapshots go with rolls and clean closes.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from strand.errors import (
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
)
from strand.log.append import (
    AppendInfo,
    duplicate_info,
    split_leader_batches,
    stamp_leader_batches,
)
from strand.log.checkpoint import CLEAN_SHUTDOWN_FILE, OffsetCheckpoint
from strand.log.config import LogConfig
from strand.log.failure import (
    WriteGuard,
    clear_damage_mark,
    read_damage_mark,
    write_damage_mark,
)
from strand.log.files import Buffer, fsync_directory
from strand.log.leader_epoch import LeaderEpochCache
from strand.log.loader import load_segments
from strand.log.producer_state import AppendOrigin, ProducerStateEntry
from strand.log.producer_state_manager import PendingUpdate, ProducerStateManager
from strand.log.reading import offset_for_timestamp, read_batches
from strand.log.retention import deletable_prefix
from strand.log.segment import LogSegment
from strand.log.transactions import TxnTracker, collect_aborted, rebuild_txn_indexes
from strand.log.txn_index import AbortedTxn
from strand.records.batch import BatchHeader, TimestampType, split_batches

__all__ = ["AppendInfo", "PartitionLog", "wall_clock_ms"]

log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class PartitionLog:
    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        checkpoint: OffsetCheckpoint,
        epochs: LeaderEpochCache,
        clock: Callable[[], int],
    ) -> None:
        self.directory = directory
        self.config = config
        self.leader_epochs = epochs
        self._clock = clock
        self._lock = threading.RLock()
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._set_segments(segments)
        self._next_offset = segments[-1].next_offset
        self._log_start_offset = max(checkpoint.log_start_offset, segments[0].base_offset)
        self._log_start_offset = min(self._log_start_offset, self._next_offset)
        self._high_watermark = min(max(checkpoint.high_watermark, self._log_start_offset),
                                   self._next_offset)
        self._recovery_point = min(checkpoint.recovery_point, self._next_offset)
        self.cleaner_offset = min(max(checkpoint.cleaner_offset, self._log_start_offset),
                                  self._next_offset)
        self._unflushed_records = 0
        self._last_flush_ms = clock()
        self._directory_dirty = False
        self._closed = False
        self._guard = WriteGuard(directory)
        self._producers = ProducerStateManager(directory, config.producer_id_expiration_ms)
        self._txns = TxnTracker()
        # min(high watermark, first undecided transaction offset): read_committed's bound,
        # kept up to date under the lock as either changes (read without it).
        self._last_stable_offset = self._high_watermark
        # The first offset a verification found untrustworthy, recorded in the
        # directory until truncate_at_damage cuts it away (None: no such mark).
        self.damaged_from = read_damage_mark(directory)

    # -- opening and closing ------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str | Path,
        config: LogConfig | None = None,
        *,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> PartitionLog:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        config = config or LogConfig()
        checkpoint = OffsetCheckpoint.load(directory)
        marker = directory / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        marker.unlink(missing_ok=True)
        loaded = load_segments(
            directory, config, clean_shutdown=clean,
            recovery_point=checkpoint.recovery_point,
            log_start_offset=checkpoint.log_start_offset, now_ms=clock(),
        )
        epochs = LeaderEpochCache.load(directory)
        partition_log = cls(directory, config, loaded.segments, checkpoint, epochs, clock)
        epochs.truncate_from_end(partition_log.log_end_offset)
        epochs.truncate_from_start(partition_log.log_start_offset)
        partition_log._rebuild_producer_state()
        rebuilt = rebuild_txn_indexes(partition_log._segments)
        if rebuilt:
            log.info("aborted transaction indexes rebuilt", extra={
                "directory": str(directory), "segments": rebuilt})
        if loaded.truncated_bytes or loaded.deleted_segments:
            log.warning("log recovered", extra={
                "directory": str(directory), "truncated_bytes": loaded.truncated_bytes,
                "deleted_segments": loaded.deleted_segments,
                "log_end_offset": partition_log.log_end_offset})
        partition_log._save_checkpoint()
        return partition_log

    def close(self) -> None:
        """Flush everything and mark the shutdown clean, so the next open skips recovery.
        A failed log is closed without either: the next open recovers it."""
        with self._lock:
            if self._closed:
                return
            if self._guard.failure is not None:
                for segment in self._segments:
                    segment.close(write_indexes=False)
                self._closed = True
                return
            self.flush()
            self._producers.take_snapshot()
            for segment in self._segments:
                segment.close()
            (self.directory / CLEAN_SHUTDOWN_FILE).touch()
            fsync_directory(self.directory)
            self._closed = True

    def delete(self) -> None:
        """Remove the whole partition directory."""
        with self._lock:
            for segment in self._segments:
                segment.close()
            self._closed = True
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- state --------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The high watermark, or the first offset of an undecided transaction below it
        (read_committed consumers read below it)."""
        return self._last_stable_offset

    def aborted_transactions(self, start: int, upper: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start, upper) (read_committed fetch)."""
        return collect_aborted(self._segments, self._bases, start, upper)

    def _update_last_stable_offset(self) -> None:
        self._last_stable_offset = self._txns.last_stable_offset(
            self._high_watermark, self._producers.table.first_undecided_offset())

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def mutation_lock(self) -> threading.RLock:
        """Held by every change to the segment list (the cleaner holds it to swap)."""
        return self._lock

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    def open_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether the producer has an open transaction here in this epoch (no lock: a
        dict lookup of an immutable entry)."""
        entry = self._producers.table.entry(producer_id)
        return (entry is not None and entry.producer_epoch == producer_epoch
                and entry.current_txn_first_offset is not None)

    def open_transaction_epoch(self, producer_id: int) -> int | None:
        """The epoch of the producer's open transaction here, None if it has none."""
        entry = self._producers.table.entry(producer_id)
        if entry is None or entry.current_txn_first_offset is None:
            return None
        return entry.producer_epoch

    def producer_epoch(self, producer_id: int) -> int | None:
        """The producer's latest epoch here, None if it is unknown here."""
        entry = self._producers.table.entry(producer_id)
        return None if entry is None else entry.producer_epoch

    def producer_state(self) -> dict[int, ProducerStateEntry]:
        """What this replica knows of each producer id (a copy)."""
        with self._lock:
            return dict(self._producers.table.as_mapping())

    def remove_expired_producers(self) -> list[int]:
        """Forget producers idle for ``producer.id.expiration.ms``; returns their ids."""
        with self._lock:
            return self._producers.remove_expired(self._clock())

    def _rebuild_producer_state(self) -> None:
        self._producers.rebuild(self._segments, self._log_start_offset, self._next_offset,
                                self._clock())
        self._txns.truncate(self._next_offset)
        self._update_last_stable_offset()

    def update_config(self, config: LogConfig) -> None:
        """Apply a changed topic configuration (Kafka's dynamic topic config).

        Every later decision uses it: validation of appends, the active segment's roll
        limits, flushing, retention and cleaning. Index files keep the capacity they
        were created with; ``segment.index.bytes`` sizes the segments rolled from now on.
        """
        with self._lock:
            self.config = config
            self._producers.expiration_ms = config.producer_id_expiration_ms
            for segment in self._segments:
                segment.config = config

    def _set_segments(self, segments: list[LogSegment]) -> None:
        # Readers snapshot these two lists without the lock: always replace, never mutate.
        self._segments = segments
        self._bases = [segment.base_offset for segment in segments]

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"log {self.directory} is closed")

    @property
    def failure(self) -> str | None:
        """Why the log takes no writes (a write failed on disk), or None."""
        return self._guard.failure

    def _writing(self, what: str) -> AbstractContextManager[None]:
        """Around every change of the log's files (the lock held): see WriteGuard."""
        self._check_open()
        return self._guard.writing(what, lambda: self._next_offset)

    def recover_from_failure(self) -> int:
        """After a failed write: cut what it may have left past the last complete batch,
        write indexes and checkpoints out again, and take writes again. Returns the bytes
        cut; raises LogWriteError (still failed) if the disk still refuses."""
        with self._lock:
            self._check_open()
            if self._guard.failure is None:
                return 0
            with self._guard.recovering() as failure, self._writing("recovery"):
                cut = sum(segment.discard_unacknowledged() for segment in self._segments)
                self.leader_epochs.truncate_from_end(self._next_offset)
                self._rebuild_producer_state()
                self._save_checkpoint()
                fsync_directory(self.directory)
                self._directory_dirty = False
            log.warning("log recovered from a failed write", extra={
                "directory": str(self.directory), "failure": failure, "cut_bytes": cut,
                "log_end_offset": self._next_offset})
            return cut

    def _save_checkpoint(self) -> None:
        OffsetCheckpoint(
            log_start_offset=self._log_start_offset,
            high_watermark=self._high_watermark,
            recovery_point=self._recovery_point,
            cleaner_offset=self.cleaner_offset,
        ).save(self.directory)

    def checkpoint(self) -> None:
        """Persist log start offset, high watermark and recovery point."""
        with self._lock, self._writing("checkpoint"):
            self._save_checkpoint()

    # -- appending ----------------------------------------------------------------------------

    def append_as_leader(self, records: Buffer, leader_epoch: int,
                         origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendInfo:
        """Validate producer batches, assign contiguous offsets from the log end, append.

        Each batch is checked (:func:`strand.log.append.split_leader_batches`), its
        producer's sequence and epoch too, then stamped in place with its base offset
        and ``leader_epoch`` and written as it came. Nothing is written if any batch is
        bad, nor for a producer's retry of batches the log has: the answer then is
        where they were written first (Kafka's idempotent producer).
        """
        view = memoryview(records)
        config = self.config
        batches = split_leader_batches(view, config)
        with self._lock, self._writing("append"):
            duplicate = self._producers.find_duplicate([header for _, header in batches])
            if duplicate is not None:
                return duplicate_info(duplicate, config)
            now = self._clock()
            log_append_time = config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
            pieces, assigned = stamp_leader_batches(
                view, batches, self._next_offset, leader_epoch,
                now if log_append_time else None)
            pending = self._producers.prepare(
                ((offset, header, view[pos : pos + header.size_in_bytes])
                 for (pos, _), (offset, header) in zip(batches, assigned, strict=True)),
                origin)
            if leader_epoch >= 0:  # before the data, as Kafka does: never data without it
                self.leader_epochs.assign(leader_epoch, assigned[0][0])
            info = self._append(pieces, assigned, now)
            self._commit_producers(pending, info.last_offset + 1)
            if log_append_time:
                info = dataclasses.replace(info, log_append_time=now)
            return info

    def append_as_follower(self, records: Buffer) -> AppendInfo:
        """Append batches that already carry offsets and epochs (replication, copies)."""
        view = memoryview(records)
        batches = split_batches(view)
        if not batches:
            raise InvalidRecordError("the request carries no record batch")
        with self._lock, self._writing("append"):
            expected = self._next_offset
            for _, header in batches:
                if header.base_offset < expected:
                    raise InvalidRecordError(
                        f"batch at offset {header.base_offset} does not follow the log end "
                        f"({expected})"
                    )
                expected = header.next_offset
            # Epochs first: a failed append leaves at most an epoch starting at the end.
            pending = self._producers.prepare(
                ((h.base_offset, h, view[pos : pos + h.size_in_bytes]) for pos, h in batches),
                AppendOrigin.REPLICATION)
            for _, header in batches:
                epoch = header.partition_leader_epoch
                if epoch > self.leader_epochs.latest_epoch:
                    self.leader_epochs.assign(epoch, header.base_offset)
            info = self._append([view], [(h.base_offset, h) for _, h in batches],
                                self._clock())
            self._commit_producers(pending, info.last_offset + 1)
            return info

    def _commit_producers(self, pending: PendingUpdate, end_offset: int) -> None:
        """The appended batches are on disk: their producer state becomes the state, and
        the transactions their markers ended go to the LSO and the aborted index."""
        self._producers.commit(pending, end_offset)
        if pending.completed:
            self._txns.complete(pending.completed, self._segments[-1],
                                self._producers.table.ongoing, self._high_watermark)
        self._update_last_stable_offset()

    def _append(
        self, pieces: Sequence[Buffer], batches: list[tuple[int, BatchHeader]], now: int
    ) -> AppendInfo:
        size = sum(header.size_in_bytes for _, header in batches)
        if size > self.config.segment_bytes:
            raise RecordTooLargeError(
                f"append of {size} bytes exceeds segment.bytes ({self.config.segment_bytes})"
            )
        first_offset = batches[0][0]
        last_base, last_header = batches[-1]
        last_offset = last_base + last_header.last_offset_delta
        segment = self._segments[-1]
        if segment.should_roll(size, last_offset, now):
            segment = self._roll(first_offset)
        elif segment.size == 0 and segment.base_offset != first_offset:
            # A follower's first batch may start past an empty active segment's base
            # (compacted source): re-base the empty segment there.
            segment = self._replace_empty_active(first_offset)
        segment.append(pieces, batches)
        self._next_offset = last_offset + 1
        records = sum(header.record_count for _, header in batches)
        self._unflushed_records += records
        if (self._unflushed_records >= self.config.flush_messages
                or now - self._last_flush_ms >= self.config.flush_ms):
            self.flush()
        return AppendInfo(
            first_offset=first_offset,
            last_offset=last_offset,
            max_timestamp=max(header.max_timestamp for _, header in batches),
            log_append_time=-1,
            record_count=records,
            batch_count=len(batches),
            size_bytes=size,
        )

    # -- rolling and flushing -----------------------------------------------------------------

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
        with self._lock, self._writing("roll"):
            if self._segments[-1].size == 0:
                return self._segments[-1]
            return self._roll(self._next_offset)

    def _roll(self, base_offset: int) -> LogSegment:
        self._segments[-1].on_become_inactive()
        if self._producers.map_end_offset == base_offset:  # the state up to the new segment
            self._producers.take_snapshot()
        segment = LogSegment.create(self.directory, base_offset, self.config, self._clock())
        self._set_segments([*self._segments, segment])
        self._directory_dirty = True
        return segment

    def _replace_empty_active(self, base_offset: int) -> LogSegment:
        old = self._segments[-1]
        # The new one first: if the disk refuses it, the log still has its old segment.
        segment = LogSegment.create(self.directory, base_offset, self.config, self._clock())
        old.close()
        old.delete_files()
        self._set_segments([*self._segments[:-1], segment])
        self._directory_dirty = True
        return segment

    def flush(self) -> None:
        """fsync every segment holding data past the recovery point; advance it."""
        with self._lock, self._writing("flush"):
            for segment in self._segments:
                if segment.next_offset > self._recovery_point or segment is self._segments[-1]:
                    segment.flush()
            if self._directory_dirty:
                fsync_directory(self.directory)
                self._directory_dirty = False
            self._recovery_point = self._next_offset
            self._unflushed_records = 0
            self._last_flush_ms = self._clock()
            self._save_checkpoint()

    def flush_if_due(self) -> bool:
        """Apply ``flush.ms`` for a log that has not been appended to lately."""
        with self._lock:
            if (self._unflushed_records
                    and self._clock() - self._last_flush_ms >= self.config.flush_ms):
                self.flush()
                return True
            return False

    # -- reading ------------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> bytes:
        """Whole batches starting with the one that holds ``offset``, up to ``max_bytes``.

        ``max_offset`` (exclusive) hides batches at or beyond it, e.g. the high
        watermark for consumers. Raises OffsetOutOfRangeError outside
        [log start offset, log end offset].
        """
        return read_batches(self._segments, self._bases, self._log_start_offset,
                            self._next_offset, offset, max_bytes, max_offset, min_one_batch)

    def offset_for_timestamp(
        self, timestamp: int, *, max_offset: int | None = None
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with a timestamp >= ``timestamp``."""
        return offset_for_timestamp(self._segments, self._log_start_offset, timestamp,
                                    max_offset)

    # -- leader epochs (KIP-101) ---------------------------------------------------------------

    def begin_leader_epoch(self, leader_epoch: int) -> int:
        """This replica leads from ``leader_epoch`` on: the epoch starts at the log end
        offset (records appended later carry it). Returns that offset."""
        with self._lock, self._writing("leader epoch"):
            start = self._next_offset
            if leader_epoch > self.leader_epochs.latest_epoch:
                self.leader_epochs.assign(leader_epoch, start)
            return start

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """(largest epoch <= ``leader_epoch`` this log knows, the offset where it ends):
        the leader's answer to a follower whose last batch has ``leader_epoch``."""
        with self._lock:
            return self.leader_epochs.end_offset_for(leader_epoch, self._next_offset)

    def truncation_offset(self, leader_epoch: int, leader_end_offset: int) -> int:
        """Where a follower truncates when the leader says its log diverges after
        (``leader_epoch``, ``leader_end_offset``) (Kafka's ``getOffsetTruncationState``)."""
        with self._lock:
            return self.leader_epochs.truncation_offset(
                leader_epoch, leader_end_offset, self._next_offset, self._high_watermark)

    @property
    def last_epoch(self) -> int:
        """The leader epoch of the last batch (-1 for a log without epochs)."""
        return self.leader_epochs.latest_epoch

    # -- offsets ------------------------------------------------------------------------------

    def update_high_watermark(self, high_watermark: int) -> int:
        """Set the high watermark, clamped to [log start offset, log end offset]."""
        with self._lock:
            self._high_watermark = min(max(high_watermark, self._log_start_offset),
                                       self._next_offset)
            self._update_last_stable_offset()
            return self._high_watermark

    def advance_log_start_offset(self, offset: int) -> None:
        """Make records before ``offset`` unreadable (DeleteRecords); segments wholly
        below it are removed by the next :meth:`delete_old_segments`."""
        with self._lock, self._writing("log start offset"):
            if offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot move the log start offset to {offset}, past the high watermark "
                    f"{self._high_watermark}"
                )
            if offset <= self._log_start_offset:
                return
            self._log_start_offset = offset
            self.cleaner_offset = max(self.cleaner_offset, offset)
            self.leader_epochs.truncate_from_start(offset)
            self._save_checkpoint()

    def truncate_to(self, offset: int) -> bool:
        """Remove every record at or after ``offset``; returns whether anything was removed.

        Batches are never split: the batch holding ``offset`` goes entirely, so the log
        end offset becomes that batch's base offset. Replication only truncates at
        batch boundaries, where the two coincide.
        """
        with self._lock, self._writing("truncation"):
            if offset >= self._next_offset:
                # No record to remove, but an epoch begun at the end (this replica led
                # without appending) must go, or a divergence check would loop on it.
                self.leader_epochs.truncate_from_end(offset)
                return False
            if offset < self._log_start_offset:
                self.truncate_fully_and_start_at(offset)
                return True
            kept = sum(1 for s in self._segments if s.base_offset <= offset) or 1
            self._cut(kept, lambda segment: segment.truncate_to(offset))
            return True

    def mark_damaged(self, offset: int) -> None:
        """Record in the directory that the log cannot be trusted from ``offset`` on,
        until :meth:`truncate_at_damage` (or :meth:`clear_damage_mark`)."""
        with self._lock, self._writing("damage mark"):
            write_damage_mark(self.directory, offset)
            self.damaged_from = offset

    def clear_damage_mark(self) -> None:
        with self._lock, self._writing("damage mark"):
            clear_damage_mark(self.directory)
            self.damaged_from = None

    def truncate_at_damage(self, segment_base_offset: int, position: int) -> int:
        """Cut the log where verification found a bad batch (byte ``position`` of the
        segment based at ``segment_base_offset``), dropping every later segment, and
        remove the damage mark: the replica then fetches the rest again. Returns the
        new log end offset."""
        with self._lock, self._writing("damage cut"):
            bases = self._bases
            kept = bisect_right(bases, segment_base_offset)
            if not kept or bases[kept - 1] != segment_base_offset:
                raise StorageError(
                    f"{self.directory}: no segment {segment_base_offset} to cut any more")
            self._cut(kept, lambda segment: segment.truncate_at(position))
            clear_damage_mark(self.directory)
            self.damaged_from = None
            return self._next_offset

    def _cut(self, kept: int, cut: Callable[[LogSegment], object]) -> None:
        """Keep the first ``kept`` segments, the last of them ``cut``."""
        keep = self._segments[:kept]
        # Newest first, and the kept segment cut last: a crash at any step leaves
        # a contiguous log (at worst still holding records past the cut).
        for segment in reversed(self._segments[kept:]):
            segment.delete_files()
        cut(keep[-1])
        self._set_segments(keep)
        self._next_offset = keep[-1].next_offset
        self._clamp_offsets_to_end()
        self._rebuild_producer_state()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and start it empty at ``offset``."""
        with self._lock, self._writing("truncation"):
            for segment in self._segments:
                segment.delete_files()
            fresh = LogSegment.create(self.directory, offset, self.config, self._clock())
            self._set_segments([fresh])
            self._next_offset = self._log_start_offset = offset
            self._high_watermark = self._recovery_point = self.cleaner_offset = offset
            self.leader_epochs.clear()
            self._producers.truncate_fully_and_start_at(offset)
            self._txns = TxnTracker()
            self._update_last_stable_offset()
            self._directory_dirty = True
            self._save_checkpoint()

    def _clamp_offsets_to_end(self) -> None:
        end = self._next_offset
        self._high_watermark = min(self._high_watermark, end)
        self._recovery_point = min(self._recovery_point, end)
        self.cleaner_offset = min(self.cleaner_offset, end)
        self._log_start_offset = min(self._log_start_offset, end)
        self.leader_epochs.truncate_from_end(end)
        self._save_checkpoint()

    # -- retention ----------------------------------------------------------------------------

    def delete_old_segments(self) -> int:
        """Apply retention.ms, retention.bytes and the log start offset; returns how many
        segments were deleted. Only data below the high watermark is ever deleted."""
        with self._lock, self._writing("retention"):
            count = deletable_prefix(
                self._segments, self.config, now_ms=self._clock(),
                high_watermark=self._high_watermark, log_end_offset=self._next_offset,
                log_start_offset=self._log_start_offset,
            )
            if count == 0:
                return 0
            if count == len(self._segments):
                self._roll(self._next_offset)  # the active segment expired: roll, then drop it
            doomed = self._segments[:count]
            self._set_segments(self._segments[count:])
            for segment in doomed:
                segment.delete_files()
            self._producers.delete_snapshots_before(self._segments[0].base_offset)
            self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
            self.cleaner_offset = max(self.cleaner_offset, self._log_start_offset)
            self._high_watermark = max(self._high_watermark, self._log_start_offset)
            self._update_last_stable_offset()
            self.leader_epochs.truncate_from_start(self._log_start_offset)
            self._save_checkpoint()
            log.info("deleted segments", extra={"directory": str(self.directory),
                                                "segments": count,
                                                "log_start_offset": self._log_start_offset})
            return count

    # -- compaction support -------------------------------------------------------------------

    def replace_segments(self, old: Sequence[LogSegment], new: LogSegment) -> bool:
        """Swap ``old`` (consecutive, non-active) for ``new``; False if the log changed meanwhile.

        The caller has already renamed ``new``'s file into place via the swap protocol.
        """
        with self._lock:
            segments = self._segments
            try:
                start = segments.index(old[0])
            except ValueError:
                return False
            if segments[start : start + len(old)] != list(old) or old[-1] is segments[-1]:
                return False
            self._set_segments([*segments[:start], new, *segments[start + len(old):]])
            return True


