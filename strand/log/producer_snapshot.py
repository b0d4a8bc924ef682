"""Producer state snapshots: ``<offset>.snapshot`` files in the partition directory.

A snapshot at offset N holds the producer state after every batch below N (Kafka's
naming: the offset is the log end offset when it was taken). Layout, big-endian::

    version int16 | crc uint32 (CRC-32C of every byte after it) | count int32 |
    count x ( producer_id int64 | epoch int16 | coordinator_epoch int32 |
              last_timestamp int64 | current_txn_first_offset int64 (-1: none) |
              batches int8 | batches x ( last_seq int32 | last_offset int64 |
                                         offset_delta int32 | timestamp int64 ) )

Unlike Kafka, which keeps only each producer's last batch, a snapshot keeps all the
retained batches: a retry of any of the last 5 is still recognised after a restart,
and the state loaded equals the state saved. Files are replaced atomically; a file
that fails its CRC or its layout is :class:`CorruptSnapshotError`.
"""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c

from strand.errors import StorageError
from strand.log.files import atomic_write, parse_base_offset, segment_path
from strand.log.producer_state import (
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerStateEntry,
)

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1

_PREFIX = struct.Struct(">hI")  # version, crc
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iqiq")


class CorruptSnapshotError(StorageError):
    """A snapshot file that cannot be trusted (torn, damaged, or of another version)."""


def encode_snapshot(entries: list[ProducerStateEntry]) -> bytes:
    body = bytearray(_COUNT.pack(len(entries)))
    for entry in entries:
        txn = -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset
        body += _ENTRY.pack(entry.producer_id, entry.producer_epoch, entry.coordinator_epoch,
                            entry.last_timestamp, txn, len(entry.batches))
        for batch in entry.batches:
            body += _BATCH.pack(batch.last_seq, batch.last_offset, batch.offset_delta,
                                batch.timestamp)
    return _PREFIX.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes, name: str = "snapshot") -> list[ProducerStateEntry]:
    if len(data) < _PREFIX.size:
        raise CorruptSnapshotError(f"{name}: {len(data)} bytes, too short for a snapshot")
    version, crc = _PREFIX.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"{name}: unknown snapshot version {version}")
    body = memoryview(data)[_PREFIX.size:]
    if crc32c.crc32c(body) != crc:
        raise CorruptSnapshotError(f"{name}: CRC mismatch (stored {crc})")
    try:
        (count,) = _COUNT.unpack_from(body)
        pos = _COUNT.size
        entries = []
        for _ in range(count):
            pid, epoch, coordinator_epoch, timestamp, txn, n = _ENTRY.unpack_from(body, pos)
            pos += _ENTRY.size
            if not 0 <= n <= NUM_BATCHES_TO_RETAIN:
                raise CorruptSnapshotError(f"{name}: producer {pid} has {n} batches")
            batches = []
            for _ in range(n):
                batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            entries.append(ProducerStateEntry(
                pid, epoch, tuple(batches), coordinator_epoch, timestamp,
                None if txn < 0 else txn))
    except struct.error as exc:
        raise CorruptSnapshotError(f"{name}: truncated snapshot ({exc})") from None
    if pos != len(body):
        raise CorruptSnapshotError(f"{name}: {len(body) - pos} stray bytes after the entries")
    return entries


def snapshot_path(directory: Path, offset: int) -> Path:
    return segment_path(directory, offset, SNAPSHOT_SUFFIX)


def list_snapshots(directory: Path) -> list[int]:
    """Offsets of the snapshot files in ``directory``, oldest first."""
    return sorted(offset for path in directory.glob(f"*{SNAPSHOT_SUFFIX}")
                  if (offset := parse_base_offset(path.name)) is not None)


def write_snapshot(directory: Path, offset: int, entries: list[ProducerStateEntry]) -> None:
    atomic_write(snapshot_path(directory, offset), encode_snapshot(entries))


def read_snapshot(directory: Path, offset: int) -> list[ProducerStateEntry]:
    path = snapshot_path(directory, offset)
    return decode_snapshot(path.read_bytes(), path.name)


def delete_snapshot(directory: Path, offset: int) -> None:
    snapshot_path(directory, offset).unlink(missing_ok=True)
