"""Producer state in the partition log: retries answered from it, restarts, crashes,
truncation, retention, followers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from strand.errors import InvalidProducerEpochError, InvalidRecordError, OutOfOrderSequenceError
from strand.log import LogConfig, PartitionLog
from strand.log.producer_snapshot import list_snapshots, snapshot_path
from strand.records import BatchBuilder
from strand.records.batch import TimestampType
from tests.support.clock import FakeClock
from tests.unit.log.log_helpers import read_all

OpenLog = Callable[..., PartitionLog]


def produced(pid: int, epoch: int, seq: int, count: int = 2, *, value: bytes = b"v",
             timestamp: int = 1_700_000_000_000) -> bytes:
    builder = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    for i in range(count):
        builder.append(value + b"%d" % (seq + i), timestamp=timestamp)
    return builder.build()


def plain(count: int = 1) -> bytes:
    builder = BatchBuilder()
    for i in range(count):
        builder.append(b"p%d" % i, timestamp=1_700_000_000_000)
    return builder.build()


def fill(log: PartitionLog, rounds: int = 6) -> None:
    """Two producers and plain batches interleaved, `rounds` batches each."""
    for i in range(rounds):
        log.append_as_leader(produced(1, 0, 2 * i), leader_epoch=0)
        log.append_as_leader(plain(), leader_epoch=0)
        log.append_as_leader(produced(2, 3, 3 * i, 3), leader_epoch=0)


def test_a_retried_batch_is_not_written_again_and_gets_its_original_offsets(
        open_log: OpenLog) -> None:
    log = open_log()
    first = log.append_as_leader(produced(1, 0, 0), leader_epoch=0)
    log.append_as_leader(plain(3), leader_epoch=0)
    end = log.log_end_offset
    retry = log.append_as_leader(produced(1, 0, 0), leader_epoch=0)
    assert (retry.first_offset, retry.last_offset, retry.duplicate) == (0, 1, True)
    assert retry.size_bytes == 0 and first.duplicate is False
    assert log.log_end_offset == end and len(read_all(log)) == 5


def test_a_retry_on_a_log_append_time_topic_gets_its_original_time(
        open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(LogConfig(message_timestamp_type=TimestampType.LOG_APPEND_TIME))
    first = log.append_as_leader(produced(1, 0, 0), leader_epoch=0)
    clock.advance(5000)
    retry = log.append_as_leader(produced(1, 0, 0), leader_epoch=0)
    assert retry.log_append_time == first.log_append_time == clock.now_ms - 5000


def test_gaps_old_epochs_and_mixed_retries_are_refused_without_writing(
        open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(produced(1, 2, 0), leader_epoch=0)
    with pytest.raises(OutOfOrderSequenceError, match="producer 1 epoch 2 sent sequence 5"):
        log.append_as_leader(produced(1, 2, 5), leader_epoch=0)
    with pytest.raises(InvalidProducerEpochError, match="producer 1 wrote epoch 1"):
        log.append_as_leader(produced(1, 1, 2), leader_epoch=0)
    with pytest.raises(InvalidRecordError, match="mixes batches"):
        log.append_as_leader(produced(1, 2, 0) + produced(1, 2, 2), leader_epoch=0)
    assert log.log_end_offset == 2
    # Refusals change no state: the next batch in sequence is taken.
    assert log.append_as_leader(produced(1, 2, 2), leader_epoch=0).first_offset == 2


def test_a_retried_request_of_several_batches_gets_its_original_span(
        open_log: OpenLog) -> None:
    log = open_log()
    request = produced(1, 0, 0) + produced(2, 0, 0, 3)
    log.append_as_leader(request, leader_epoch=0)
    retry = log.append_as_leader(request, leader_epoch=0)
    assert (retry.first_offset, retry.last_offset, retry.record_count) == (0, 4, 5)
    assert log.log_end_offset == 5


def test_state_survives_a_clean_restart_from_its_snapshot(
        open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    fill(log)
    state = log.producer_state()
    log.close()
    assert list_snapshots(tmp_path / "topic-0") == [log.log_end_offset]
    reopened = open_log()
    assert reopened.producer_state() == state
    assert reopened.append_as_leader(produced(1, 0, 10), leader_epoch=0).duplicate


def test_state_survives_a_crash_without_snapshot_by_replay(
        open_log: OpenLog, tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(LogConfig(segment_bytes=400))
    fill(log, rounds=10)
    state = log.producer_state()
    log.flush()
    assert len(log.segments) > 2
    # A crash: no clean close, and not even the snapshots of the rolls survive.
    for offset in list_snapshots(tmp_path / "topic-0"):
        snapshot_path(tmp_path / "topic-0", offset).unlink()
    crashed = PartitionLog.open(tmp_path / "topic-0", LogConfig(segment_bytes=400), clock=clock)
    assert crashed.producer_state() == state
    retry = crashed.append_as_leader(produced(2, 3, 27, 3), leader_epoch=0)
    assert retry.duplicate and retry.first_offset == crashed.log_end_offset - 3
    crashed.close()


def test_snapshots_are_taken_at_rolls_and_a_corrupt_one_is_skipped(
        open_log: OpenLog, tmp_path: Path, clock: FakeClock) -> None:
    directory = tmp_path / "topic-0"
    log = open_log(LogConfig(segment_bytes=400))
    fill(log, rounds=10)
    state = log.producer_state()
    bases = [segment.base_offset for segment in log.segments]
    assert list_snapshots(directory) == bases[1:]  # one per roll, at the new segment
    log.flush()
    newest = snapshot_path(directory, list_snapshots(directory)[-1])
    newest.write_bytes(newest.read_bytes()[:-3])  # torn
    reopened = PartitionLog.open(directory, LogConfig(segment_bytes=400), clock=clock)
    assert reopened.producer_state() == state
    assert newest.name not in {p.name for p in directory.iterdir()}
    reopened.close()


def test_follower_state_equals_leader_state(open_log: OpenLog) -> None:
    leader = open_log(name="leader-0")
    follower = open_log(name="follower-0")
    fill(leader)
    follower.append_as_follower(leader.read(0, 1 << 20))
    assert follower.producer_state() == leader.producer_state()
    # The follower, leading next, recognises a retry of what the old leader wrote.
    retry = follower.append_as_leader(produced(2, 3, 15, 3), leader_epoch=1)
    assert retry.duplicate and retry.first_offset == leader.log_end_offset - 3


def test_truncation_rebuilds_the_state_of_the_shorter_log(
        open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(LogConfig(segment_bytes=400))
    fill(log, rounds=4)
    cut = log.log_end_offset
    shorter = log.producer_state()
    fill_more = [produced(1, 0, 8 + 2 * i) for i in range(8)]
    for batch in fill_more:
        log.append_as_leader(batch, leader_epoch=0)
    log.truncate_to(cut)
    assert log.producer_state() == shorter
    assert all(offset <= cut for offset in list_snapshots(tmp_path / "topic-0"))
    # The removed batch is no duplicate any more: written again, at the log end.
    again = log.append_as_leader(fill_more[0], leader_epoch=0)
    assert not again.duplicate and again.first_offset == cut
    log.truncate_fully_and_start_at(100)
    assert log.producer_state() == {} and list_snapshots(tmp_path / "topic-0") == []


def test_retention_removes_older_snapshots_but_keeps_the_state(
        open_log: OpenLog, tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(LogConfig(segment_bytes=400, retention_ms=1000))
    fill(log, rounds=10)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    state = log.producer_state()
    clock.advance(2000)
    assert log.delete_old_segments() > 0
    assert list_snapshots(tmp_path / "topic-0") == [log.log_start_offset]
    assert log.producer_state() == state


def test_idle_producers_expire(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(LogConfig(producer_id_expiration_ms=60_000))
    log.append_as_leader(produced(1, 0, 0, timestamp=clock.now_ms), leader_epoch=0)
    clock.advance(30_000)
    log.append_as_leader(produced(2, 0, 0, timestamp=clock.now_ms), leader_epoch=0)
    clock.advance(30_000)
    assert log.remove_expired_producers() == [1]
    assert set(log.producer_state()) == {2}
    # Forgotten: its retry is written again (Kafka's documented limit of the window).
    assert not log.append_as_leader(produced(1, 0, 0), leader_epoch=0).duplicate
