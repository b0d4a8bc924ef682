"""SIGKILL a real process in the middle of a stream of appends, then recover its log.

SIGKILL does not lose the page cache, so every acknowledged append must survive.
Appends the child made but could not acknowledge may or may not be there; if they
are, they must be complete and exact. The kill lands at a random moment of the
append loop (several seeds), with and without periodic flushes (which move the
recovery point, so part of the log is opened without a full recovery scan).
"""

from __future__ import annotations

import random
import signal
import threading
import time
from pathlib import Path

import pytest

from strand.log.checkpoint import OffsetCheckpoint
from strand.log.files import LOG_SUFFIX, segment_path
from tests.crash.crash_helpers import (
    append_config,
    check_append_only_log,
    check_appends_continue,
    check_directory,
    file_batches,
    has_clean_shutdown_marker,
    parse_acks,
    reopen,
    start_child,
)

SEGMENT_BYTES = 32 * 1024
# (seed, flush.messages); 0 = never flush, so the whole log is recovered on open.
RUNS = [(0, 0), (1, 7), (2, 0), (3, 50), (4, 0), (5, 1)]


def kill_child_mid_append(directory: Path, seed: int, flush_messages: int
                          ) -> dict[int, tuple[int, int]]:
    """Start the appending child, SIGKILL it at a random moment; return its acks."""
    rng = random.Random(seed)
    target = rng.randint(300, 900)
    with start_child("crash_child_append.py", str(directory), str(SEGMENT_BYTES),
                     str(flush_messages)) as child:
        watchdog = threading.Timer(60, child.kill)  # never hang the suite on a stuck child
        watchdog.start()
        try:
            assert child.stdout is not None and child.stderr is not None
            lines = []
            while True:
                line = child.stdout.readline()
                assert line, f"child ended early: {child.stderr.read().decode()}"
                lines.append(line)
                if line.startswith(b"ack") and len(lines) > target:
                    break
            time.sleep(rng.uniform(0, 0.02))  # let it run on: the kill lands anywhere
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
            # Through the buffered reader: readline may already hold part of the rest.
            rest = child.stdout.read()
            err = child.stderr.read()
        finally:
            watchdog.cancel()
            if child.poll() is None:
                child.kill()
    assert child.returncode == -signal.SIGKILL, err.decode()
    # Lines already in the pipe were written after their append returned: acked too.
    complete = rest[: rest.rfind(b"\n") + 1]
    assert b"done" not in complete, "the child ran out of batches before the kill"
    return parse_acks([*lines, *complete.splitlines()])


@pytest.mark.parametrize(("seed", "flush_messages"), RUNS,
                         ids=[f"seed{s}-flush{f}" for s, f in RUNS])
def test_sigkill_mid_append_keeps_every_acknowledged_batch(
    tmp_path: Path, seed: int, flush_messages: int
) -> None:
    directory = tmp_path / "log"
    acked = kill_child_mid_append(directory, seed, flush_messages)
    assert len(acked) > 300
    assert sorted(acked) == list(range(len(acked))), "acks must be 0..n-1"
    assert not has_clean_shutdown_marker(directory)
    checkpoint = OffsetCheckpoint.load(directory)
    if flush_messages:
        assert checkpoint.recovery_point > 0  # part of the log opens without recovery
    # The child's last acked offsets, before recovery touches anything.
    last_acked_offset = acked[len(acked) - 1][1]

    config = append_config(segment_bytes=SEGMENT_BYTES,
                           flush_messages=flush_messages or None)
    log = reopen(directory, config)
    try:
        assert len(log.segments) >= 3, "the test wants several rolled segments"
        batches = check_append_only_log(log, acked=acked)
        # Unacknowledged batches may have made it (written, killed before the ack),
        # but only whole ones: check_append_only_log verified each byte for byte.
        assert len(batches) >= len(acked)
        assert log.log_end_offset == batches[-1].header.next_offset
        assert log.log_end_offset > last_acked_offset
        assert log.high_watermark <= log.log_end_offset
        assert log.recovery_point <= log.log_end_offset
        # Nothing follows the last complete batch in any file.
        bases = check_directory(directory)
        assert bases == [s.base_offset for s in log.segments]
        last = file_batches(segment_path(directory, bases[-1], LOG_SUFFIX))
        if last:
            assert last[-1].header.next_offset == log.log_end_offset
            assert last[-1].end == log.segments[-1].size
        check_appends_continue(log, len(batches), count=5)
        total = len(batches) + 5
    finally:
        log.close()

    # And the recovered, extended log survives a clean restart unchanged.
    log = reopen(directory, config)
    try:
        assert len(check_append_only_log(log, acked=acked)) == total
        check_appends_continue(log, total)
    finally:
        log.close()
