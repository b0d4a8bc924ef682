"""Sparse offset index of a segment: relative offset → file position.

File format as Kafka's: 8-byte entries (int32 relative offset, int32 position),
big-endian. Each entry maps the *base* offset of a batch to the batch's position
(v2 batches carry their base offset, so a lookup lands on the batch that holds the
target instead of the one before it: one header read per lookup, not two).
Entries live in memory as two ``array('i')`` so a lookup is one C-level bisect;
new entries are buffered and reach the file on flush. The file is disposable:
a missing or inconsistent one is rebuilt from the log.
"""

from __future__ import annotations

import itertools
import os
import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path

from strand.errors import CorruptRecordError
from strand.log.files import write_at

ENTRY = struct.Struct(">ii")
ENTRY_SIZE = ENTRY.size


class CorruptIndexError(CorruptRecordError):
    """An index file that does not agree with itself or with its segment."""


def _unpack_columns(data: bytes, typecode: str, width: int) -> list[array[int]]:
    flat = array(typecode)
    flat.frombytes(data)
    if sys.byteorder == "little":
        flat.byteswap()
    return [flat[i::width] for i in range(width)]


def strictly_increasing(values: array[int]) -> bool:
    """What every sparse index's keys must be (the time index checks it too)."""
    return all(a < b for a, b in itertools.pairwise(values))


class OffsetIndex:
    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_entries)
        self._relative_offsets: array[int] = array("i")
        self._positions: array[int] = array("i")
        self._flushed_entries = 0

    @classmethod
    def load(cls, path: Path, base_offset: int, max_entries: int, segment_size: int) -> OffsetIndex:
        """Read and sanity-check an index file; raises CorruptIndexError if it cannot be trusted."""
        index = cls(path, base_offset, max_entries)
        data = path.read_bytes()
        if len(data) % ENTRY_SIZE:
            raise CorruptIndexError(f"{path.name}: size {len(data)} is not a multiple of 8")
        rel, pos = _unpack_columns(data, "i", 2)
        if not (strictly_increasing(rel) and strictly_increasing(pos)):
            raise CorruptIndexError(f"{path.name}: entries are not strictly increasing")
        if rel and (rel[0] < 0 or pos[0] < 0 or pos[-1] >= segment_size):
            raise CorruptIndexError(f"{path.name}: entries point outside the segment")
        index._relative_offsets, index._positions = rel, pos
        index._flushed_entries = len(rel)
        return index

    def __len__(self) -> int:
        return len(self._relative_offsets)

    @property
    def is_full(self) -> bool:
        return len(self._relative_offsets) >= self.max_entries

    @property
    def last_offset(self) -> int:
        if not self._relative_offsets:
            return self.base_offset
        return self.base_offset + self._relative_offsets[-1]

    @property
    def last_position(self) -> int:
        return self._positions[-1] if self._positions else 0

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if self._relative_offsets and relative <= self._relative_offsets[-1]:
            raise CorruptIndexError(
                f"index entry for offset {offset} does not follow {self.last_offset}"
            )
        self._relative_offsets.append(relative)
        self._positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The greatest entry whose offset is <= ``offset``, or (base_offset, 0)."""
        i = bisect_right(self._relative_offsets, offset - self.base_offset)
        if i == 0:
            return self.base_offset, 0
        return self.base_offset + self._relative_offsets[i - 1], self._positions[i - 1]

    def truncate_to_position(self, position: int) -> None:
        """Drop every entry for a batch at or beyond ``position``."""
        keep = bisect_right(self._positions, position - 1)
        del self._relative_offsets[keep:]
        del self._positions[keep:]
        if keep < self._flushed_entries:
            self._flushed_entries = keep
            if self.path.exists():
                os.truncate(self.path, keep * ENTRY_SIZE)

    def flush(self, fsync: bool = False) -> None:
        pending = len(self._relative_offsets) - self._flushed_entries
        if pending == 0 and not fsync:
            return
        interleaved = array("i", [0]) * (2 * pending)
        interleaved[0::2] = self._relative_offsets[self._flushed_entries :]
        interleaved[1::2] = self._positions[self._flushed_entries :]
        if sys.byteorder == "little":
            interleaved.byteswap()
        write_at(self.path, self._flushed_entries * ENTRY_SIZE, interleaved.tobytes(),
                 fsync=fsync)
        self._flushed_entries = len(self._relative_offsets)

    def reset(self) -> None:
        self._relative_offsets = array("i")
        self._positions = array("i")
        self._flushed_entries = 0
        self.path.write_bytes(b"")
