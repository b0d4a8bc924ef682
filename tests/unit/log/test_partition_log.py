from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from strand.errors import (
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
)
from strand.log import LogConfig, PartitionLog
from strand.records import BatchBuilder, TimestampType, iter_record_batches, read_header
from strand.records.batch import CRC_POS
from tests.support.clock import FakeClock
from tests.unit.log.log_helpers import make_batch, read_all

OpenLog = Callable[..., PartitionLog]


def test_offsets_are_assigned_contiguously_and_stamped(open_log: OpenLog) -> None:
    log = open_log()
    first = log.append_as_leader(make_batch([b"a", b"b", b"c"]), leader_epoch=5)
    second = log.append_as_leader(make_batch([b"d"]), leader_epoch=5)
    assert (first.first_offset, first.last_offset) == (0, 2)
    assert (second.first_offset, second.last_offset) == (3, 3)
    assert log.log_end_offset == 4
    data = log.read(0, 1 << 20)
    headers = [b.header for b in iter_record_batches(data)]
    assert [h.base_offset for h in headers] == [0, 3]
    assert {h.partition_leader_epoch for h in headers} == {5}
    assert [r.value for r in read_all(log)] == [b"a", b"b", b"c", b"d"]


def test_several_batches_in_one_append(open_log: OpenLog) -> None:
    log = open_log()
    info = log.append_as_leader(make_batch([b"a", b"b"]) + make_batch([b"c"]), leader_epoch=0)
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert (info.batch_count, info.record_count) == (2, 3)
    assert [r.offset for r in read_all(log)] == [0, 1, 2]


