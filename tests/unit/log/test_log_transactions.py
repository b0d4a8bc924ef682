"""Transactions in the partition log: the last stable offset and the aborted
transaction index (.txnindex): written with ABORT markers on leaders and followers,
rebuilt after an unclean shutdown, truncated and deleted with the log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from strand.log import LogConfig, PartitionLog
from strand.log.checkpoint import CLEAN_SHUTDOWN_FILE, OffsetCheckpoint
from strand.log.files import TXN_INDEX_SUFFIX
from strand.log.producer_state import AppendOrigin
from strand.log.txn_index import AbortedTxn, TransactionIndex
from strand.records import BatchBuilder
from strand.records.control import ControlType, build_end_txn_marker

OpenLog = Callable[..., PartitionLog]
TS = 1_700_000_000_000


def txn_batch(pid: int, seq: int, count: int = 2, *, epoch: int = 0) -> bytes:
    builder = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           transactional=True)
    for i in range(count):
        builder.append(b"t%d-%d" % (pid, seq + i), key=b"k%d" % (seq + i), timestamp=TS)
    return builder.build()


def plain(count: int = 1) -> bytes:
    builder = BatchBuilder()
    for i in range(count):
        builder.append(b"p%d" % i, key=b"p%d" % i, timestamp=TS)
    return builder.build()


def marker(pid: int, commit: bool, *, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return build_end_txn_marker(ControlType.COMMIT if commit else ControlType.ABORT,
                                producer_id=pid, producer_epoch=epoch,
                                coordinator_epoch=coordinator_epoch, timestamp=TS)


def end_txn(log: PartitionLog, pid: int, commit: bool) -> int:
    info = log.append_as_leader(marker(pid, commit), leader_epoch=0,
                                origin=AppendOrigin.COORDINATOR)
    return info.first_offset


def test_lso_stops_at_the_first_open_transaction_of_interleaved_producers(
        open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(plain(2), leader_epoch=0)  # 0-1
    log.append_as_leader(txn_batch(1, 0), leader_epoch=0)  # 2-3
    log.append_as_leader(txn_batch(2, 0), leader_epoch=0)  # 4-5
    log.append_as_leader(txn_batch(1, 2), leader_epoch=0)  # 6-7
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 2
    end_txn(log, 1, commit=True)  # 8: producer 1 decided, but not yet replicated
    assert log.last_stable_offset == 2
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 4  # producer 2's transaction is still open
    end_txn(log, 2, commit=False)  # 9
    log.update_high_watermark(9)  # the marker itself is not below the HW yet
    assert log.last_stable_offset == 4
    log.update_high_watermark(10)
    assert log.last_stable_offset == 10


def test_lso_is_the_high_watermark_without_transactions(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(plain(3), leader_epoch=0)
    assert log.last_stable_offset == 0
    log.update_high_watermark(2)
    assert log.last_stable_offset == 2


def test_an_abort_marker_writes_the_aborted_transaction_to_its_segment_index(
        open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(txn_batch(1, 0), leader_epoch=0)  # 0-1
    log.append_as_leader(txn_batch(2, 0), leader_epoch=0)  # 2-3
    abort_at = end_txn(log, 1, commit=False)  # 4
    commit_at = end_txn(log, 2, commit=True)  # 5
    assert (abort_at, commit_at) == (4, 5)
    # The LSO after the abort is producer 2's open transaction.
    assert log.aborted_transactions(0, 100) == [AbortedTxn(1, 0, 4, 2)]
    assert log.aborted_transactions(5, 100) == []  # the marker is before the range
    assert log.aborted_transactions(0, 0) == []  # the transaction starts after it
    path = log.active_segment.txn_index.path
    assert path.name.endswith(TXN_INDEX_SUFFIX)
    assert TransactionIndex.load(path).entries == (AbortedTxn(1, 0, 4, 2),)


def test_followers_write_the_same_index(open_log: OpenLog) -> None:
    leader = open_log(name="leader-0")
    follower = open_log(name="follower-0")
    leader.append_as_leader(txn_batch(7, 0), leader_epoch=0)
    leader.append_as_leader(plain(), leader_epoch=0)
    end_txn(leader, 7, commit=False)
    follower.append_as_follower(leader.read(0, 1 << 20))
    assert follower.aborted_transactions(0, 100) == [AbortedTxn(7, 0, 3, 4)]


def test_indexes_survive_a_clean_restart_and_are_rebuilt_after_a_crash(
        tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=400)
    log = PartitionLog.open(tmp_path / "t-0", config)
    log.append_as_leader(txn_batch(1, 0), leader_epoch=0)
    for _ in range(6):  # several segments between the data and its marker
        log.append_as_leader(plain(3), leader_epoch=0)
    end_txn(log, 1, commit=False)
    log.append_as_leader(txn_batch(2, 0), leader_epoch=0)
    end_txn(log, 2, commit=False)
    expected = log.aborted_transactions(0, 1 << 40)
    assert [t.producer_id for t in expected] == [1, 2] and len(log.segments) > 2
    log.close()
    reopened = PartitionLog.open(tmp_path / "t-0", config)
    assert reopened.aborted_transactions(0, 1 << 40) == expected
    reopened.close()
    # A crash before anything was flushed: no clean-shutdown marker, recovery from
    # offset 0, and the index files (never fsynced) are gone.
    (tmp_path / "t-0" / CLEAN_SHUTDOWN_FILE).unlink()
    checkpoint = OffsetCheckpoint.load(tmp_path / "t-0")
    checkpoint.recovery_point = 0
    checkpoint.save(tmp_path / "t-0")
    for path in (tmp_path / "t-0").glob(f"*{TXN_INDEX_SUFFIX}"):
        path.unlink()
    crashed = PartitionLog.open(tmp_path / "t-0", config)
    assert crashed.aborted_transactions(0, 1 << 40) == expected
    crashed.close()


def test_truncation_removes_the_entries_of_markers_cut_away(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=300))
    log.append_as_leader(txn_batch(1, 0), leader_epoch=0)
    end_txn(log, 1, commit=False)  # 2
    log.append_as_leader(txn_batch(2, 0), leader_epoch=0)  # 3-4
    log.append_as_leader(plain(4), leader_epoch=0)
    end_txn(log, 2, commit=False)
    assert [t.producer_id for t in log.aborted_transactions(0, 100)] == [1, 2]
    log.truncate_to(5)
    assert log.aborted_transactions(0, 100) == [AbortedTxn(1, 0, 2, 3)]
    # Producer 2's transaction is open again: the LSO stops there.
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 3
    log.truncate_fully_and_start_at(50)
    assert log.aborted_transactions(0, 100) == []
    assert not list(log.directory.glob(f"*{TXN_INDEX_SUFFIX}"))


def test_deleting_segments_deletes_their_indexes(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=300, retention_bytes=1))
    log.append_as_leader(txn_batch(1, 0), leader_epoch=0)
    end_txn(log, 1, commit=False)
    for _ in range(4):
        log.append_as_leader(plain(4), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    first_index = log.segments[0].txn_index.path
    assert first_index.exists()
    log.delete_old_segments()
    assert not first_index.exists()
