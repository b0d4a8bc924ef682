"""Transactional offsets end to end (issue 12 point 5) in a real cluster (two
storage nodes, a group and a transaction coordinator), driven by raw gRPC through
the gateway as a transactional producer calls it: InitProducerId, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn. Offsets committed in a transaction become the group's on
COMMIT and never appear on ABORT; while pending, a stable fetch
(read_committed) gets UNSTABLE_OFFSET_COMMIT and a plain one the old offset; a
TxnOffsetCommit without AddOffsetsToTxn, or late after the abort, is refused and
changes nothing; the group coordinator SIGKILLed with offsets pending: the
transaction coordinator keeps completing until the shard has a new owner, which
rebuilt the pending offsets from the log and commits them."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from strand import Admin, Consumer, NewTopic, TopicPartition
from strand.errors import ErrorCode
from strand.v1 import groups_pb2 as pb_groups
from strand.v1 import transactions_pb2 as pb_txn
from tests.integration.test_transactions_service import Gateway, code
from tests.support.cluster import SdkCluster, start_sdk_cluster
from tests.support.waiting import wait_until

TOPIC = "gtxn-in"
GROUP = "gtxn-app"
TID = "gtxn-pipeline"
TP = (TOPIC, 0)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkCluster]:
    cluster = start_sdk_cluster(tmp_path_factory.mktemp("gtxn"), nodes=2, name="gtxn",
                                coordinators=1, txn_coordinators=1)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 2, 2)])
    yield cluster
    cluster.stop()


class Offsets(Gateway):
    """The gateway's transaction and group calls a transactional producer makes."""

    def add_offsets(self, pid: int, epoch: int, group: str = GROUP) -> Any:
        return self.call("AddOffsetsToTxn", pb_txn.AddOffsetsToTxnRequest(
            transactional_id=TID, producer_id=pid, producer_epoch=epoch, group_id=group))

    def txn_commit(self, pid: int, epoch: int, offset: int, group: str = GROUP) -> Any:
        return self.call("TxnOffsetCommit", pb_groups.TxnOffsetCommitRequest(
            transactional_id=TID, group_id=group, producer_id=pid, producer_epoch=epoch,
            generation_id=-1, partitions=[pb_groups.OffsetCommitPartition(
                topic=TP[0], partition=TP[1], offset=offset)]))

    def commit(self, offset: int) -> Any:
        return self.call("OffsetCommit", pb_groups.OffsetCommitRequest(
            group_id=GROUP, generation_id=-1, partitions=[pb_groups.OffsetCommitPartition(
                topic=TP[0], partition=TP[1], offset=offset)]))

    def fetched(self, stable: bool) -> tuple[ErrorCode, int]:
        """(the partition's error, its offset) as OffsetFetch answers them."""
        answer = self.call("OffsetFetch", pb_groups.OffsetFetchRequest(
            group_id=GROUP, require_stable=stable,
            partitions=[pb_groups.OffsetFetchRequest.Partition(topic=TP[0],
                                                               partition=TP[1])]))
        assert code(answer) == ErrorCode.NONE, answer
        (partition,) = answer.partitions
        return ErrorCode(partition.error_code), partition.offset

    def ended(self, state: str) -> bool:
        return bool(self.describe(TID).transaction_state == state)


@pytest.fixture
def gw(cluster: SdkCluster) -> Iterator[Offsets]:
    gateway = Offsets(cluster.bootstrap)
    yield gateway
    gateway.channel.close()


def open_txn(gw: Offsets, pid: int, epoch: int, offset: int) -> None:
    added = gw.add_offsets(pid, epoch)
    assert code(added) == ErrorCode.NONE, added
    stored = gw.txn_commit(pid, epoch, offset)
    assert code(stored) == ErrorCode.NONE, stored
    assert [ErrorCode(p.error_code) for p in stored.partitions] == [ErrorCode.NONE]


def end(gw: Offsets, pid: int, epoch: int, commit: bool) -> int:
    """EndTxn, waited for until complete; returns the epoch it moved the id to."""
    answer = gw.end(TID, pid, epoch, commit)
    assert code(answer) == ErrorCode.NONE, answer
    state = "CompleteCommit" if commit else "CompleteAbort"
    wait_until(lambda: gw.ended(state), 30, f"the transaction to reach {state}")
    return int(answer.producer_epoch)


