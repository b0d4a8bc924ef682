"""Crashes in the middle of a segment roll.

First with real processes: the appending child SIGKILLs itself at each point of the
third roll (before the old segment writes out its indexes, before the new segment
exists, with only its ``.log``, with ``.log`` and ``.index``, right after the roll, and
halfway through the first write into the new segment). Then the on-disk states such
a crash can leave (plus a lost directory entry or unflushed index after power loss)
are laid out by hand. Every time the reopened log must hold all the data, answer
reads and timestamp lookups as before, and take appends at its end.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from strand.log.checkpoint import OffsetCheckpoint
from strand.log.files import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_path
from tests.crash.crash_helpers import (
    append_config,
    brute_force_offset_for_timestamp,
    build_append_log,
    check_append_only_log,
    check_appends_continue,
    check_directory,
    copy_log,
    file_batches,
    log_records,
    parse_acks,
    read_answers,
    remove_clean_shutdown_marker,
    reopen,
    run_child,
    segment_bases,
    timestamp_answers,
    timestamp_probes,
)

SEGMENT_BYTES = 8 * 1024
ROLL_NUMBER = 3

# kill point -> (new .log exists, new .index exists, new .timeindex exists)
KILL_POINTS: dict[str, tuple[bool, bool, bool]] = {
    "before-inactive": (False, False, False),
    "before-create": (False, False, False),
    # a new segment's .timeindex is created before its .index
    "before-time-index": (True, False, False),
    "before-offset-index": (True, False, True),
    "after-roll": (True, True, True),
    "torn-first-write": (True, True, True),
}


@pytest.mark.parametrize("flush_messages", [0, 1], ids=["never-flush", "flush-every-append"])
@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_process_killed_mid_roll(tmp_path: Path, point: str, flush_messages: int) -> None:
    directory = tmp_path / "log"
    child = run_child("crash_child_append.py", str(directory), str(SEGMENT_BYTES),
                      str(flush_messages), point, str(ROLL_NUMBER))
    assert child.returncode == -9, child.stderr
    acked = parse_acks(line.encode() for line in child.stdout.splitlines())
    assert sorted(acked) == list(range(len(acked)))
    end = acked[len(acked) - 1][1] + 1  # the log end offset the child had acknowledged

    # The crash left the state it was meant to leave.
    bases = segment_bases(directory)
    new_log, new_index, new_time_index = KILL_POINTS[point]
    assert len(bases) == ROLL_NUMBER + (1 if new_log else 0)
    assert (bases[-1] == end) == new_log
    assert segment_path(directory, end, INDEX_SUFFIX).exists() == new_index
    assert segment_path(directory, end, TIME_INDEX_SUFFIX).exists() == new_time_index
    if new_log:
        size = segment_path(directory, end, LOG_SUFFIX).stat().st_size
        assert (size > 0) == (point == "torn-first-write")
    if flush_messages:
        assert OffsetCheckpoint.load(directory).recovery_point == end

    config = append_config(segment_bytes=SEGMENT_BYTES, flush_messages=flush_messages or None)
    log = reopen(directory, config)
    try:
        # Exactly the acknowledged batches: the append that triggered the roll never
        # completed (a torn one is cut away).
        batches = check_append_only_log(log, acked=acked)
        assert len(batches) == len(acked)
        assert log.log_end_offset == end
        assert check_directory(directory) == [s.base_offset for s in log.segments]
        if new_log:  # the new segment, empty, is the active one
            assert log.active_segment.base_offset == end
            assert log.active_segment.size == 0
        check_appends_continue(log, len(batches), count=30)  # rolls again on the way
    finally:
        log.close()
    log = reopen(directory, config)
    try:
        assert len(check_append_only_log(log, acked=acked)) == len(acked) + 30
    finally:
        log.close()


# -- on-disk states laid out by hand --------------------------------------------------------

CONFIG = append_config(segment_bytes=SEGMENT_BYTES, index_interval_bytes=300)
BATCHES = 90


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("roll") / "log"
    log = build_append_log(directory, BATCHES, CONFIG)
    assert len(log.segments) >= 3
    log.close()
    return directory


def _new_empty_log(directory: Path, end: int, previous: int) -> None:
    segment_path(directory, end, LOG_SUFFIX).touch()


def _new_indexes_without_log(directory: Path, end: int, previous: int) -> None:
    segment_path(directory, end, INDEX_SUFFIX).touch()
    segment_path(directory, end, TIME_INDEX_SUFFIX).touch()


def _new_log_and_offset_index(directory: Path, end: int, previous: int) -> None:
    segment_path(directory, end, LOG_SUFFIX).touch()
    segment_path(directory, end, INDEX_SUFFIX).touch()


def _previous_index_lost(directory: Path, end: int, previous: int) -> None:
    segment_path(directory, end, LOG_SUFFIX).touch()
    segment_path(directory, previous, INDEX_SUFFIX).unlink()
    segment_path(directory, previous, TIME_INDEX_SUFFIX).unlink()


def _previous_indexes_never_written(directory: Path, end: int, previous: int) -> None:
    segment_path(directory, end, LOG_SUFFIX).touch()
    os.truncate(segment_path(directory, previous, INDEX_SUFFIX), 0)
    os.truncate(segment_path(directory, previous, TIME_INDEX_SUFFIX), 0)


def _previous_index_zero_filled(directory: Path, end: int, previous: int) -> None:
    """The index grew but its blocks never got written: zeros where entries should be."""
    segment_path(directory, end, LOG_SUFFIX).touch()
    index = segment_path(directory, previous, INDEX_SUFFIX)
    index.write_bytes(bytes(index.stat().st_size))


STATES: dict[str, Callable[[Path, int, int], None]] = {
    "new-empty-log-without-indexes": _new_empty_log,
    "new-indexes-without-log": _new_indexes_without_log,
    "new-log-and-offset-index-only": _new_log_and_offset_index,
    "previous-index-lost": _previous_index_lost,
    "previous-indexes-empty": _previous_indexes_never_written,
    "previous-index-zero-filled": _previous_index_zero_filled,
}


@pytest.mark.parametrize("marker", [True, False], ids=["clean-marker", "unclean"])
@pytest.mark.parametrize("state", list(STATES))
def test_mid_roll_state_reopens_consistent(
    pristine: Path, tmp_path: Path, state: str, marker: bool
) -> None:
    before = reopen(copy_log(pristine, tmp_path / "reference"), CONFIG)
    try:
        reads = read_answers(before)
        records = log_records(before)
        probes = timestamp_probes(records)
        stamps = timestamp_answers(before, probes)
        assert stamps == {ts: brute_force_offset_for_timestamp(records, ts) for ts in probes}
        end = before.log_end_offset
    finally:
        before.close()

    directory = copy_log(pristine, tmp_path / "log")
    bases = segment_bases(directory)
    STATES[state](directory, end, bases[-1])
    if not marker:
        remove_clean_shutdown_marker(directory)
    log = reopen(directory, CONFIG)
    try:
        assert log.log_end_offset == end
        assert read_answers(log) == reads
        assert timestamp_answers(log, probes) == stamps
        assert check_append_only_log(log)
        on_disk = check_directory(directory)  # orphan indexes are gone
        assert on_disk == [s.base_offset for s in log.segments]
        assert on_disk[:len(bases)] == bases
        assert on_disk[len(bases):] in ([], [end])
        check_appends_continue(log, BATCHES, count=40)
    finally:
        log.close()
    log = reopen(directory, CONFIG)
    try:
        assert len(check_append_only_log(log)) == BATCHES + 40
    finally:
        log.close()


def test_new_segment_after_torn_previous_segment_is_dropped(pristine: Path, tmp_path: Path) -> None:
    """After a power loss the new segment's directory entry may survive while the end of
    the previous segment did not: recovery cuts the previous segment back to its last
    whole batch and removes the new segment, whose base no longer follows on."""
    directory = copy_log(pristine, tmp_path / "log")
    remove_clean_shutdown_marker(directory)
    previous = segment_bases(directory)[-1]
    previous_path = segment_path(directory, previous, LOG_SUFFIX)
    batches = file_batches(previous_path)
    end = batches[-1].header.next_offset
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        segment_path(directory, end, suffix).touch()
    os.truncate(previous_path, batches[-1].position + 25)
    checkpoint = OffsetCheckpoint.load(directory)
    checkpoint.recovery_point = previous  # the last flush happened before this segment
    checkpoint.save(directory)
    log = reopen(directory, CONFIG)
    try:
        assert log.log_end_offset == batches[-1].header.base_offset
        assert log.active_segment.base_offset == previous
        assert not segment_path(directory, end, LOG_SUFFIX).exists()
        kept = check_append_only_log(log)
        assert len(kept) == BATCHES - 1
        check_directory(directory)
        check_appends_continue(log, len(kept), count=40)
    finally:
        log.close()