def test_bad_batches_are_refused_and_nothing_is_written(open_log: OpenLog) -> None:
    log = open_log(LogConfig(max_message_bytes=2000))
    good = make_batch([b"ok"])
    corrupt = bytearray(make_batch([b"x"]))
    corrupt[CRC_POS] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(good + bytes(corrupt), leader_epoch=0)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(good + good[:-3], leader_epoch=0)  # cut-off second batch
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(make_batch([b"x" * 3000]), leader_epoch=0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(b"", leader_epoch=0)
    gappy = BatchBuilder()
    gappy.append(b"a", offset=0)
    gappy.append(b"b", offset=5)  # producers must send offset deltas 0..n-1
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(gappy.build(), leader_epoch=0)
    assert log.log_end_offset == 0
    assert log.size_in_bytes == 0


def test_read_bounds(open_log: OpenLog) -> None:
    log = open_log()
    for i in range(10):
        log.append_as_leader(make_batch([b"v%d" % i] * 3), leader_epoch=0)
    assert log.read(30, 100) == b""  # at the log end: nothing yet
    with pytest.raises(OffsetOutOfRangeError):
        log.read(31, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    # max_bytes smaller than one batch still returns the first batch whole
    one = log.read(4, 10)
    assert [b.header.base_offset for b in iter_record_batches(one)] == [3]
    assert log.read(4, 10, min_one_batch=False) == b""
    # the high watermark hides later batches
    log.update_high_watermark(9)
    visible = log.read(0, 1 << 20, max_offset=log.high_watermark)
    assert [b.header.base_offset for b in iter_record_batches(visible)] == [0, 3, 6]
    assert log.read(9, 1 << 20, max_offset=log.high_watermark) == b""


def test_roll_by_size_and_reads_across_segments(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=1000))
    for _i in range(40):
        log.append_as_leader(make_batch([b"x" * 100, b"y" * 100]), leader_epoch=0)
    assert len(log.segments) > 5
    assert all(s.size <= 1000 for s in log.segments)
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and bases[0] == 0
    assert [r.offset for r in read_all(log, max_bytes=300)] == list(range(80))


def test_roll_by_time(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(LogConfig(segment_ms=60_000))
    log.append_as_leader(make_batch([b"a"], timestamp=clock.now_ms), leader_epoch=0)
    clock.advance(30_000)
    log.append_as_leader(make_batch([b"b"], timestamp=clock.now_ms), leader_epoch=0)
    assert len(log.segments) == 1
    clock.advance(31_000)
    log.append_as_leader(make_batch([b"c"], timestamp=clock.now_ms), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_old_producer_timestamps_do_not_roll_every_batch(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_ms=60_000))
    for _ in range(5):
        log.append_as_leader(make_batch([b"a"], timestamp=1_000), leader_epoch=0)
    assert len(log.segments) == 1


def test_reopen_keeps_everything(open_log: OpenLog, tmp_path: object) -> None:
    log = open_log(LogConfig(segment_bytes=2000))
    for i in range(30):
        batch = make_batch([b"r%d" % i] * 4, timestamp=1_000 + i)
        log.append_as_leader(batch, leader_epoch=i // 10)
    log.update_high_watermark(100)
    before = read_all(log)
    segments = len(log.segments)
    log.close()
    again = open_log(LogConfig(segment_bytes=2000))
    assert again.log_end_offset == 120
    assert again.high_watermark == 100
    assert len(again.segments) == segments
    assert read_all(again) == before
    assert [(e.epoch, e.start_offset) for e in again.leader_epochs.entries()] == [
        (0, 0), (1, 40), (2, 80)]
    info = again.append_as_leader(make_batch([b"next"]), leader_epoch=2)
    assert info.first_offset == 120


def test_closed_log_refuses_work(open_log: OpenLog) -> None:
    log = open_log()
    log.close()
    with pytest.raises(StorageError):
        log.append_as_leader(make_batch([b"a"]), leader_epoch=0)


def test_offset_for_timestamp(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=1500, index_interval_bytes=100))
    for i in range(50):
        builder = BatchBuilder()
        builder.append(b"a", timestamp=10_000 + 10 * i)
        builder.append(b"b", timestamp=10_000 + 10 * i + 5)
        log.append_as_leader(builder.build(), leader_epoch=0)
    assert log.offset_for_timestamp(0) == (0, 10_000)
    assert log.offset_for_timestamp(10_005) == (1, 10_005)
    assert log.offset_for_timestamp(10_006) == (2, 10_010)
    assert log.offset_for_timestamp(10_000 + 10 * 49 + 5) == (99, 10_495)
    assert log.offset_for_timestamp(10_000 + 10 * 49 + 6) is None
    assert log.offset_for_timestamp(10_250, max_offset=50) is None
    for target in range(9_990, 10_500, 7):
        expected = next(((r.offset, r.timestamp) for r in read_all(log) if r.timestamp >= target),
                        None)
        assert log.offset_for_timestamp(target) == expected


def test_log_append_time(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(LogConfig(message_timestamp_type=TimestampType.LOG_APPEND_TIME))
    info = log.append_as_leader(make_batch([b"a", b"b"], timestamp=5), leader_epoch=0)
    assert info.log_append_time == clock.now_ms
    batch = next(iter_record_batches(log.read(0, 1 << 20)))  # CRC re-validated here
    assert batch.header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert {r.timestamp for r in batch.records()} == {clock.now_ms}


def test_truncate_to(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=500))
    for i in range(20):
        log.append_as_leader(make_batch([b"v%d" % i] * 2), leader_epoch=i // 5)
    log.update_high_watermark(40)
    assert log.truncate_to(25)  # offset 25 sits in the batch [24, 25]: the batch goes
    assert log.log_end_offset == 24
    assert log.high_watermark == 24
    assert [r.offset for r in read_all(log)] == list(range(24))
    assert log.leader_epochs.latest_epoch == 2
    assert not log.truncate_to(100)
    info = log.append_as_leader(make_batch([b"new"]), leader_epoch=7)
    assert info.first_offset == 24
    log.truncate_to(0)
    assert log.log_end_offset == 0 and read_all(log) == []


def test_truncate_fully_and_start_at(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"a"] * 5), leader_epoch=1)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (1000, 1000, 1000)
    assert log.append_as_leader(make_batch([b"b"]), leader_epoch=2).first_offset == 1000
    assert log.leader_epochs.entries()[0].start_offset == 1000


def test_follower_append_keeps_offsets_and_epochs(open_log: OpenLog) -> None:
    leader = open_log(name="leader")
    for i in range(5):
        leader.append_as_leader(make_batch([b"v"] * 3), leader_epoch=i)
    follower = open_log(name="follower")
    follower.append_as_follower(leader.read(0, 1 << 20))
    assert follower.read(0, 1 << 20) == leader.read(0, 1 << 20)
    assert follower.leader_epochs.entries() == leader.leader_epochs.entries()
    with pytest.raises(InvalidRecordError):
        follower.append_as_follower(leader.read(0, 1 << 20))  # offsets would go backwards


def test_follower_append_with_offset_gap_rebases_empty_segment(open_log: OpenLog) -> None:
    log = open_log()
    builder = BatchBuilder(base_offset=500)
    builder.append(b"x")
    log.append_as_follower(builder.build())
    assert log.segments[0].base_offset == 500
    assert log.log_end_offset == 501
    assert [r.offset for r in read_all(log)] == [500]


def test_compacted_topic_refuses_records_without_keys(open_log: OpenLog) -> None:
    log = open_log(LogConfig(cleanup_policy=("compact",)))
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(make_batch([b"v"], keys=[None]), leader_epoch=0)
    log.append_as_leader(make_batch([b"v"], keys=[b"k"]), leader_epoch=0)
    assert log.log_end_offset == 1


def test_flush_messages_advances_recovery_point(open_log: OpenLog) -> None:
    log = open_log(LogConfig(flush_messages=3))
    log.append_as_leader(make_batch([b"a", b"b"]), leader_epoch=0)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch([b"c"]), leader_epoch=0)
    assert log.recovery_point == 3


