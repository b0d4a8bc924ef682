"""Crash in the middle of ``truncate_to`` (a follower cutting off its divergent tail).

Whatever the moment of the crash, the reopened log must be one the truncation could
have started from or ended in: every batch before the truncation point intact, offsets
contiguous from 0 (no batch that was to stay lost, no hole), and once ``truncate_to``
has returned, nothing at or after the truncation point comes back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crash.crash_helpers import (
    append_config,
    check_append_only_log,
    check_appends_continue,
    check_directory,
    reopen,
    run_child,
    segment_bases,
)

BATCHES = 140
TARGET_BATCH = 30  # in the second segment
SEGMENTS = 6  # what 140 batches make with 8 KiB segments

# "before-delete-2" guards a fixed bug: truncate_to deleted later segments oldest first,
# so a crash after the first deletion left a hole of missing offsets.
POINTS = [
    pytest.param("before-delete-1"),
    pytest.param("before-delete-2"),
    pytest.param("before-segment-truncate"),
    pytest.param("after-truncate"),
]


@pytest.mark.parametrize("point", POINTS)
def test_crash_mid_truncate_leaves_a_contiguous_log(tmp_path: Path, point: str) -> None:
    directory = tmp_path / "log"
    child = run_child("crash_child_truncate.py", str(directory), str(BATCHES),
                      str(TARGET_BATCH), point)
    assert child.returncode == -9, child.stderr
    target = int(child.stdout.split()[1])
    # The crash left the state it was meant to leave: segments deleted so far.
    left = {"before-delete-1": SEGMENTS, "before-delete-2": SEGMENTS - 1}.get(point, 2)
    assert len(segment_bases(directory)) == left

    config = append_config(segment_bytes=8 * 1024)
    log = reopen(directory, config)
    try:
        check_directory(directory)
        batches = check_append_only_log(log)  # contiguous from 0, byte-exact
        assert len(batches) >= TARGET_BATCH
        assert batches[TARGET_BATCH - 1].header.next_offset == target
        if point == "after-truncate":
            assert log.log_end_offset == target
            assert len(batches) == TARGET_BATCH
        check_appends_continue(log, len(batches))
    finally:
        log.close()
