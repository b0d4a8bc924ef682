"""The aborted-transaction index of a segment (``<base>.txnindex``, Kafka's
``TransactionIndex``).

One entry per transaction whose ABORT marker lies in the segment: producer id, first
offset, last offset (the marker's) and the last stable offset right after the abort.
A read_committed fetch returns the entries overlapping its range so that the consumer
can drop the aborted records. Entries are appended in marker order; the file uses
Kafka's layout (version int16, then four int64, big endian, 34 bytes per entry).

The file is derived data: it is written with each abort marker, flushed with its
segment, and rebuilt from the log after an unclean shutdown
(:func:`strand.log.txn_scan.rebuild_txn_indexes`). Not thread-safe: the partition log
changes it under its lock; readers take a snapshot of ``entries`` (replaced, never
mutated in place).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from strand.errors import CorruptRecordError

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size
ENTRY_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int  # the partition's LSO once this transaction was aborted


class TransactionIndex:
    def __init__(self, path: Path, entries: Iterable[AbortedTxn] = ()) -> None:
        self.path = path
        self.entries: tuple[AbortedTxn, ...] = tuple(entries)
        self._dirty = False

    @classmethod
    def load(cls, path: Path) -> TransactionIndex:
        """The index in ``path`` (empty when there is no file). A torn last entry (a
        crash mid-write) is dropped; anything else malformed is CorruptRecordError."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return cls(path)
        usable = len(data) - len(data) % ENTRY_SIZE
        entries = []
        for pos in range(0, usable, ENTRY_SIZE):
            version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
            if version != ENTRY_VERSION or first > last:
                raise CorruptRecordError(
                    f"{path.name}: entry {pos // ENTRY_SIZE} is not a valid aborted "
                    f"transaction (version {version}, offsets {first}..{last})")
            entries.append(AbortedTxn(pid, first, last, lso))
        return cls(path, entries)

    def append(self, entry: AbortedTxn) -> None:
        if self.entries and entry.last_offset <= self.entries[-1].last_offset:
            raise ValueError(
                f"{self.path.name}: aborted transaction ending at {entry.last_offset} does "
                f"not follow the last one ({self.entries[-1].last_offset})")
        with open(self.path, "ab") as out:
            out.write(_ENTRY.pack(ENTRY_VERSION, entry.producer_id, entry.first_offset,
                                  entry.last_offset, entry.last_stable_offset))
        self.entries = (*self.entries, entry)
        self._dirty = True

    def flush(self) -> None:
        if self._dirty and self.path.exists():
            with open(self.path, "rb+") as out:
                os.fsync(out.fileno())
        self._dirty = False

    def replace(self, entries: Iterable[AbortedTxn]) -> None:
        """Make the index hold exactly ``entries`` (rebuild, truncation, cleaning)."""
        self.entries = tuple(entries)
        if not self.entries:
            self.path.unlink(missing_ok=True)
            self._dirty = False
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as out:
            out.write(b"".join(
                _ENTRY.pack(ENTRY_VERSION, e.producer_id, e.first_offset, e.last_offset,
                            e.last_stable_offset) for e in self.entries))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        self._dirty = False

    def truncate_to(self, offset: int) -> None:
        """Forget the transactions whose marker is at or after ``offset``."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) != len(self.entries):
            self.replace(kept)

    def collect(self, start: int, upper: int) -> list[AbortedTxn]:
        """Entries overlapping [start, upper): marker at or after ``start``, first offset
        below ``upper``."""
        return [e for e in self.entries if e.last_offset >= start and e.first_offset < upper]
