"""Child process: append deterministic batches to a PartitionLog until killed.

Usage::

    python -m tests.crash.crash_child_append DIRECTORY SEGMENT_BYTES FLUSH_MESSAGES \
        [KILL_POINT ROLL_NUMBER]

After every successful ``append_as_leader`` it writes ``ack <batch_no> <first> <last>``
to stdout with one unbuffered ``write`` (atomic on a pipe), so the parent knows
exactly which appends were acknowledged. ``FLUSH_MESSAGES`` of 0 means never flush.

Without a kill point the child appends until the parent SIGKILLs it. With one, the
child SIGKILLs itself at that point of roll number ``ROLL_NUMBER`` (1 = the first
roll after opening):

* ``before-inactive``: before the old segment writes out its index buffers;
* ``before-create``: the old segment is finished, the new one not yet created;
* ``before-offset-index``: the new ``.log`` exists, empty, without index files;
* ``before-time-index``: the new ``.log`` and empty ``.index`` exist, no ``.timeindex``;
* ``after-roll``: the new segment is complete, nothing written to it yet;
* ``torn-first-write``: the first append into the new segment writes only half of
  its bytes, then the process dies.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import strand.log.segment as segment_module
from strand.log import LogSegment, PartitionLog
from strand.log.offset_index import OffsetIndex
from strand.log.time_index import TimeIndex
from tests.crash.crash_helpers import LEADER_EPOCH, append_config, build_batch, fixed_clock

MAX_BATCHES = 50_000


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def install_kill_point(point: str, roll_number: int) -> None:
    rolls = 0
    original_inactive = LogSegment.on_become_inactive
    original_create = LogSegment.create
    original_offset_reset = OffsetIndex.reset
    original_time_reset = TimeIndex.reset
    original_write_all = segment_module._write_all

    def on_become_inactive(self: LogSegment) -> None:
        nonlocal rolls
        rolls += 1
        if point == "before-inactive" and rolls == roll_number:
            die()
        original_inactive(self)

    def create(cls: type[LogSegment], *args: Any, **kwargs: Any) -> LogSegment:
        if point == "before-create" and rolls == roll_number:
            die()
        segment = original_create(*args, **kwargs)
        if point == "after-roll" and rolls == roll_number:
            die()
        return segment

    def offset_reset(self: OffsetIndex) -> None:
        if point == "before-offset-index" and rolls == roll_number:
            die()
        original_offset_reset(self)

    def time_reset(self: TimeIndex) -> None:
        if point == "before-time-index" and rolls == roll_number:
            die()
        original_time_reset(self)

    def write_all(fd: int, pieces: Sequence[Any]) -> None:
        if point == "torn-first-write" and rolls == roll_number:
            data = b"".join(bytes(p) for p in pieces)
            os.write(fd, data[: len(data) // 2])
            die()
        original_write_all(fd, pieces)

    LogSegment.on_become_inactive = on_become_inactive  # type: ignore[method-assign]
    LogSegment.create = classmethod(create)  # type: ignore[method-assign, assignment]
    OffsetIndex.reset = offset_reset  # type: ignore[method-assign]
    TimeIndex.reset = time_reset  # type: ignore[method-assign]
    segment_module._write_all = write_all


def main() -> None:
    directory = Path(sys.argv[1])
    segment_bytes = int(sys.argv[2])
    flush_messages = int(sys.argv[3]) or None
    config = append_config(segment_bytes=segment_bytes, flush_messages=flush_messages)
    log = PartitionLog.open(directory, config, clock=fixed_clock)
    if len(sys.argv) > 4:
        install_kill_point(sys.argv[4], int(sys.argv[5]))
    os.write(1, b"ready\n")
    for batch_no in range(MAX_BATCHES):
        info = log.append_as_leader(build_batch(batch_no), LEADER_EPOCH)
        os.write(1, f"ack {batch_no} {info.first_offset} {info.last_offset}\n".encode())
    os.write(1, b"done\n")  # the parent treats this as a failure: it meant to kill us


if __name__ == "__main__":
    main()
