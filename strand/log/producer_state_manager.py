"""A partition log's producer state: kept up to date by appends, saved in snapshots,
rebuilt from the log (Kafka's ``ProducerStateManager`` with the log's
``rebuildProducerState``).

* Appends: the leader checks its batches (:meth:`find_duplicate`, then
  :meth:`prepare` with ``CLIENT``), followers and recovery only apply them
  (``REPLICATION``); :meth:`commit` makes the result the state once the batches are on
  disk, so a failed write changes nothing.
* Snapshots (:mod:`strand.log.producer_snapshot`) are taken at each segment roll (named
  by the new segment's base offset) and at a clean close (the log end offset).
* Loading and every truncation: snapshots past the log end are deleted, the newest
  readable one at or below it is loaded (a corrupt one is deleted and the next older
  tried), and the log from there to the end is replayed.
* Retention deletes the snapshots below the first remaining segment; state in memory
  stays until ``producer.id.expiration.ms`` (as Kafka since KIP-360).

Not thread-safe: the partition log calls it with its lock held.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from strand.errors import InvalidRecordError
from strand.log.producer_snapshot import (
    CorruptSnapshotError,
    delete_snapshot,
    list_snapshots,
    read_snapshot,
    write_snapshot,
)
from strand.log.producer_state import (
    AppendOrigin,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateTable,
)
from strand.log.segment import LogSegment
from strand.records.batch import NO_PRODUCER_ID, BatchHeader, Buffer
from strand.records.control import parse_end_txn_marker
from strand.records.reader import RecordBatch

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Duplicate:
    """Where the batches of a retried request were written the first time."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    record_count: int
    batch_count: int


@dataclass(slots=True)
class PendingUpdate:
    """The checked result of one append, made the state by :meth:`commit`."""

    infos: list[ProducerAppendInfo]
    completed: list[CompletedTxn]


