"""Kill a real process at every step of the log cleaner's swap protocol.

The child builds a compacted log (nine rolled segments the cleaner takes in three
groups: the first keeps some keys, the second is made only of overwritten hot keys
and cleans to nothing, the third holds their final values and tombstones) and
cleans it, SIGKILLing itself just before one chosen file operation: writing out
the ``.cleaned`` file, renaming it to ``.swap`` (the commit point), deleting each old
segment, renaming the swap to ``.log``, writing the new segment's indexes, saving
the cleaner checkpoint. The parent then reopens the log and checks that it is
consistent, that only original records remain, that every key's latest value is
still at its original offset, that timestamp lookups are right, that no
``.cleaned``/``.swap`` file is left, and that a second pass ends with exactly the
latest value of every live key.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from strand.log import PartitionLog
from strand.log.checkpoint import OffsetCheckpoint
from strand.log.cleaner import LogCleaner
from strand.log.files import CLEANED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, segment_path
from strand.records import BatchBuilder, Record
from tests.crash.crash_helpers import (
    FIXED_NOW_MS,
    KeyedRecord,
    brute_force_offset_for_timestamp,
    check_directory,
    compact_config,
    compact_layout,
    compact_records,
    latest_per_key,
    log_records,
    reopen,
    run_child,
    timestamp_probes,
)

GROUPS = [[0, 1, 2], [3, 4, 5], [6, 7, 8]]  # segment numbers the cleaner takes together


def original_bases() -> list[int]:
    return [segment[0][0].offset for segment in compact_layout()]


def expected_trace() -> list[tuple[str, int]]:
    """Every hooked call of one complete clean, in order, as (step, occurrence)."""
    trace: list[tuple[str, int]] = []
    for g, group in enumerate(GROUPS):
        trace += [("os.fsync", g + 1), ("os.replace", 2 * g + 1), ("fsync_directory", 2 * g + 1)]
        trace += [("delete_files", 3 * g + i + 1) for i in range(len(group))]
        trace += [("os.replace", 2 * g + 2), ("fsync_directory", 2 * g + 2),
                  ("TimeIndex.flush", 2 * g + 1), ("OffsetIndex.flush", 2 * g + 1),
                  ("TimeIndex.flush", 2 * g + 2), ("OffsetIndex.flush", 2 * g + 2)]
    return [*trace, ("checkpoint", 1)]


def leftover_before_reopen(step: str, occurrence: int) -> str | None:
    """Which compaction file a crash just before this call leaves behind."""
    if step == "os.fsync" or (step == "os.replace" and occurrence % 2 == 1):
        return CLEANED_SUFFIX  # written (not yet fsynced), never renamed
    if (step == "fsync_directory" and occurrence % 2 == 1) or step == "delete_files" or (
            step == "os.replace" and occurrence % 2 == 0):
        return SWAP_SUFFIX  # committed, old segments not all gone, not yet renamed
    return None


def group_of(step: str, occurrence: int) -> int:
    per_group = {"os.fsync": 1, "os.replace": 2, "fsync_directory": 2, "delete_files": 3,
                 "OffsetIndex.flush": 2, "TimeIndex.flush": 2}
    return (occurrence - 1) // per_group[step]


# A crash between the cleaned segment's index writes once lost its newest timestamp
# (the .index was written before the .timeindex); these points guard that.
CRASH_POINTS = [
    pytest.param(step, n, id=f"{i:02d}-before-{step}-{n}")
    for i, (step, n) in enumerate(expected_trace())
]


def check_records(records: list[Record], original: dict[int, KeyedRecord]) -> None:
    """Only original records, unchanged, at their offsets; each key's latest kept."""
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), "offsets must strictly increase"
    for r in records:
        o = original.get(r.offset)
        assert o is not None, f"offset {r.offset} holds no original record"
        assert (r.key, r.value, r.timestamp) == (o.key, o.value, o.timestamp), r.offset
    present = {r.offset for r in records}
    keys_present = {r.key for r in records}
    for key, latest in latest_per_key(original.values()).items():
        if latest.value is not None:
            assert latest.offset in present, f"latest value of {key!r} lost"
        else:  # a tombstone may go, but then every older value of its key has gone too
            assert latest.offset in present or key not in keys_present, key


