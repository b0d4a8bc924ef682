"""File names of a partition directory and crash-safe replacement of small files."""

from __future__ import annotations

import os
from pathlib import Path

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
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
    """Replace ``path`` with ``data`` so a crash leaves either the old or the new file."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_directory(path.parent)
