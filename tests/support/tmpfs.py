"""A small tmpfs mounted for one test: a disk that really fills up (ENOSPC).

Mounting needs root (or CAP_SYS_ADMIN); where it is not permitted the test is
skipped, saying so. The mount is removed when the context ends, whatever happened.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=False)


@contextlib.contextmanager
def small_tmpfs(directory: Path, size: str) -> Iterator[Path]:
    """``directory`` (created) with a tmpfs of ``size`` (``mount``'s syntax: "20m")
    mounted on it."""
    directory.mkdir(parents=True, exist_ok=True)
    mounted = _run("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill a disk for real (needs root or "
                    f"CAP_SYS_ADMIN): {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield directory
    finally:
        if _run("umount", str(directory)).returncode != 0:
            _run("umount", "-l", str(directory))  # still busy: detach it now, free it later


def resize_tmpfs(directory: Path, size: str) -> None:
    """Grow (or shrink) the tmpfs mounted on ``directory``: space comes back."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(directory)], check=True,
                   capture_output=True)


def fill(directory: Path, name: str = "filler") -> Path:
    """Write zeros into ``directory/name`` until the file system is full; the file."""
    path = directory / name
    chunk = bytes(1 << 16)
    with open(path, "wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(chunk)
    return path