def wrong_timestamp_lookups(log: PartitionLog, records: list[Record]
                            ) -> dict[int, tuple[object, object]]:
    """Probes where ``offset_for_timestamp`` disagrees with a scan of ``records``:
    {timestamp: (expected, got)}."""
    wrong: dict[int, tuple[object, object]] = {}
    for ts in timestamp_probes(records):
        want = brute_force_offset_for_timestamp(records, ts)
        got = log.offset_for_timestamp(ts)
        if got != want:
            wrong[ts] = (want, got)
    return wrong


def final_records() -> list[tuple[int, bytes, bytes | None]]:
    """What a complete clean must leave: the latest value of every live key."""
    latest = latest_per_key(compact_records()).values()
    return sorted((r.offset, r.key, r.value) for r in latest if r.value is not None)


def test_clean_without_crash_follows_the_expected_protocol(tmp_path: Path) -> None:
    """The reference run: the crash points below are exactly the steps of this run."""
    child = run_child("crash_child_compact.py", str(tmp_path / "log"), "none")
    assert child.returncode == 0, child.stderr
    lines = child.stdout.splitlines()
    leo = len(compact_records())
    assert lines[0] == f"built {leo}"
    steps = [tuple(line.split()[1:]) for line in lines if line.startswith("step")]
    assert [(s, int(n)) for s, n in steps] == expected_trace()
    assert lines[-1] == f"cleaned {sum(map(len, GROUPS))} {len(GROUPS)}"
    log = reopen(tmp_path / "log", compact_config())
    try:
        check_directory(tmp_path / "log")
        records = log_records(log)
        assert [(r.offset, r.key, r.value) for r in records] == final_records()
        assert log.log_end_offset == leo
        assert OffsetCheckpoint.load(tmp_path / "log").cleaner_offset == leo
        assert not wrong_timestamp_lookups(log, records)
    finally:
        log.close()


@pytest.mark.parametrize(("step", "occurrence"), CRASH_POINTS)
def test_crash_mid_compaction_recovers_a_consistent_log(
    tmp_path: Path, step: str, occurrence: int
) -> None:
    directory = tmp_path / "log"
    child = run_child("crash_child_compact.py", str(directory), step, str(occurrence))
    assert child.returncode == -9, child.stderr
    lines = child.stdout.splitlines()
    assert lines[-1] == f"step {step} {occurrence}", "the child died somewhere else"
    original = {r.offset: r for r in compact_records()}
    leo = len(original)
    assert lines[0] == f"built {leo}"

    # The crash left the file the protocol says it should.
    bases = original_bases()
    leftover = leftover_before_reopen(step, occurrence)
    names = sorted(p.name for p in directory.iterdir())
    if leftover is not None:
        base = bases[GROUPS[group_of(step, occurrence)][0]]
        assert segment_path(directory, base, LOG_SUFFIX + leftover).name in names, names
    else:
        assert not [n for n in names if n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX))], names

    log = reopen(directory, compact_config())
    try:
        check_directory(directory)  # no .cleaned / .swap, sane segment files
        assert log.log_end_offset == leo
        assert log.high_watermark == leo
        records = log_records(log)  # reads work from log start to end, offsets increase
        check_records(records, original)
        wrong_after_crash = wrong_timestamp_lookups(log, records)  # asserted last

        # A second pass finishes the job.
        result = LogCleaner().clean(log, FIXED_NOW_MS)
        assert result is not None
        records = log_records(log)
        assert [(r.offset, r.key, r.value) for r in records] == final_records()
        check_records(records, original)
        assert not wrong_timestamp_lookups(log, records)
        # And the log takes new writes at its end.
        builder = BatchBuilder()
        builder.append(b"after", key=b"g00", timestamp=FIXED_NOW_MS)
        info = log.append_as_leader(builder.build(), 9)
        assert info.first_offset == leo
    finally:
        log.close()
    log = reopen(directory, compact_config())
    try:
        check_directory(directory)
        records = log_records(log)
        assert [(r.offset, r.key, r.value) for r in records] == [
            *final_records(), (leo, b"g00", b"after")]
    finally:
        log.close()
    assert not wrong_after_crash, (
        f"after the crash, offset_for_timestamp (expected, got): {wrong_after_crash}")
