"""Leader epoch cache (KIP-101): which leader epoch started at which offset.

A replica that becomes a follower asks the leader for the end offset of its own
latest epoch and truncates there, so logs never diverge. Persisted in Kafka's
``leader-epoch-checkpoint`` format::

    0                  <- version
    2                  <- number of entries
    0 0                <- epoch start_offset
    3 1200
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from strand.errors import StorageError
from strand.log.files import atomic_write

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
CHECKPOINT_FILE = "leader-epoch-checkpoint"
_VERSION = 0


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochCache:
    def __init__(self, path: Path, entries: list[EpochEntry] | None = None) -> None:
        self.path = path
        self._entries: list[EpochEntry] = entries or []
        self._lock = threading.Lock()

    @classmethod
    def load(cls, directory: Path) -> LeaderEpochCache:
        path = directory / CHECKPOINT_FILE
        if not path.exists():
            return cls(path)
        try:
            lines = path.read_text().split("\n")  # UnicodeDecodeError is a ValueError
            if int(lines[0]) != _VERSION:
                raise StorageError(f"{path}: unsupported version {lines[0]}")
            count = int(lines[1])
            entries = []
            for line in lines[2 : 2 + count]:
                epoch, start = line.split()
                entries.append(EpochEntry(int(epoch), int(start)))
        except (IndexError, ValueError) as exc:
            raise StorageError(f"{path}: malformed leader epoch checkpoint: {exc}") from exc
        if len(entries) != count:
            raise StorageError(f"{path}: expected {count} entries, found {len(entries)}")
        return cls(path, entries)

    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        entries = self._entries
        return entries[-1].epoch if entries else UNDEFINED_EPOCH

    def _replace(self, entries: list[EpochEntry]) -> None:
        """Write ``entries`` out, then adopt them: a failed write (a full disk) leaves
        memory and file as they were."""
        lines = [str(_VERSION), str(len(entries))]
        lines += [f"{e.epoch} {e.start_offset}" for e in entries]
        atomic_write(self.path, ("\n".join(lines) + "\n").encode())
        self._entries = entries

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns whether anything changed.

        As Kafka does, entries that would no longer be monotonic (an epoch or a start
        offset at or beyond the new one) are removed first.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid epoch entry ({epoch}, {start_offset})")
        with self._lock:
            latest = self._entries[-1] if self._entries else None
            if latest is not None and latest.epoch == epoch and latest.start_offset <= start_offset:
                return False
            self._replace([
                *(e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset),
                EpochEntry(epoch, start_offset)])
            return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) answering a follower's OffsetForLeaderEpoch request.

        The end offset of an epoch is the start offset of the next higher epoch, or
        the log end offset for the latest epoch. A follower truncates to it.
        """
        with self._lock:
            entries = self._entries
            if requested_epoch == UNDEFINED_EPOCH or not entries:
                return UNDEFINED_EPOCH, UNDEFINED_OFFSET
            if requested_epoch == entries[-1].epoch:
                return requested_epoch, log_end_offset
            higher = next((e for e in entries if e.epoch > requested_epoch), None)
            if higher is None:
                return UNDEFINED_EPOCH, UNDEFINED_OFFSET
            floor = None
            for e in entries:
                if e.epoch <= requested_epoch:
                    floor = e
            if floor is None:
                return requested_epoch, higher.start_offset
            return floor.epoch, higher.start_offset

    def truncation_offset(self, leader_epoch: int, leader_end_offset: int,
                          log_end_offset: int, high_watermark: int) -> int:
        """Where a follower truncates when the leader says its log diverges after
        (``leader_epoch``, ``leader_end_offset``) (Kafka's ``getOffsetTruncationState``)."""
        if leader_end_offset < 0:  # the leader knows no such epoch: back to the HW
            return high_watermark
        epoch, local_end = self.end_offset_for(leader_epoch, log_end_offset)
        if epoch < 0:
            return min(leader_end_offset, log_end_offset)
        if epoch != leader_epoch:
            return min(local_end, log_end_offset)  # an older epoch: the next fetch goes on
        return min(leader_end_offset, local_end, log_end_offset)

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after ``end_offset`` (the log was truncated)."""
        with self._lock:
            kept = [e for e in self._entries if e.start_offset < end_offset]
            if len(kept) != len(self._entries):
                self._replace(kept)

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop epochs wholly before ``start_offset``; the one spanning it now starts there."""
        with self._lock:
            entries = self._entries
            floor = -1
            for i, e in enumerate(entries):
                if e.start_offset <= start_offset:
                    floor = i
            if floor < 0:
                return
            kept = [EpochEntry(entries[floor].epoch, start_offset), *entries[floor + 1 :]]
            if kept != entries:
                self._replace(kept)

    def clear(self) -> None:
        with self._lock:
            self._replace([])
