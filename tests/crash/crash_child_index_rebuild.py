"""Child process: open a log and die halfway through rebuilding one segment's indexes.

Usage: ``python -m tests.crash.crash_child_index_rebuild DIRECTORY BASE_OFFSET``

Segment ``BASE_OFFSET`` must have an untrustworthy index, so the open rebuilds both
of its indexes (``LogSegment.recover``). The process SIGKILLs itself after the new
time index reached the file and before the new offset index does.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from strand.log import PartitionLog
from strand.log.offset_index import OffsetIndex
from tests.crash.crash_helpers import append_config, fixed_clock


def main() -> None:
    directory = Path(sys.argv[1])
    target = int(sys.argv[2])
    original_flush = OffsetIndex.flush

    def flush(self: OffsetIndex, fsync: bool = False) -> None:
        if self.base_offset == target:
            print("killed between index flushes", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        original_flush(self, fsync)

    OffsetIndex.flush = flush  # type: ignore[method-assign]
    PartitionLog.open(directory, append_config(segment_bytes=16 * 1024, index_interval_bytes=256),
                      clock=fixed_clock)
    print("the open finished without rebuilding the target segment", flush=True)


if __name__ == "__main__":
    main()
