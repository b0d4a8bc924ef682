"""Child process: append deterministic batches, then ``truncate_to`` and die on the way.

Usage: ``python -m tests.crash.crash_child_truncate DIRECTORY BATCHES TARGET_BATCH KILL_POINT``

Appends batches ``0..BATCHES-1`` (8 KiB segments), flushes, prints
``target <offset>`` (the first offset of batch TARGET_BATCH) and truncates the log
there (what a follower does when its log diverged), SIGKILLing itself at KILL_POINT:

* ``before-delete-1``: before the first later segment is deleted;
* ``before-delete-2``: after the first later segment is deleted, before the second;
* ``before-segment-truncate``: every later segment deleted, the segment holding the
  target not yet cut;
* ``after-truncate``: ``truncate_to`` returned.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

from strand.log import LogSegment, PartitionLog
from tests.crash.crash_helpers import append_batches, append_config, fixed_clock


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    directory = Path(sys.argv[1])
    batches, target_batch, point = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    log = PartitionLog.open(directory, append_config(segment_bytes=8 * 1024), clock=fixed_clock)
    offsets = append_batches(log, range(batches))
    log.flush()
    target = offsets[target_batch][0]
    print(f"target {target}", flush=True)

    deletes = 0
    original_delete = LogSegment.delete_files
    original_truncate = LogSegment.truncate_to

    def delete_files(self: LogSegment) -> None:
        nonlocal deletes
        deletes += 1
        if point == f"before-delete-{deletes}":
            die()
        original_delete(self)

    def truncate_to(self: LogSegment, offset: int) -> Any:
        if point == "before-segment-truncate":
            die()
        return original_truncate(self, offset)

    LogSegment.delete_files = delete_files  # type: ignore[method-assign]
    LogSegment.truncate_to = truncate_to  # type: ignore[method-assign]
    log.truncate_to(target)
    if point == "after-truncate":
        die()
    print("survived", flush=True)


if __name__ == "__main__":
    main()
