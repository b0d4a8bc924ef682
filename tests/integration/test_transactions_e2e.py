"""Transactions end to end (issue 12): the transaction coordinator, the storage
nodes' KIP-890 verification and WriteTxnMarkers, wired together in a real cluster
(3 storage nodes, a group and a transaction coordinator), driven by raw gRPC calls
through the gateway as a transactional producer makes them: InitProducerId,
AddPartitionsToTxn, transactional Produce, EndTxn. Committed transactions become
visible to read_committed consumers, aborted ones never do, a write to a partition
outside the transaction is refused, and a transaction ended just before its
coordinator is SIGKILLed is completed by the new owner."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import grpc

from strand import Admin, Consumer, NewTopic, TopicPartition
from strand.errors import ErrorCode
from strand.v1 import gateway_pb2_grpc
from tests.integration.test_transactions_service import Gateway, code
from tests.integration.test_txn_storage import fetch, txn_batch, visible
from tests.support.cluster import SdkCluster, placement
from tests.support.raw_produce import log_end, produce
from tests.support.waiting import wait_until

TID = "e2e-orders"
PARTITIONS = [("e2e-orders", 0), ("e2e-orders", 1), ("e2e-payments", 0)]
SOLO = ("e2e-solo", 0)  # one replica: its leader's death holds the markers back


def add(gw: Gateway, pid: int, epoch: int, partitions: list[tuple[str, int]]) -> None:
    for topic in sorted({t for t, _ in partitions}):
        answer = gw.add(TID, pid, epoch, [p for t, p in partitions if t == topic], topic)
        assert code(answer) == ErrorCode.NONE, answer


def write(stub: gateway_pb2_grpc.GatewayStub, pid: int, epoch: int, seq: int, label: str,
          partitions: list[tuple[str, int]]) -> None:
    for topic, partition in partitions:
        answer = produce(stub, topic, txn_batch(pid, seq, f"{topic}{partition}{label}",
                                                epoch=epoch),
                         partition=partition, transactional_id=TID)
        assert answer.error_code == 0, (topic, partition, answer.error_message)


def end(gw: Gateway, pid: int, epoch: int, commit: bool) -> int:
    """EndTxn; returns the epoch it moved the id to (the next transaction's)."""
    answer = gw.end(TID, pid, epoch, commit)
    assert code(answer) == ErrorCode.NONE, answer
    assert (answer.producer_id, answer.producer_epoch) == (pid, epoch + 1), answer
    return int(answer.producer_epoch)


def ended(gw: Gateway, state: str) -> Callable[[], bool]:
    return lambda: gw.describe(TID).transaction_state == state


def consume(cluster: SdkCluster, isolation: Literal["read_committed", "read_uncommitted"],
            partitions: list[tuple[str, int]]) -> set[str]:
    """Every record a consumer of that isolation level hands out, up to each
    partition's end."""
    stub = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(cluster.bootstrap))
    ends = {tp: log_end(stub, *tp) for tp in partitions}
    got: set[str] = set()
    with Consumer(cluster.bootstrap, isolation_level=isolation,
                  auto_offset_reset="earliest") as consumer:
        consumer.assign(partitions)

        def done() -> bool:
            for records in consumer.poll(timeout_ms=200).values():
                got.update(r.value.decode() for r in records if r.value is not None)
            return all(consumer.position(TopicPartition(*tp)) >= end
                       for tp, end in ends.items())

        wait_until(done, 30, f"a {isolation} consumer at the end of {partitions}")
    return got


def labels(label: str, partitions: list[tuple[str, int]]) -> set[str]:
    return {f"{t}{p}{label}-{i}" for t, p in partitions for i in (0, 1)}


