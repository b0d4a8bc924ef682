"""Sparse time index of a segment: max timestamp so far → relative offset.

File format as Kafka's: 12-byte entries (int64 timestamp, int32 relative offset).
An entry (T, O) says: every record up to offset O has a timestamp <= T, and the
record at O has timestamp T. Timestamps strictly increase from entry to entry.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left
from pathlib import Path

from strand.log.files import write_at
from strand.log.offset_index import CorruptIndexError, strictly_increasing

ENTRY = struct.Struct(">qi")
ENTRY_SIZE = ENTRY.size


class TimeIndex:
    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_entries)
        self._timestamps: array[int] = array("q")
        self._relative_offsets: array[int] = array("i")
        self._flushed_entries = 0

    @classmethod
    def load(cls, path: Path, base_offset: int, max_entries: int, next_offset: int) -> TimeIndex:
        index = cls(path, base_offset, max_entries)
        data = path.read_bytes()
        if len(data) % ENTRY_SIZE:
            raise CorruptIndexError(f"{path.name}: size {len(data)} is not a multiple of 12")
        count = len(data) // ENTRY_SIZE
        for timestamp, relative in ENTRY.iter_unpack(data):
            index._timestamps.append(timestamp)
            index._relative_offsets.append(relative)
        if not strictly_increasing(index._timestamps):
            raise CorruptIndexError(f"{path.name}: timestamps are not strictly increasing")
        if any(b < a for a, b in zip(index._relative_offsets, index._relative_offsets[1:],
                                     strict=False)):
            raise CorruptIndexError(f"{path.name}: offsets decrease")
        if count and not (index._relative_offsets[0] >= 0
                          and base_offset + index._relative_offsets[-1] < next_offset):
            raise CorruptIndexError(f"{path.name}: entries point outside the segment")
        index._flushed_entries = count
        return index

    def __len__(self) -> int:
        return len(self._timestamps)

    @property
    def is_full(self) -> bool:
        return len(self._timestamps) >= self.max_entries

    def last_entry(self) -> tuple[int, int] | None:
        if not self._timestamps:
            return None
        return self._timestamps[-1], self.base_offset + self._relative_offsets[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        relative = offset - self.base_offset
        if self._relative_offsets and relative < self._relative_offsets[-1]:
            return
        self._timestamps.append(timestamp)
        self._relative_offsets.append(relative)

    def lookup_before(self, timestamp: int) -> int:
        """An offset before which every record is older than ``timestamp``."""
        i = bisect_left(self._timestamps, timestamp)
        if i == 0:
            return self.base_offset
        return self.base_offset + self._relative_offsets[i - 1]

    def truncate_to_offset(self, next_offset: int) -> None:
        """Drop every entry for an offset >= ``next_offset``."""
        keep = len(self._relative_offsets)
        while keep and self.base_offset + self._relative_offsets[keep - 1] >= next_offset:
            keep -= 1
        del self._timestamps[keep:]
        del self._relative_offsets[keep:]
        if keep < self._flushed_entries:
            self._flushed_entries = keep
            if self.path.exists():
                os.truncate(self.path, keep * ENTRY_SIZE)

    def flush(self, fsync: bool = False) -> None:
        pending = range(self._flushed_entries, len(self._timestamps))
        if not pending and not fsync:
            return
        data = b"".join(
            ENTRY.pack(self._timestamps[i], self._relative_offsets[i]) for i in pending
        )
        write_at(self.path, self._flushed_entries * ENTRY_SIZE, data, fsync=fsync)
        self._flushed_entries = len(self._timestamps)

    def reset(self) -> None:
        self._timestamps = array("q")
        self._relative_offsets = array("i")
        self._flushed_entries = 0
        self.path.write_bytes(b"")

