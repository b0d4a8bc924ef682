"""File names of a partition directory, and writes that never leave a torn file:
crash-safe replacement of small files, and appends that roll back when the disk
refuses them (a full or failing disk must not leave half a record behind)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"  # aborted transactions (strand.log.txn_index)
CLEANED_SUFFIX = ".cleaned"  # a compaction output still being written
SWAP_SUFFIX = ".swap"  # a complete compaction output waiting to replace its sources
DELETED_SUFFIX = ".deleted"  # a segment file on its way out
TMP_SUFFIX = ".tmp"


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def segment_path(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / segment_file_name(base_offset, suffix)


def parse_base_offset(name: str) -> int | None:
    stem = name.split(".", 1)[0]
    if len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a crash leaves either the old or the new file
    (and a failed write, e.g. on a full disk, leaves the old one and no temporary)."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


Buffer = bytes | bytearray | memoryview
IOV_MAX = 1024


def write_all(fd: int, pieces: Sequence[Buffer]) -> None:
    """writev every piece at the descriptor's position, coping with short writes and
    IOV_MAX."""
    pending = [memoryview(p) for p in pieces if len(p)]
    while pending:
        written = os.writev(fd, pending[:IOV_MAX])
        while written:
            head = pending[0]
            if written >= len(head):
                written -= len(head)
                pending.pop(0)
            else:
                pending[0] = head[written:]
                written = 0


def write_at(path: Path, size: int, data: bytes, *, fsync: bool = False) -> None:
    """Make ``path`` its first ``size`` bytes followed by ``data`` (indexes append their
    new entries so). Whatever lies past ``size`` (a torn earlier attempt) is
    overwritten; a failed write is rolled back to ``size``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size != size:
            os.ftruncate(fd, size)
        if data:
            os.lseek(fd, size, os.SEEK_SET)
            try:
                write_all(fd, [data])
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