class ProducerStateManager:
    def __init__(self, directory: Path, expiration_ms: int) -> None:
        self.directory = directory
        self.expiration_ms = expiration_ms
        self.table = ProducerStateTable()
        self._snapshots = list_snapshots(directory)

    @property
    def name(self) -> str:
        return self.directory.name

    @property
    def map_end_offset(self) -> int:
        return self.table.map_end_offset

    # -- appends ------------------------------------------------------------------------------

    def find_duplicate(self, headers: Sequence[BatchHeader]) -> Duplicate | None:
        """The original offsets when every batch of a request repeats one this partition
        has written (a producer's retry); None when none does. A request mixing
        repeated and new batches is refused: the producer re-batched its retry."""
        found = []
        for header in headers:
            entry = (self.table.entry(header.producer_id)
                     if header.producer_id != NO_PRODUCER_ID else None)
            found.append(None if entry is None or header.is_control else entry.find_duplicate(
                header.producer_epoch, header.base_sequence, header.last_sequence))
        if not any(found):
            return None
        originals = [batch for batch in found if batch is not None]
        contiguous = all(later.first_offset == earlier.last_offset + 1
                         for earlier, later in itertools.pairwise(originals))
        if len(originals) != len(found) or not contiguous:
            raise InvalidRecordError(
                f"{self.name}: the request mixes batches this partition already has with "
                f"other batches; a producer retries a request with the batches it first sent")
        return Duplicate(originals[0].first_offset, originals[-1].last_offset,
                         max(batch.timestamp for batch in originals),
                         sum(batch.offset_delta + 1 for batch in originals), len(originals))

    def prepare(self, batches: Iterable[tuple[int, BatchHeader, Buffer]],
                origin: AppendOrigin) -> PendingUpdate:
        """Check (unless ``REPLICATION``) and apply batches (base offset, header, bytes)
        to copies of their producers' entries; raises the typed error of the first
        batch that fails, changing nothing."""
        infos: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        for base_offset, header, data in batches:
            pid = header.producer_id
            if pid == NO_PRODUCER_ID:
                continue
            info = infos.get(pid)
            if info is None:
                info = infos[pid] = self.table.prepare_update(pid, origin, self.name)
            last_offset = base_offset + header.last_offset_delta
            if header.is_control:
                records = RecordBatch(data, validate=False).records()
                if not records:  # a marker the cleaner removed: nothing to apply
                    continue
                marker = parse_end_txn_marker(records[0])
                done = info.append_end_txn_marker(
                    control_type=marker.control_type,
                    coordinator_epoch=marker.coordinator_epoch, epoch=header.producer_epoch,
                    offset=base_offset, timestamp=header.max_timestamp)
                if done is not None:
                    completed.append(done)
            else:
                info.append_data_batch(
                    epoch=header.producer_epoch, first_seq=header.base_sequence,
                    last_seq=header.last_sequence, max_timestamp=header.max_timestamp,
                    first_offset=base_offset, last_offset=last_offset,
                    transactional=header.is_transactional)
        return PendingUpdate(list(infos.values()), completed)

    def commit(self, pending: PendingUpdate, end_offset: int) -> None:
        for info in pending.infos:
            self.table.update(info)
        self.table.map_end_offset = end_offset

    def remove_expired(self, now_ms: int) -> list[int]:
        return self.table.remove_expired(now_ms, self.expiration_ms)

    # -- snapshots ----------------------------------------------------------------------------

    def take_snapshot(self) -> None:
        """Save the state at the map end offset, unless a snapshot is already there."""
        offset = self.table.map_end_offset
        if self._snapshots and self._snapshots[-1] >= offset:
            return
        write_snapshot(self.directory, offset, list(self.table))
        self._snapshots.append(offset)

    def delete_snapshots_before(self, offset: int) -> None:
        for old in [o for o in self._snapshots if o < offset]:
            delete_snapshot(self.directory, old)
            self._snapshots.remove(old)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.delete_snapshots_before(1 << 63)
        self.table.clear(offset)

    # -- loading ------------------------------------------------------------------------------

    def rebuild(self, segments: Sequence[LogSegment], log_start_offset: int,
                log_end_offset: int, now_ms: int) -> None:
        """Make the state that of the log [log start, log end): from the newest usable
        snapshot plus a replay of the batches after it."""
        for offset in [o for o in self._snapshots if o > log_end_offset]:
            delete_snapshot(self.directory, offset)
            self._snapshots.remove(offset)
        self.delete_snapshots_before(log_start_offset)
        start = log_start_offset
        self.table.clear(start)
        while self._snapshots:
            offset = self._snapshots[-1]
            try:
                entries = read_snapshot(self.directory, offset)
            except (CorruptSnapshotError, OSError) as exc:
                log.warning("ignoring an unreadable producer snapshot", extra={
                    "directory": str(self.directory), "offset": offset, "error": str(exc)})
                delete_snapshot(self.directory, offset)
                self._snapshots.pop()
                continue
            self.table.load(entries, offset)
            start = offset
            break
        replayed = 0
        for base_offset, header, data in _batches(segments, start, log_end_offset):
            pending = self.prepare([(base_offset, header, data)], AppendOrigin.REPLICATION)
            self.commit(pending, header.next_offset)
            replayed += 1
        self.table.map_end_offset = log_end_offset
        self.remove_expired(now_ms)
        if replayed:
            log.info("producer state rebuilt", extra={
                "directory": str(self.directory), "from_offset": start,
                "replayed_batches": replayed, "producers": len(self.table)})


def _batches(segments: Sequence[LogSegment], start: int,
             end: int) -> Iterator[tuple[int, BatchHeader, Buffer]]:
    """Batches holding a producer id with a base offset in [start, end); the bytes are
    read only for control batches (their marker)."""
    for segment in segments:
        if segment.next_offset <= start or segment.base_offset >= end:
            continue
        found = segment.find_batch(start)
        if found is None:
            continue
        for position, header in segment.headers_from(found[0]):
            if header.base_offset >= end:
                return
            if header.producer_id == NO_PRODUCER_ID or header.next_offset <= start:
                continue
            data = (segment.read_at(position, header.size_in_bytes)
                    if header.is_control else b"")
            yield header.base_offset, header, data
