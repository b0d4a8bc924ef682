from __future__ import annotations

import itertools
from collections.abc import Callable

from strand.log import LogConfig, PartitionLog
from strand.log.cleaner import LogCleaner, dirty_ratio, needs_cleaning
from strand.records import BatchBuilder, Compression, build_end_txn_marker, iter_record_batches
from strand.records.control import ControlType
from tests.support.clock import FakeClock
from tests.unit.log.log_helpers import read_all, read_batches

OpenLog = Callable[..., PartitionLog]
COMPACT = ("compact",)


_SEQUENCE = itertools.count()


def keyed(pairs: list[tuple[bytes, bytes | None]], *, timestamp: int,
          compression: Compression = Compression.NONE) -> bytes:
    # Consecutive sequences: the log takes a repeated one for a producer's retry.
    builder = BatchBuilder(compression=compression, producer_id=7, producer_epoch=1,
                           base_sequence=next(_SEQUENCE))
    for _ in pairs[1:]:
        next(_SEQUENCE)
    for key, value in pairs:
        builder.append(value, key=key, headers=[("h", key)], timestamp=timestamp)
    return builder.build()


def test_latest_value_per_key_offsets_and_batch_fields_kept(
        open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(LogConfig(segment_bytes=2000, cleanup_policy=COMPACT))
    for i in range(40):
        pairs: list[tuple[bytes, bytes | None]] = [
            (b"k%d" % ((i + j) % 6), b"v%d-%d" % (i, j)) for j in range(3)]
        log.append_as_leader(keyed(pairs, timestamp=clock.now_ms,
                                   compression=Compression(i % 5)), leader_epoch=i // 10)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    latest = {r.key: r for r in read_all(log)}
    before_batches = {b.header.base_offset: b.header for b in read_batches(log)}
    result = LogCleaner().clean(log, clock.now_ms)
    assert result is not None and result.records_removed == 120 - 6
    after = read_all(log)
    assert {r.key: r for r in after} == latest
    assert len(after) == 6
    for header in (b.header for b in read_batches(log)):
        original = before_batches[header.base_offset]  # base offsets survive
        assert header.last_offset_delta == original.last_offset_delta
        assert header.compression == original.compression
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
            7, 1, original.base_sequence)
        assert header.partition_leader_epoch == original.partition_leader_epoch
    assert log.cleaner_offset == log.active_segment.base_offset


def test_active_segment_and_data_above_high_watermark_are_untouched(
        open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(LogConfig(segment_bytes=600, cleanup_policy=COMPACT))
    for i in range(30):
        log.append_as_leader(keyed([(b"same", b"v%d" % i)], timestamp=clock.now_ms),
                             leader_epoch=0)
    log.update_high_watermark(10)
    boundary = max(s.next_offset for s in log.segments if s.next_offset <= 10)
    assert 0 < boundary < log.active_segment.base_offset
    active_bytes = log.read(log.active_segment.base_offset, 1 << 30)
    LogCleaner().clean(log, clock.now_ms)
    # below the boundary only the latest record survives; from the segment holding the
    # high watermark on, nothing is touched
    assert [r.offset for r in read_all(log)] == [boundary - 1, *range(boundary, 30)]
    assert log.read(log.active_segment.base_offset, 1 << 30) == active_bytes


def test_tombstones_kept_for_delete_retention_then_dropped(
        open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(LogConfig(segment_bytes=500, cleanup_policy=COMPACT,
                             delete_retention_ms=60_000))
    log.append_as_leader(keyed([(b"a", b"1"), (b"b", b"1")], timestamp=clock.now_ms),
                         leader_epoch=0)
    log.append_as_leader(keyed([(b"a", None)], timestamp=clock.now_ms), leader_epoch=0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    LogCleaner().clean(log, clock.now_ms)
    assert [(r.key, r.value) for r in read_all(log)] == [(b"b", b"1"), (b"a", None)]
    clock.advance(61_000)
    result = LogCleaner().clean(log, clock.now_ms)
    assert result is not None and result.tombstones_removed == 1
    assert [(r.key, r.value) for r in read_all(log)] == [(b"b", b"1")]


def test_min_compaction_lag(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(LogConfig(segment_bytes=300, cleanup_policy=COMPACT,
                             min_compaction_lag_ms=10_000))
    for i in range(10):
        log.append_as_leader(keyed([(b"k", b"v%d" % i)], timestamp=clock.now_ms), leader_epoch=0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    assert LogCleaner().clean(log, clock.now_ms) is None  # too young
    clock.advance(10_001)
    assert LogCleaner().clean(log, clock.now_ms) is not None
    assert [r.value for r in read_all(log)] == [b"v9"]


def test_control_batches_are_kept(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(LogConfig(segment_bytes=400, cleanup_policy=COMPACT))
    log.append_as_leader(keyed([(b"k", b"1")], timestamp=clock.now_ms), leader_epoch=0)
    marker = build_end_txn_marker(ControlType.COMMIT, producer_id=7, producer_epoch=1,
                                  coordinator_epoch=3, timestamp=clock.now_ms)
    log.append_as_leader(marker, leader_epoch=0)
    log.append_as_leader(keyed([(b"k", b"2")], timestamp=clock.now_ms), leader_epoch=0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    LogCleaner().clean(log, clock.now_ms)
    batches = list(iter_record_batches(log.read(0, 1 << 20)))
    assert [(b.header.base_offset, b.header.is_control) for b in batches] == [(1, True), (2, False)]


def test_dirty_ratio_drives_needs_cleaning(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(LogConfig(segment_bytes=300, cleanup_policy=COMPACT,
                             min_cleanable_dirty_ratio=0.5))
    for i in range(12):
        log.append_as_leader(keyed([(b"k%d" % (i % 3), b"v" * 50)], timestamp=clock.now_ms),
                             leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    assert dirty_ratio(log, clock.now_ms) == 1.0
    assert needs_cleaning(log, clock.now_ms)
    LogCleaner().clean(log, clock.now_ms)
    assert dirty_ratio(log, clock.now_ms) == 0.0
    assert not needs_cleaning(log, clock.now_ms)
    delete_log = open_log(LogConfig(), name="plain")
    assert not needs_cleaning(delete_log, clock.now_ms)


def test_cleaned_log_survives_reopen(open_log: OpenLog, clock: FakeClock) -> None:
    config = LogConfig(segment_bytes=500, cleanup_policy=COMPACT)
    log = open_log(config)
    for i in range(30):
        log.append_as_leader(keyed([(b"k%d" % (i % 4), b"v%d" % i)], timestamp=clock.now_ms),
                             leader_epoch=0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    LogCleaner().clean(log, clock.now_ms)
    expected = read_all(log)
    log.close()
    files = sorted(p.name for p in log.directory.iterdir())
    assert not [f for f in files if f.endswith((".cleaned", ".swap"))]
    reopened = PartitionLog.open(log.directory, config, clock=clock)
    assert read_all(reopened) == expected
    assert reopened.log_end_offset == 30
    reopened.close()