def test_commit_abort_unstable_and_refusals(gw: Offsets) -> None:
    assert code(gw.commit(5)) == ErrorCode.NONE
    pid, epoch = gw.init_ok(TID)

    # Without AddOffsetsToTxn: not in the transaction, refused, nothing pending.
    refused = gw.txn_commit(pid, epoch, 7)
    assert code(refused) == ErrorCode.INVALID_TXN_STATE, refused
    assert "not part of the producer's open transaction" in refused.error_message
    assert code(gw.add(TID, pid, epoch, [1], TOPIC)) == ErrorCode.NONE  # Ongoing now
    assert code(gw.txn_commit(pid, epoch, 7)) == ErrorCode.INVALID_TXN_STATE
    assert gw.fetched(stable=True) == (ErrorCode.NONE, 5)
    epoch = end(gw, pid, epoch, commit=False)

    # Pending: a stable fetch waits, a plain one sees the old offset; COMMIT shows it.
    open_txn(gw, pid, epoch, 10)
    assert gw.fetched(stable=True) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
    assert gw.fetched(stable=False) == (ErrorCode.NONE, 5)
    epoch = end(gw, pid, epoch, commit=True)
    assert gw.fetched(stable=True) == (ErrorCode.NONE, 10)

    # ABORT: the offset never shows; a late TxnOffsetCommit of the aborted
    # transaction (its epoch is past) is refused and does not land in anything, nor
    # does one under the next epoch before that transaction adds the offsets.
    open_txn(gw, pid, epoch, 20)
    aborted, epoch = epoch, end(gw, pid, epoch, commit=False)
    assert gw.fetched(stable=True) == (ErrorCode.NONE, 10)
    late = gw.txn_commit(pid, aborted, 20)
    assert code(late) in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH), late
    early = gw.txn_commit(pid, epoch, 20)
    assert code(early) == ErrorCode.INVALID_TXN_STATE, early
    assert gw.fetched(stable=True) == (ErrorCode.NONE, 10)
    assert gw.fetched(stable=False) == (ErrorCode.NONE, 10)

    # A fenced epoch (a newer instance exists) cannot store offsets either.
    new_pid, new_epoch = gw.init_ok(TID)
    assert code(gw.txn_commit(pid, epoch, 30)) in (ErrorCode.PRODUCER_FENCED,
                                                   ErrorCode.INVALID_PRODUCER_EPOCH)
    assert gw.fetched(stable=True) == (ErrorCode.NONE, 10)
    assert (new_pid, new_epoch) == (pid, epoch + 1)


def test_a_read_committed_consumer_waits_for_the_transaction(cluster: SdkCluster,
                                                             gw: Offsets) -> None:
    pid, epoch = gw.init_ok(TID)
    open_txn(gw, pid, epoch, 30)
    tp = TopicPartition(*TP)
    with Consumer(cluster.bootstrap, group_id=GROUP) as plain:
        assert plain.committed(tp) == 10  # read_uncommitted: does not wait
    got: list[int | None] = []
    with Consumer(cluster.bootstrap, group_id=GROUP, isolation_level="read_committed",
                  request_timeout_ms=20_000) as stable:
        asking = threading.Thread(target=lambda: got.append(stable.committed(tp)))
        started = time.monotonic()
        asking.start()
        time.sleep(1.0)
        assert not got  # still retrying on UNSTABLE_OFFSET_COMMIT
        end(gw, pid, epoch, commit=True)
        asking.join(20)
    assert got == [30] and time.monotonic() - started >= 1.0


def test_offsets_pending_across_a_group_coordinator_kill_commit_on_the_new_owner(
        cluster: SdkCluster, gw: Offsets) -> None:
    pid, epoch = gw.init_ok(TID)
    open_txn(gw, pid, epoch, 40)
    cluster.coordinators[0].kill()  # SIGKILL: the pending offsets are only in the log
    assert code(gw.end(TID, pid, epoch, True)) == ErrorCode.NONE
    # No live owner of the group's shard: the transaction cannot complete...
    time.sleep(3.0)
    assert gw.ended("PrepareCommit")
    # ... until a new group coordinator owns it: it rebuilt the pending offsets.
    cluster.coordinators[0] = cluster.group_coordinator(1).start()
    wait_until(lambda: gw.ended("CompleteCommit"), 60,
               "the transaction coordinator to complete the offsets on the new owner")
    assert gw.fetched(stable=True) == (ErrorCode.NONE, 40)
