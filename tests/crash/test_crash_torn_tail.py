"""A torn or damaged tail of the last segment: recovery keeps exactly the intact prefix.

The states are what a crash (or a write that never fully reached the disk) leaves
at the end of the active segment: the file cut short at any byte, its last bytes
overwritten (random bytes, zeros, 0xFF), a partly written next batch, a zero-filled
preallocated tail. With the ``.clean-shutdown`` marker removed, the loader must
recover: every complete batch before the damage is intact, the damaged batch and
everything after it is gone, the file is truncated there and appends continue.

With the marker present the loader trusts the files and only scans batch headers
from the last index entry; damage that breaks the framing (a cut, a clobbered
length field) is still detected and recovered. Damage confined to a batch's record
bytes is not (see ``test_marker_present_payload_damage_is_served_but_fails_crc``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from strand.errors import CorruptRecordError
from strand.log.checkpoint import OffsetCheckpoint
from strand.log.files import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_path
from strand.records import HEADER_SIZE, iter_record_batches, validate_batch
from tests.crash.crash_helpers import (
    FileBatch,
    append_config,
    build_append_log,
    check_append_only_log,
    check_appends_continue,
    check_batch_content,
    check_directory,
    copy_log,
    file_batches,
    garbage,
    has_clean_shutdown_marker,
    remove_clean_shutdown_marker,
    reopen,
    segment_bases,
    stored_batch,
)

CONFIG = append_config(segment_bytes=16 * 1024, index_interval_bytes=512)
BATCHES = 200
LENGTH_FIELD = range(8, 12)  # batchLength: the bytes a header scan relies on


@dataclass(frozen=True)
class Damage:
    """A change to the last segment file; ``apply`` gets its path and its batches and
    returns the complete batches it appended after the old end (a torn next append
    may leave whole batches before the torn one)."""

    name: str
    apply: Callable[[Path, list[FileBatch]], list[bytes]]


def _cut(position: Callable[[list[FileBatch]], int]) -> Callable[[Path, list[FileBatch]],
                                                                   list[bytes]]:
    def apply(path: Path, batches: list[FileBatch]) -> list[bytes]:
        os.truncate(path, position(batches))
        return []
    return apply


def _overwrite(kind: str, count: Callable[[FileBatch], int]
               ) -> Callable[[Path, list[FileBatch]], list[bytes]]:
    def apply(path: Path, batches: list[FileBatch]) -> list[bytes]:
        n = count(batches[-1])
        data = bytearray(path.read_bytes())
        data[-n:] = garbage(kind, n, seed=n)
        path.write_bytes(bytes(data))
        return []
    return apply


def _append_torn(whole: int, partial: Callable[[int], int]
                 ) -> Callable[[Path, list[FileBatch]], list[bytes]]:
    """Append ``whole`` complete next batches, then a prefix of the one after them."""
    def apply(path: Path, batches: list[FileBatch]) -> list[bytes]:
        offset = batches[-1].header.next_offset
        complete = []
        for batch_no in range(BATCHES, BATCHES + whole):
            complete.append(stored_batch(batch_no, offset))
            offset = validate_batch(complete[-1]).next_offset
        torn = stored_batch(BATCHES + whole, offset)
        with open(path, "ab") as f:
            f.write(b"".join(complete) + torn[: partial(len(torn))])
        return complete
    return apply


def _append_bytes(data: bytes) -> Callable[[Path, list[FileBatch]], list[bytes]]:
    def apply(path: Path, batches: list[FileBatch]) -> list[bytes]:
        with open(path, "ab") as f:
            f.write(data)
        return []
    return apply


CUTS = [
    Damage("cut-last-byte", _cut(lambda b: b[-1].end - 1)),
    Damage("cut-in-length-field", _cut(lambda b: b[-1].position + 10)),
    Damage("cut-in-header", _cut(lambda b: b[-1].position + 30)),
    Damage("cut-after-header", _cut(lambda b: b[-1].position + HEADER_SIZE)),
    Damage("cut-in-records", _cut(lambda b: (b[-1].position + HEADER_SIZE + b[-1].end) // 2)),
    Damage("cut-at-batch-boundary", _cut(lambda b: b[-1].position)),
    Damage("cut-into-previous-batch", _cut(lambda b: b[-2].position + 40)),
    Damage("cut-to-empty", _cut(lambda b: 0)),
]
# Overwrites that clobber a batch's length field (detected by a header scan too).
FRAMING_OVERWRITES = [
    Damage(f"overwrite-{kind}-{label}", _overwrite(kind, count))
    for kind in ("random", "zeros", "ones")
    for label, count in (
        ("from-length-field", lambda last: last.header.size_in_bytes - LENGTH_FIELD.start),
        ("into-previous-batch", lambda last: last.header.size_in_bytes + 20),
    )
]
# Overwrites confined to the last batch's record bytes (found by the CRC only).
PAYLOAD_OVERWRITES = [
    Damage(f"overwrite-{kind}-{label}", _overwrite(kind, count))
    for kind in ("random", "zeros", "ones")
    for label, count in (
        ("1", lambda last: 1),
        ("8", lambda last: 8),
        ("half-records", lambda last: (last.header.size_in_bytes - HEADER_SIZE) // 2),
    )
]
TORN_APPENDS = [
    Damage("torn-next-1-byte", _append_torn(0, lambda n: 1)),
    Damage("torn-next-11-bytes", _append_torn(0, lambda n: 11)),
    Damage("torn-next-12-bytes", _append_torn(0, lambda n: 12)),
    Damage("torn-next-header-only", _append_torn(0, lambda n: HEADER_SIZE)),
    Damage("torn-next-all-but-1", _append_torn(0, lambda n: n - 1)),
    Damage("whole-next-then-torn", _append_torn(1, lambda n: n // 2)),
    Damage("two-whole-next-then-torn", _append_torn(2, lambda n: 30)),
    Damage("zero-filled-tail", _append_bytes(bytes(4096))),
    Damage("random-tail", _append_bytes(garbage("random", 100, seed=7))),
    Damage("ones-tail", _append_bytes(b"\xff" * 100)),
]
DETECTED = CUTS + FRAMING_OVERWRITES + TORN_APPENDS
ALL = DETECTED + PAYLOAD_OVERWRITES


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("torn") / "log"
    log = build_append_log(directory, BATCHES, CONFIG)
    assert len(log.segments) >= 4
    log.close()
    return directory


@dataclass(frozen=True)
class Expected:
    last_base: int
    survivors: int  # complete batches kept in the last segment (old and newly appended)
    end_position: int
    log_end_offset: int
    batches_in_log: int  # deterministic batches 0..n-1 the whole log must hold


def damage_last_segment(directory: Path, damage: Damage) -> Expected:
    """Apply ``damage`` and work out, from the bytes, what recovery must keep."""
    last_base = segment_bases(directory)[-1]
    path = segment_path(directory, last_base, LOG_SUFFIX)
    before = file_batches(path)
    appended = damage.apply(path, before)
    after = path.read_bytes()
    candidates = [b.data for b in before] + appended
    survivors = 0
    position = 0
    for data in candidates:  # the longest prefix of whole batches left untouched
        if after[position : position + len(data)] != data:
            break
        survivors += 1
        position += len(data)
    batches_before_last = BATCHES - len(before)
    next_offset = (validate_batch(candidates[survivors - 1]).next_offset if survivors
                   else last_base)
    return Expected(last_base, survivors, position, next_offset,
                    batches_before_last + survivors)


def check_recovered(directory: Path, expected: Expected) -> None:
    log = reopen(directory, CONFIG)
    try:
        assert log.log_end_offset == expected.log_end_offset
        assert [s.base_offset for s in log.segments][-1] == expected.last_base
        batches = check_append_only_log(log)
        assert len(batches) == expected.batches_in_log
        path = segment_path(directory, expected.last_base, LOG_SUFFIX)
        assert path.stat().st_size == expected.end_position  # truncated at the bad byte
        assert log.active_segment.size == expected.end_position
        check_directory(directory)
        check_appends_continue(log, expected.batches_in_log, count=4)
    finally:
        log.close()
    # A clean restart sees the repaired log as it was left.
    log = reopen(directory, CONFIG)
    try:
        assert len(check_append_only_log(log)) == expected.batches_in_log + 4
        check_appends_continue(log, expected.batches_in_log + 4)
    finally:
        log.close()


@pytest.mark.parametrize("damage", ALL, ids=[d.name for d in ALL])
def test_unclean_shutdown_recovers_the_intact_prefix(
    pristine: Path, tmp_path: Path, damage: Damage
) -> None:
    directory = copy_log(pristine, tmp_path / "log")
    remove_clean_shutdown_marker(directory)
    expected = damage_last_segment(directory, damage)
    check_recovered(directory, expected)


@pytest.mark.parametrize("damage", DETECTED, ids=[d.name for d in DETECTED])
def test_marker_present_framing_damage_is_still_recovered(
    pristine: Path, tmp_path: Path, damage: Damage
) -> None:
    """A clean-shutdown marker does not make the loader serve a tail that does not parse."""
    directory = copy_log(pristine, tmp_path / "log")
    assert has_clean_shutdown_marker(directory)
    expected = damage_last_segment(directory, damage)
    check_recovered(directory, expected)


@pytest.mark.parametrize("damage", PAYLOAD_OVERWRITES, ids=[d.name for d in PAYLOAD_OVERWRITES])
def test_marker_present_payload_damage_is_served_but_fails_crc(
    pristine: Path, tmp_path: Path, damage: Damage
) -> None:
    """What the loader does with a clean-shutdown marker and damaged record bytes.

    The marker says every file was fsynced before shutdown, so (as in Kafka) no CRC is
    checked on open: the header scan still parses, so the damaged batch stays in the
    log. It is never silently turned into other records, though: its CRC no longer
    matches, so a validating reader rejects it, and the next unclean open cuts it off.
    """
    directory = copy_log(pristine, tmp_path / "log")
    expected = damage_last_segment(directory, damage)
    full = file_batches(segment_path(pristine, expected.last_base, LOG_SUFFIX))
    first_damaged = BATCHES - len(full) + expected.survivors  # BATCHES: nothing damaged
    log = reopen(directory, CONFIG)
    # Not closed below: a crash now. The open removed the marker, so the next open
    # is an unclean one, which must repair the segment.
    assert log.log_end_offset == full[-1].header.next_offset  # the tail was trusted
    served = []
    offset = 0
    while offset < log.log_end_offset:
        for batch in iter_record_batches(log.read(offset, 1 << 20), validate=False):
            served.append(batch)
            offset = batch.header.next_offset
    assert len(served) == BATCHES
    for batch_no, batch in enumerate(served[:first_damaged]):
        check_batch_content(batch, batch_no)  # everything before the damage is exact
    if first_damaged < BATCHES:
        with pytest.raises(CorruptRecordError):
            validate_batch(served[first_damaged].raw)
    check_recovered(directory, expected)


def test_torn_tail_of_an_earlier_segment_drops_the_later_ones(
    pristine: Path, tmp_path: Path
) -> None:
    """Recovery truncates a torn segment and deletes every later segment (their data no
    longer follows on), leaving a log that ends at the last intact batch."""
    directory = copy_log(pristine, tmp_path / "log")
    remove_clean_shutdown_marker(directory)
    checkpoint = OffsetCheckpoint.load(directory)
    checkpoint.recovery_point = 0  # nothing was ever flushed: recover every segment
    checkpoint.save(directory)
    bases = segment_bases(directory)
    victim = bases[-3]
    path = segment_path(directory, victim, LOG_SUFFIX)
    batches = file_batches(path)
    os.truncate(path, batches[5].position + 20)
    log = reopen(directory, CONFIG)
    try:
        assert [s.base_offset for s in log.segments] == bases[: len(bases) - 2]
        assert log.log_end_offset == batches[4].header.next_offset
        assert path.stat().st_size == batches[5].position
        for later in bases[-2:]:
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                assert not segment_path(directory, later, suffix).exists()
        kept = check_append_only_log(log)
        check_directory(directory)
        check_appends_continue(log, len(kept))
    finally:
        log.close()
