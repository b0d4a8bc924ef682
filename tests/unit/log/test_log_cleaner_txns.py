"""Compaction and transactions (Kafka's rules): aborted records go and never shadow a
committed value, markers stay while their transaction has data and then until
delete.retention.ms, each producer's last batch stays (producer state survives), the
cleaner stops at the last stable offset, the aborted index follows the markers."""

from __future__ import annotations

from collections.abc import Callable

from strand.log import LogConfig, PartitionLog
from strand.log.checkpoint import CLEAN_SHUTDOWN_FILE
from strand.log.cleaner import LogCleaner
from strand.log.producer_state import AppendOrigin
from strand.records import BatchBuilder, RecordBatch, iter_record_batches
from strand.records.control import ControlType, build_end_txn_marker
from tests.support.clock import FakeClock

OpenLog = Callable[..., PartitionLog]
COMPACT = ("compact",)
HOUR = 3_600_000


class Producers:
    def __init__(self, log: PartitionLog, clock: FakeClock) -> None:
        self.log = log
        self.clock = clock
        self.sequences: dict[int, int] = {}

    def write(self, pid: int, pairs: list[tuple[bytes, bytes]], *,
              transactional: bool = True) -> None:
        seq = self.sequences.get(pid, 0)
        builder = BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq,
                               transactional=transactional)
        for key, value in pairs:
            builder.append(value, key=key, timestamp=self.clock.now_ms)
        self.log.append_as_leader(builder.build(), leader_epoch=0)
        self.sequences[pid] = seq + len(pairs)

    def end(self, pid: int, commit: bool) -> None:
        self.log.append_as_leader(build_end_txn_marker(
            ControlType.COMMIT if commit else ControlType.ABORT, producer_id=pid,
            producer_epoch=0, coordinator_epoch=0, timestamp=self.clock.now_ms),
            leader_epoch=0, origin=AppendOrigin.COORDINATOR)


def compact_log(open_log: OpenLog) -> PartitionLog:
    return open_log(LogConfig(segment_bytes=100_000, cleanup_policy=COMPACT,
                              delete_retention_ms=HOUR))


def seal(log: PartitionLog) -> None:
    log.roll()
    log.update_high_watermark(log.log_end_offset)


def batches(log: PartitionLog) -> list[RecordBatch]:
    found: list[RecordBatch] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        found += iter_record_batches(log.read(offset, 1 << 20))
        offset = found[-1].header.next_offset
    return found


def data(log: PartitionLog) -> list[tuple[bytes | None, bytes | None]]:
    return [(r.key, r.value) for b in batches(log) if not b.header.is_control
            for r in b.records()]


def markers(log: PartitionLog) -> list[tuple[int, int]]:
    return [(b.header.base_offset, b.header.producer_id)
            for b in batches(log) if b.header.is_control]


def test_aborted_records_go_and_do_not_shadow_committed_values(
        open_log: OpenLog, clock: FakeClock) -> None:
    log = compact_log(open_log)
    p = Producers(log, clock)
    p.write(1, [(b"a", b"committed")])
    p.end(1, commit=True)
    p.write(2, [(b"a", b"aborted"), (b"b", b"aborted")])  # the newest value of a
    p.end(2, commit=False)
    p.write(3, [(b"c", b"plain")], transactional=False)
    seal(log)
    result = LogCleaner().clean(log, clock.now_ms)
    assert result is not None and result.records_removed == 2
    assert data(log) == [
        (b"a", b"committed"), (b"c", b"plain")]
    # Both markers stay (delete.retention.ms has not passed) and with them the index.
    assert markers(log) == [(1, 1), (4, 2)]
    assert [t.producer_id for t in log.aborted_transactions(0, 100)] == [2]


def test_markers_go_after_delete_retention_once_their_data_is_gone(
        open_log: OpenLog, clock: FakeClock) -> None:
    log = compact_log(open_log)
    p = Producers(log, clock)
    p.write(1, [(b"a", b"v1")])
    p.end(1, commit=True)  # 1
    p.write(2, [(b"b", b"x")])
    p.end(2, commit=False)  # 3
    p.write(1, [(b"a", b"v2")])  # 4: supersedes producer 1's first transaction
    p.end(1, commit=True)  # 5: producer 1's last batch
    p.write(2, [(b"z", b"plain")], transactional=False)  # 6: producer 2's last batch
    seal(log)
    LogCleaner().clean(log, clock.now_ms)
    assert markers(log) == [(1, 1), (3, 2), (5, 1)]  # too young to go
    clock.advance(HOUR + 1)
    result = LogCleaner().clean(log, clock.now_ms)
    assert result is not None and result.markers_removed == 2
    # Marker 1 ended a transaction with no data left, marker 3 an aborted one; marker
    # 5 still has its data (a=v2).
    assert markers(log) == [(5, 1)]
    assert log.aborted_transactions(0, 100) == []
    assert data(log) == [(b"a", b"v2"), (b"z", b"plain")]


def test_each_producers_last_batch_stays_so_its_state_survives(
        open_log: OpenLog, clock: FakeClock) -> None:
    log = compact_log(open_log)
    p = Producers(log, clock)
    p.write(1, [(b"k", b"1"), (b"j", b"1")], transactional=False)  # seq 0-1
    p.write(2, [(b"k", b"2"), (b"j", b"2")], transactional=False)  # supersedes producer 1
    seal(log)
    before = log.producer_state()
    LogCleaner().clean(log, clock.now_ms)
    assert data(log) == [(b"k", b"2"), (b"j", b"2")]
    # Producer 1's batch is kept without records: its epoch and sequence are rebuilt.
    directory = log.directory
    log.close()
    (directory / CLEAN_SHUTDOWN_FILE).unlink()
    for snapshot in directory.glob("*.snapshot"):
        snapshot.unlink()
    reopened = PartitionLog.open(directory, log.config, clock=clock)
    after = reopened.producer_state()
    assert {pid: (e.producer_epoch, e.last_seq) for pid, e in after.items()} == {
        pid: (e.producer_epoch, e.last_seq) for pid, e in before.items()}
    reopened.close()


def test_the_cleaner_stops_at_the_last_stable_offset(
        open_log: OpenLog, clock: FakeClock) -> None:
    log = compact_log(open_log)
    p = Producers(log, clock)
    p.write(1, [(b"a", b"old")], transactional=False)
    p.write(2, [(b"a", b"open")])  # an open transaction: its fate is unknown
    log.roll()
    p.write(1, [(b"a", b"new")], transactional=False)
    seal(log)
    assert log.last_stable_offset == 1
    assert LogCleaner().clean(log, clock.now_ms) is None  # nothing below the LSO to clean
    assert [value for _, value in data(log)] == [b"old", b"open", b"new"]
