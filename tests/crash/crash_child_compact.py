"""Child process: build the compacted log of ``compact_layout`` and clean it, dying
at a chosen step of the cleaner's swap protocol.

Usage: ``python -m tests.crash.crash_child_compact DIRECTORY (none | STEP OCCURRENCE)``

Inside this process only, the cleaner's file operations are wrapped: ``os.fsync`` and
``os.replace`` as ``strand.log.cleaner`` sees them, its ``fsync_directory``,
``LogSegment.delete_files``, the index flushes of the reopened cleaned segment and the
final ``PartitionLog.checkpoint``. Each call prints ``step <name> <occurrence>``; the
process SIGKILLs itself just before call number OCCURRENCE of STEP. With ``none`` it
cleans to the end and prints ``cleaned``.
"""

from __future__ import annotations

import os
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import strand.log.cleaner as cleaner_module
from strand.log import LogSegment, PartitionLog
from strand.log.offset_index import OffsetIndex
from strand.log.time_index import TimeIndex
from tests.crash.crash_helpers import FIXED_NOW_MS, build_compacted_log


class Crash:
    def __init__(self, step: str | None, occurrence: int) -> None:
        self.step = step
        self.occurrence = occurrence
        self.calls: Counter[str] = Counter()

    def __call__(self, name: str) -> None:
        self.calls[name] += 1
        os.write(1, f"step {name} {self.calls[name]}\n".encode())
        if name == self.step and self.calls[name] == self.occurrence:
            os.kill(os.getpid(), signal.SIGKILL)


class HookedOs:
    """``os`` as the cleaner module sees it: fsync and replace announce themselves."""

    def __init__(self, crash: Crash) -> None:
        self._crash = crash

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def fsync(self, fd: int) -> None:
        self._crash("os.fsync")
        os.fsync(fd)

    def replace(self, src: Any, dst: Any) -> None:
        self._crash("os.replace")
        os.replace(src, dst)


def install(crash: Crash) -> None:
    # The cleaner's own names for os and fsync_directory, replaced in its namespace.
    setattr(cleaner_module, "os", HookedOs(crash))  # noqa: B010
    fsync_directory = getattr(cleaner_module, "fsync_directory")  # noqa: B009

    def hooked_fsync_directory(directory: Path) -> None:
        crash("fsync_directory")
        fsync_directory(directory)

    setattr(cleaner_module, "fsync_directory", hooked_fsync_directory)  # noqa: B010

    def wrap(cls: Any, method: str, name: str) -> None:
        original = getattr(cls, method)

        def hooked(self: Any, *args: Any, **kwargs: Any) -> Any:
            crash(name)
            return original(self, *args, **kwargs)

        setattr(cls, method, hooked)

    wrap(LogSegment, "delete_files", "delete_files")
    wrap(OffsetIndex, "flush", "OffsetIndex.flush")
    wrap(TimeIndex, "flush", "TimeIndex.flush")
    wrap(PartitionLog, "checkpoint", "checkpoint")


def main() -> None:
    directory = Path(sys.argv[1])
    step, occurrence = (None, 0) if sys.argv[2] == "none" else (sys.argv[2], int(sys.argv[3]))
    log = build_compacted_log(directory)
    os.write(1, f"built {log.log_end_offset}\n".encode())
    install(Crash(step, occurrence))
    result = cleaner_module.LogCleaner().clean(log, FIXED_NOW_MS)
    assert result is not None
    os.write(1, f"cleaned {result.segments_before} {result.segments_after}\n".encode())


if __name__ == "__main__":
    main()
