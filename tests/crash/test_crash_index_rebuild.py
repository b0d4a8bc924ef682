"""Lost or damaged ``.index`` / ``.timeindex`` files: the log gives the same answers.

Indexes are disposable: a missing or untrustworthy one must be rebuilt from the
segment on open. For every kind of damage, on all segments or on one, with and
without the clean-shutdown marker, every ``read(offset, max_bytes)`` and every
``offset_for_timestamp(ts)`` must answer exactly as before the damage (and as a
brute-force scan of the records says), after the first reopen and after a clean
restart with the rebuilt files.
"""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from strand.log import LogConfig, PartitionLog
from strand.log.files import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_path
from strand.log.time_index import TimeIndex
from strand.records import BatchBuilder
from tests.crash.crash_helpers import (
    FIXED_NOW_MS,
    append_config,
    brute_force_offset_for_timestamp,
    build_append_log,
    check_append_only_log,
    check_appends_continue,
    check_directory,
    copy_log,
    file_batches,
    fixed_clock,
    log_records,
    read_answers,
    remove_clean_shutdown_marker,
    reopen,
    run_child,
    timestamp_answers,
    timestamp_probes,
)

CONFIG = append_config(segment_bytes=16 * 1024, index_interval_bytes=256)
BATCHES = 220
OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")
ENTRY_SIZE = {INDEX_SUFFIX: OFFSET_ENTRY.size, TIME_INDEX_SUFFIX: TIME_ENTRY.size}


@dataclass(frozen=True)
class Pristine:
    directory: Path
    bases: list[int]
    reads: dict[tuple[int, int], bytes]
    probes: list[int]
    stamps: dict[int, tuple[int, int] | None]
    batches: int


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    directory = tmp_path_factory.mktemp("index") / "log"
    log = build_append_log(directory, BATCHES, CONFIG)
    # The answers of the log as it was built by appends, before any file is touched.
    records = log_records(log)
    probes = timestamp_probes(records)
    stamps = timestamp_answers(log, probes)
    assert stamps == {ts: brute_force_offset_for_timestamp(records, ts) for ts in probes}
    reads = read_answers(log)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    log.close()
    for base in bases:  # every index holds several entries, so damage has room to bite
        for suffix, size in ENTRY_SIZE.items():
            assert segment_path(directory, base, suffix).stat().st_size >= 3 * size
    return Pristine(directory, bases, reads, probes, stamps, BATCHES)


# -- damage --------------------------------------------------------------------------------

Mutation = Callable[[Path, Path, str], None]  # (index path, segment .log path, suffix)


def _delete(path: Path, log_path: Path, suffix: str) -> None:
    path.unlink()


def _garbage_same_size(path: Path, log_path: Path, suffix: str) -> None:
    path.write_bytes(random.Random(path.name).randbytes(path.stat().st_size))


def _garbage_odd_size(path: Path, log_path: Path, suffix: str) -> None:
    path.write_bytes(random.Random(path.name).randbytes(path.stat().st_size + 3))


def _zeros(path: Path, log_path: Path, suffix: str) -> None:
    path.write_bytes(bytes(path.stat().st_size))


def _truncated_mid_entry(path: Path, log_path: Path, suffix: str) -> None:
    os.truncate(path, path.stat().st_size - 3)


def _past_the_end(path: Path, log_path: Path, suffix: str) -> None:
    """The last entry points beyond the segment: past its last byte (offset index) or
    past its last offset (time index). Everything else is left plausible."""
    data = bytearray(path.read_bytes())
    last = len(data) - ENTRY_SIZE[suffix]
    if suffix == INDEX_SUFFIX:
        relative, _ = OFFSET_ENTRY.unpack_from(data, last)
        OFFSET_ENTRY.pack_into(data, last, relative, log_path.stat().st_size + 100)
    else:
        timestamp, _ = TIME_ENTRY.unpack_from(data, last)
        base = int(log_path.name[:20])
        next_offset = file_batches(log_path)[-1].header.next_offset
        TIME_ENTRY.pack_into(data, last, timestamp, next_offset - base + 10)
    path.write_bytes(bytes(data))


def _entries_swapped(path: Path, log_path: Path, suffix: str) -> None:
    size = ENTRY_SIZE[suffix]
    data = path.read_bytes()
    path.write_bytes(data[size : 2 * size] + data[:size] + data[2 * size :])