def test_flush_ms(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(LogConfig(flush_ms=1000))
    log.append_as_leader(make_batch([b"a"]), leader_epoch=0)
    assert log.recovery_point == 0
    assert not log.flush_if_due()
    clock.advance(1000)
    assert log.flush_if_due()
    assert log.recovery_point == 1


def test_retention_by_time(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(LogConfig(segment_bytes=300, retention_ms=10_000))
    for i in range(10):
        log.append_as_leader(make_batch([b"x" * 100], timestamp=clock.now_ms + i * 1000),
                             leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 0
    clock.advance(15_500)  # records stamped now+0s .. now+5s are older than 10 s
    deleted = log.delete_old_segments()
    assert deleted > 0
    assert log.log_start_offset == log.segments[0].base_offset
    assert all(r.timestamp >= clock.now_ms - 10_000 - 1000 for r in read_all(log))
    clock.advance(100_000)  # everything expired: the active segment is rolled and dropped
    log.delete_old_segments()
    assert log.log_start_offset == log.log_end_offset == 10
    assert log.append_as_leader(make_batch([b"new"]), leader_epoch=0).first_offset == 10


def test_retention_by_bytes_respects_high_watermark(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=300, retention_bytes=600))
    for _ in range(12):
        log.append_as_leader(make_batch([b"x" * 100]), leader_epoch=0)
    assert log.delete_old_segments() == 0  # high watermark 0: nothing is replicated yet
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() > 0
    assert log.size_in_bytes >= 600 - max(s.size for s in log.segments)
    assert log.size_in_bytes - log.segments[0].size < 600


def test_advance_log_start_offset(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=300))
    for _ in range(10):
        log.append_as_leader(make_batch([b"x" * 100]), leader_epoch=0)
    with pytest.raises(OffsetOutOfRangeError):
        log.advance_log_start_offset(5)  # beyond the high watermark
    log.update_high_watermark(10)
    log.advance_log_start_offset(5)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 100)
    log.delete_old_segments()
    assert log.segments[0].base_offset <= 5 < log.segments[0].next_offset
    log.close()
    reopened = PartitionLog.open(log.directory, log.config)
    assert reopened.log_start_offset == 5
    reopened.close()


def test_index_lookups_match_a_linear_scan(open_log: OpenLog) -> None:
    log = open_log(LogConfig(index_interval_bytes=200))
    sizes = [1, 3, 7, 2, 9, 1, 1, 4]
    for i in range(60):
        log.append_as_leader(make_batch([b"z" * 50] * sizes[i % len(sizes)]), leader_epoch=0)
    segment = log.active_segment
    assert len(segment.offset_index) > 10
    scan = [read_header(b.raw) for b in iter_record_batches(log.read(0, 1 << 30))]
    for offset in range(log.log_end_offset):
        found = segment.find_batch(offset)
        assert found is not None
        expected = next(h for h in scan if h.last_offset >= offset)
        assert found[1:] == (expected.base_offset, expected.size_in_bytes)


def test_clean_shutdown_skips_recovery_and_unclean_runs_it(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"a"] * 3), leader_epoch=0)
    log.close()
    assert (log.directory / ".clean-shutdown").exists()
    reopened = PartitionLog.open(log.directory)
    assert not (log.directory / ".clean-shutdown").exists()  # until the next clean close
    reopened.append_as_leader(make_batch([b"b"]), leader_epoch=0)
    segment_file = reopened.active_segment.log_path
    # simulate a crash: no close, garbage appended behind the last batch
    with open(segment_file, "ab") as f:
        f.write(os.urandom(100))
    recovered = PartitionLog.open(log.directory)
    assert recovered.log_end_offset == 4
    assert os.path.getsize(segment_file) == recovered.active_segment.size
    recovered.close()