def test_transactions_commit_abort_verify_and_survive_a_coordinator_kill(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    cluster = sdk_cluster_factory(nodes=3, coordinators=1, txn_coordinators=1)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([
            NewTopic("e2e-orders", 2, 3, config={"min.insync.replicas": "2"}),
            NewTopic("e2e-payments", 1, 3, config={"min.insync.replicas": "2"}),
            NewTopic(SOLO[0], 1, 1)])
    wait_until(lambda: all(len(isr) == 3 for topic in ("e2e-orders", "e2e-payments")
                           for _, isr in placement(cluster, topic).values()),
               30, "all replicas in sync")
    channel = grpc.insecure_channel(cluster.bootstrap)
    stub = gateway_pb2_grpc.GatewayStub(channel)
    gw = Gateway(cluster.bootstrap)
    try:
        pid, epoch = gw.init_ok(TID)

        # 1. Commit: every record visible to read_committed, the LSO back at the HW.
        add(gw, pid, epoch, PARTITIONS)
        write(stub, pid, epoch, 0, "c", PARTITIONS)
        for tp in PARTITIONS:  # open: nothing stable yet
            assert visible(stub, *tp, committed=True) == []
            assert fetch(stub, *tp, committed=True).last_stable_offset == 0
        epoch = end(gw, pid, epoch, True)  # each transaction has an epoch of its own
        wait_until(ended(gw, "CompleteCommit"), 30, "the commit to complete")
        assert consume(cluster, "read_committed", PARTITIONS) == labels("c", PARTITIONS)
        for tp in PARTITIONS:
            answer = fetch(stub, *tp, committed=True)
            assert answer.last_stable_offset == answer.high_watermark == 3, answer

        # 2. Abort: read_committed never sees it, read_uncommitted does.
        add(gw, pid, epoch, PARTITIONS)
        write(stub, pid, epoch, 0, "a", PARTITIONS)  # a new epoch starts at sequence 0
        epoch = end(gw, pid, epoch, False)
        wait_until(ended(gw, "CompleteAbort"), 30, "the abort to complete")
        assert consume(cluster, "read_committed", PARTITIONS) == labels("c", PARTITIONS)
        assert consume(cluster, "read_uncommitted", PARTITIONS) == (
            labels("c", PARTITIONS) | labels("a", PARTITIONS))
        for tp in PARTITIONS:
            answer = fetch(stub, *tp, committed=True)
            assert answer.last_stable_offset == answer.high_watermark == 6, answer

        # 3. KIP-890: a partition not added to the open transaction refuses the write.
        add(gw, pid, epoch, PARTITIONS[:2])
        before = log_end(stub, "e2e-payments")
        refused = produce(stub, "e2e-payments", txn_batch(pid, 0, "stray", epoch=epoch),
                          transactional_id=TID)
        assert ErrorCode(refused.error_code) is ErrorCode.INVALID_TXN_STATE, refused
        assert "not part of the producer's open transaction" in refused.error_message
        assert log_end(stub, "e2e-payments") == before
        epoch = end(gw, pid, epoch, False)
        wait_until(ended(gw, "CompleteAbort"), 30, "the abort to complete")

        # 4. The coordinator SIGKILLed in PrepareCommit: the new owner writes the markers.
        everything = [*PARTITIONS, SOLO]
        add(gw, pid, epoch, everything)
        write(stub, pid, epoch, 0, "k", PARTITIONS)
        write(stub, pid, epoch, 0, "k", [SOLO])
        solo_leader = placement(cluster, SOLO[0])[0][0]
        assert solo_leader is not None
        cluster.storage[solo_leader - 1].kill()
        end(gw, pid, epoch, True)
        assert gw.describe(TID).transaction_state == "PrepareCommit"
        cluster.txn_coordinators[0].kill()
        cluster.txn_coordinators[0] = cluster.txn_coordinator(1).start()
        cluster.wait_coordinators_settled()
        wait_until(lambda: gw.describe(TID).error_code == ErrorCode.NONE, 30,
                   "the new owner to load the shard")
        assert gw.describe(TID).transaction_state == "PrepareCommit"
        cluster.storage[solo_leader - 1].start()
        wait_until(ended(gw, "CompleteCommit"), 60, "the new owner to complete the commit")
        assert consume(cluster, "read_committed", everything) == (
            labels("c", PARTITIONS) | labels("k", everything))
        log = (cluster.spec.log_dir / "txns-1.log").read_text()
        # The new owner retried the markers while the partition had no leader.
        assert "retrying transaction markers" in log and "e2e-solo-0 has no leader" in log
    finally:
        gw.channel.close()
        channel.close()