def _offset_index_stale_prefix(path: Path, log_path: Path, suffix: str) -> None:
    """A valid but shorter offset index (entries that never reached the disk)."""
    entries = path.stat().st_size // OFFSET_ENTRY.size
    os.truncate(path, entries // 2 * OFFSET_ENTRY.size)


MUTATIONS: dict[str, Mutation] = {
    "deleted": _delete,
    "garbage": _garbage_same_size,
    "garbage-odd-size": _garbage_odd_size,
    "zeros": _zeros,
    "truncated-mid-entry": _truncated_mid_entry,
    "past-the-end": _past_the_end,
    "not-increasing": _entries_swapped,
}

CASES: list[tuple[str, tuple[str, ...], Mutation]] = [
    (f"{suffix.lstrip('.')}-{name}", (suffix,), mutation)
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
    for name, mutation in MUTATIONS.items()
]
CASES += [
    ("both-deleted", (INDEX_SUFFIX, TIME_INDEX_SUFFIX), _delete),
    ("both-garbage", (INDEX_SUFFIX, TIME_INDEX_SUFFIX), _garbage_same_size),
    ("index-stale-prefix", (INDEX_SUFFIX,), _offset_index_stale_prefix),
]


def damage(directory: Path, bases: list[int], suffixes: tuple[str, ...],
           mutation: Mutation) -> None:
    for base in bases:
        log_path = segment_path(directory, base, LOG_SUFFIX)
        for suffix in suffixes:
            mutation(segment_path(directory, base, suffix), log_path, suffix)


def check_same_answers(pristine: Pristine, directory: Path) -> None:
    """Reopen twice (recovering, then cleanly) and compare every answer with the pristine log."""
    for attempt in ("after damage", "clean restart"):
        log = reopen(directory, CONFIG)
        try:
            assert log.log_end_offset == max(k[0] for k in pristine.reads), attempt
            reads = read_answers(log)
            assert reads.keys() == pristine.reads.keys()
            wrong_reads = [k for k, v in reads.items() if v != pristine.reads[k]]
            assert not wrong_reads, f"{attempt}: reads differ at {wrong_reads[:5]}"
            stamps = timestamp_answers(log, pristine.probes)
            wrong = {ts: (pristine.stamps[ts], got) for ts, got in stamps.items()
                     if got != pristine.stamps[ts]}
            assert not wrong, f"{attempt}: offset_for_timestamp (expected, got): {wrong}"
            check_directory(directory)
            for segment in log.segments:  # every index file is back and loads cleanly
                size = segment.size
                index = segment_path(directory, segment.base_offset, INDEX_SUFFIX)
                assert index.stat().st_size % OFFSET_ENTRY.size == 0
                TimeIndex.load(segment_path(directory, segment.base_offset, TIME_INDEX_SUFFIX),
                               segment.base_offset, 1 << 20, segment.next_offset)
                assert size == segment.log_path.stat().st_size
        finally:
            log.close()


# Without the marker the active segment is recovered whatever its indexes look like;
# the other segments lie below the recovery point and load their indexes either way,
# so damage to one middle segment needs no unclean variant.
SCOPES = [("all-segments", True), ("all-segments", False), ("one-segment", True)]


@pytest.mark.parametrize(("scope", "marker"), SCOPES,
                         ids=["all-segments-clean-marker", "all-segments-unclean",
                              "one-segment-clean-marker"])
@pytest.mark.parametrize(("case", "suffixes", "mutation"), CASES, ids=[c[0] for c in CASES])
def test_damaged_indexes_are_rebuilt_with_identical_answers(
    pristine: Pristine, tmp_path: Path, case: str, suffixes: tuple[str, ...],
    mutation: Mutation, scope: str, marker: bool,
) -> None:
    directory = copy_log(pristine.directory, tmp_path / "log")
    middle = pristine.bases[len(pristine.bases) // 2]
    bases = pristine.bases if scope == "all-segments" else [middle]
    original = {base: segment_path(directory, base, INDEX_SUFFIX).read_bytes() for base in bases}
    damage(directory, bases, suffixes, mutation)
    if not marker:
        remove_clean_shutdown_marker(directory)
    check_same_answers(pristine, directory)
    if INDEX_SUFFIX in suffixes and case != "index-stale-prefix":
        for base in bases:  # rebuilt from the segment: the very same entries
            assert segment_path(directory, base, INDEX_SUFFIX).read_bytes() == original[base]
    log = reopen(directory, CONFIG)
    try:
        check_append_only_log(log)
        check_appends_continue(log, pristine.batches)
    finally:
        log.close()


def test_undamaged_log_reopens_with_identical_answers(pristine: Pristine, tmp_path: Path) -> None:
    """Baseline: the comparison itself holds for a log that was merely closed and reopened."""
    check_same_answers(pristine, copy_log(pristine.directory, tmp_path / "log"))


# -- a time index shorter than its offset index ---------------------------------------------


def segment_with_early_max(directory: Path, bases: list[int]) -> int:
    """A closed segment whose newest timestamp lies before its last offset-index entry,
    so only the time index knows it (the header scan on open starts at that entry)."""
    for base in bases[:-1]:
        index = segment_path(directory, base, INDEX_SUFFIX).read_bytes()
        _, last_position = OFFSET_ENTRY.unpack_from(index, len(index) - OFFSET_ENTRY.size)
        batches = file_batches(segment_path(directory, base, LOG_SUFFIX))
        tail_max = max(b.header.max_timestamp for b in batches if b.position >= last_position)
        if max(b.header.max_timestamp for b in batches) > tail_max:
            return base
    raise AssertionError("no segment has its max timestamp before its last index entry")


# These guard a fixed bug: a .timeindex shorter than its .index was trusted, so a
# segment's max timestamp came out too small (offset_for_timestamp skipped the segment,
# retention deleted fresh data). Indexes are now written time index first, and the max
# timestamp is scanned from the time index's last entry, however short it is.


@pytest.mark.parametrize("keep_entries", [0, 1], ids=["empty", "first-entry-only"])
@pytest.mark.parametrize("marker", [True, False], ids=["clean-marker", "unclean"])
def test_time_index_shorter_than_offset_index_is_rebuilt(
    pristine: Pristine, tmp_path: Path, keep_entries: int, marker: bool
) -> None:
    """A .timeindex that lost its tail while the .index kept its entries (damage: the
    write order no longer lets a crash leave this state)."""
    directory = copy_log(pristine.directory, tmp_path / "log")
    base = segment_with_early_max(directory, pristine.bases)
    os.truncate(segment_path(directory, base, TIME_INDEX_SUFFIX),
                keep_entries * TIME_ENTRY.size)
    if not marker:
        remove_clean_shutdown_marker(directory)
    check_same_answers(pristine, directory)


def test_crash_while_rebuilding_indexes_then_reopen(pristine: Pristine, tmp_path: Path) -> None:
    """With a real process: a segment below the recovery point has a corrupt .index, so
    the open rebuilds both indexes; the process is SIGKILLed between writing the new
    .timeindex and the new .index. The next open must still answer correctly."""
    directory = copy_log(pristine.directory, tmp_path / "log")
    base = segment_with_early_max(directory, pristine.bases)
    _garbage_odd_size(segment_path(directory, base, INDEX_SUFFIX), Path(), INDEX_SUFFIX)
    child = run_child("crash_child_index_rebuild.py", str(directory), str(base))
    assert child.returncode == -9, child.stderr
    assert "killed between index flushes" in child.stdout
    index = segment_path(directory, base, INDEX_SUFFIX)
    assert index.stat().st_size == 0
    time_index = segment_path(directory, base, TIME_INDEX_SUFFIX).stat().st_size
    assert time_index > 0 and time_index % TIME_ENTRY.size == 0
    check_same_answers(pristine, directory)


def test_time_index_shorter_than_offset_index_does_not_fool_retention(tmp_path: Path) -> None:
    """The same state seen by retention: a segment whose newest record is one minute old
    must not be deleted by retention.ms of one hour."""
    now = FIXED_NOW_MS
    config = LogConfig(segment_bytes=4096, index_interval_bytes=200, retention_ms=3_600_000)
    directory = tmp_path / "log"
    log = PartitionLog.open(directory, config, clock=fixed_clock)
    for i in range(40):  # the first batch is recent, every other one two hours old
        builder = BatchBuilder()
        builder.append(b"x" * 100, key=b"k", timestamp=now - 60_000 if i == 0 else
                       now - 7_200_000 + i)
        log.append_as_leader(builder.build(), 0)
    log.update_high_watermark(log.log_end_offset)
    first = log.segments[0].base_offset
    assert len(log.segments) >= 2
    log.close()
    os.truncate(segment_path(directory, first, TIME_INDEX_SUFFIX), 0)
    log = reopen(directory, config)
    try:
        deleted = log.delete_old_segments()
        assert (deleted, log.log_start_offset) == (0, 0), "retention deleted fresh data"
        assert log.offset_for_timestamp(now - 120_000) == (0, now - 60_000)
    finally:
        log.close()
