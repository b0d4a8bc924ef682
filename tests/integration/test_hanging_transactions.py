"""KIP-664 on a real cluster: a hanging transaction is made for real, found and aborted.

The storage nodes run with KIP-890's partition verification off (as a cluster
before it, or one where it was turned off), so a transactional producer that added
partition A but also wrote to B, then committed, leaves B's transaction open for
ever: the coordinator wrote its COMMIT marker to A only. B's last stable offset
stays at the transaction's first offset and read_committed readers stop there.
``strand transactions find-hanging`` lists it (and not a legitimately open
transaction, which the coordinator knows); ``abort`` ends it with an ABORT marker:
the LSO moves on and read_committed readers see the records after it, never the
aborted ones. Plus the Admin's and CLI's list/describe/describe-producers, and their
typed errors.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import grpc
import pytest
from click.testing import CliRunner, Result

from strand import Admin, NewTopic
from strand.cli.main import cli
from strand.client.structs import TopicPartition
from strand.errors import (
    ErrorCode,
    InvalidRequestError,
    TransactionalIdNotFoundError,
    UnknownTopicOrPartitionError,
)
from strand.records import BatchBuilder
from strand.v1 import gateway_pb2_grpc, storage_pb2, storage_pb2_grpc
from tests.integration.test_transactions_service import Gateway, code
from tests.integration.test_txn_storage import fetch, txn_batch, visible
from tests.support.cluster import SdkCluster, placement, start_sdk_cluster
from tests.support.raw_produce import produce
from tests.support.waiting import wait_until

HUNG = "hang-hung"  # the producer whose write to B escaped its transaction
OPEN = "hang-open"  # a producer with a legitimately open transaction
A, B, C = ("hang-a", 0), ("hang-b", 0), ("hang-b", 1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkCluster]:
    cluster = start_sdk_cluster(
        tmp_path_factory.mktemp("hanging"), nodes=2, name="hanging", txn_coordinators=1,
        storage_args=("--transaction-partition-verification", "off"))
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("hang-a", 1, 2), NewTopic("hang-b", 2, 2)])
    wait_until(lambda: all(len(isr) == 2 for topic in ("hang-a", "hang-b")
                           for _, isr in placement(cluster, topic).values()),
               30, "all replicas in sync")
    yield cluster
    cluster.stop()


def strand(cluster: SdkCluster, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--bootstrap", cluster.bootstrap, "transactions", *args])


def plain_batch(label: str) -> bytes:
    builder = BatchBuilder()
    builder.append(label.encode())
    return builder.build()


def hanging_json(cluster: SdkCluster) -> list[dict[str, object]]:
    result = strand(cluster, "find-hanging", "--max-transaction-timeout", "0.001", "--json")
    assert result.exit_code == 0, result.output
    found: list[dict[str, object]] = json.loads(result.stdout)
    return found


def test_a_hanging_transaction_is_found_and_aborted(cluster: SdkCluster) -> None:
    gw = Gateway(cluster.bootstrap)
    stub = gateway_pb2_grpc.GatewayStub(gw.channel)
    # The hanging one: A is added, A and B are written, the commit reaches A only.
    pid, epoch = gw.init_ok(HUNG)
    assert code(gw.add(HUNG, pid, epoch, [0], "hang-a")) == ErrorCode.NONE
    for topic, partition in (A, B):
        answer = produce(stub, topic, txn_batch(pid, 0, f"hung-{topic}", epoch=epoch),
                         partition=partition, transactional_id=HUNG)
        assert answer.error_code == 0, answer.error_message
    assert code(gw.end(HUNG, pid, epoch, True)) == ErrorCode.NONE
    wait_until(lambda: gw.describe(HUNG).transaction_state == "CompleteCommit", 30,
               "the commit to complete")
    # Records after it on B: read_committed readers cannot reach them.
    assert produce(stub, "hang-b", plain_batch("after-1")).error_code == 0
    assert produce(stub, "hang-b", plain_batch("after-2")).error_code == 0
    assert fetch(stub, *B, committed=True).last_stable_offset == 0
    assert visible(stub, *B, committed=True) == []
    assert visible(stub, *A, committed=True) == ["hung-hang-a-0", "hung-hang-a-1"]
    # A legitimately open transaction on C: open, but the coordinator knows it.
    open_pid, open_epoch = gw.init_ok(OPEN)
    assert code(gw.add(OPEN, open_pid, open_epoch, [1], "hang-b")) == ErrorCode.NONE
    assert produce(stub, "hang-b", txn_batch(open_pid, 0, "open", epoch=open_epoch),
                   partition=1, transactional_id=OPEN).error_code == 0

    # The producers' view (Admin and CLI).
    with Admin(cluster.bootstrap) as admin:
        producers = admin.describe_producers([B, C])
    (hung,) = producers[TopicPartition(*B)]
    assert (hung.producer_id, hung.producer_epoch, hung.last_sequence,
            hung.current_txn_start_offset, hung.coordinator_epoch) == (pid, epoch, 1, 0, None)
    assert abs(hung.last_timestamp - time.time() * 1000) < 60_000
    (still_open,) = producers[TopicPartition(*C)]
    assert still_open.producer_id == open_pid and still_open.current_txn_start_offset == 0
    shown = strand(cluster, "describe-producers", "--topic", "hang-b", "--partition", "0")
    assert shown.exit_code == 0, shown.output
    assert "CurrentTransactionStartOffset" in shown.stdout and str(pid) in shown.stdout

    # find-hanging: B's transaction only (A was committed, C is known to the coordinator).
    time.sleep(0.1)  # idle longer than the 0.001 min (60 ms) timeout given below
    found = hanging_json(cluster)
    assert [(h["topic"], h["partition"], h["producer_id"], h["current_transaction_start_offset"])
            for h in found] == [("hang-b", 0, pid, 0)], found
    table = strand(cluster, "find-hanging", "--max-transaction-timeout", "0.001")
    assert table.exit_code == 0 and "hang-b" in table.stdout and "1 hanging" in table.stderr
    # Scoped by broker: each node holds a replica of B (RF 2), a node without one: none.
    assert strand(cluster, "find-hanging", "--broker-id", "1", "--max-transaction-timeout",
                  "0.001").stdout.count("hang-b") == 1
    assert "hang-b" not in strand(cluster, "find-hanging", "--broker-id", "9",
                                  "--max-transaction-timeout", "0.001").stdout
    # The default 15 minutes: nothing this young is a candidate.
    assert json.loads(strand(cluster, "find-hanging", "--json").stdout) == []

    # abort by start offset: the LSO moves to the HW, readers see what came after.
    wrong = strand(cluster, "abort", "--topic", "hang-b", "--partition", "0",
                   "--start-offset", "1")
    assert wrong.exit_code == 1 and "no open transaction starts at offset 1" in wrong.output
    aborted = strand(cluster, "abort", "--topic", "hang-b", "--partition", "0",
                     "--start-offset", "0")
    assert aborted.exit_code == 0, aborted.output
    after = fetch(stub, *B, committed=True)
    assert after.last_stable_offset == after.high_watermark == 5, after
    assert visible(stub, *B, committed=True) == ["after-1", "after-2"]
    assert [(t.producer_id, t.first_offset) for t in after.aborted_transactions] == [(pid, 0)]
    assert hanging_json(cluster) == []
    # C's transaction is untouched and ends normally.
    assert fetch(stub, *C, committed=True).last_stable_offset == 0
    assert code(gw.end(OPEN, open_pid, open_epoch, True)) == ErrorCode.NONE
    wait_until(lambda: fetch(stub, *C, committed=True).last_stable_offset == 3, 30,
               "the open transaction to commit")
    gw.channel.close()


def test_list_and_describe_through_admin_and_cli(cluster: SdkCluster) -> None:
    gw = Gateway(cluster.bootstrap)
    pid, epoch = gw.init_ok("hang-listed")
    assert code(gw.add("hang-listed", pid, epoch, [0, 1], "hang-b")) == ErrorCode.NONE
    with Admin(cluster.bootstrap) as admin:
        ongoing = admin.list_transactions(states=["Ongoing"], producer_ids=[pid])
        assert [(t.transactional_id, t.producer_id, t.state) for t in ongoing] == [
            ("hang-listed", pid, "Ongoing")]
        assert "hang-listed" in {t.transactional_id for t in admin.list_transactions()}
        (described,) = admin.describe_transactions(["hang-listed"])
        assert described.state == "Ongoing" and described.producer_epoch == epoch
        assert set(described.partitions) == {TopicPartition("hang-b", 0),
                                             TopicPartition("hang-b", 1)}
        assert described.start_time_ms is not None and described.timeout_ms == 60_000
        with pytest.raises(InvalidRequestError, match="Bogus"):
            admin.list_transactions(states=["Bogus"])
        with pytest.raises(TransactionalIdNotFoundError, match="never-seen"):
            admin.describe_transactions(["never-seen"])
    listed = strand(cluster, "list", "--state", "Ongoing", "--json")
    assert listed.exit_code == 0, listed.output
    assert {"transactional_id": "hang-listed", "producer_id": pid,
            "state": "Ongoing"} in json.loads(listed.stdout)
    shown = strand(cluster, "describe", "hang-listed")
    assert shown.exit_code == 0 and "hang-b-0,hang-b-1" in shown.stdout, shown.output
    missing = strand(cluster, "describe", "never-seen")
    assert missing.exit_code == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.output
    assert code(gw.end("hang-listed", pid, epoch, False)) == ErrorCode.NONE
    gw.channel.close()


def test_abort_and_describe_errors(cluster: SdkCluster) -> None:
    with Admin(cluster.bootstrap) as admin:
        with pytest.raises(UnknownTopicOrPartitionError, match="hang-b-7"):
            admin.describe_producers([("hang-b", 7)])
        with pytest.raises(UnknownTopicOrPartitionError, match="nowhere-0"):
            admin.abort_transaction("nowhere", 0, 1, 0, 0)
        with pytest.raises(ValueError, match="producer_epoch"):
            admin.abort_transaction("hang-b", 0, 1, -1, 0)
    unknown = strand(cluster, "abort", "--topic", "nowhere", "--partition", "0",
                     "--producer-id", "5", "--producer-epoch", "0", "--coordinator-epoch", "-1")
    assert unknown.exit_code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in unknown.output
    both = strand(cluster, "abort", "--topic", "hang-b", "--partition", "0",
                  "--start-offset", "0", "--producer-id", "5")
    assert both.exit_code == 2 and "not both" in both.output
    # A commit never goes through the gateway: only the coordinator decides one.
    stub = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(cluster.bootstrap))
    refused = stub.WriteTxnMarkers(storage_pb2.WriteTxnMarkersRequest(markers=[
        storage_pb2.WritableTxnMarker(producer_id=5, producer_epoch=0, committed=True,
                                      topics=[storage_pb2.WritableTxnMarkerTopic(
                                          topic="hang-b", partitions=[0])])]), timeout=30)
    (result,) = refused.markers[0].topics[0].partitions
    assert ErrorCode(result.error_code) is ErrorCode.INVALID_REQUEST, result
    # On a storage node that is not the leader: NOT_LEADER_OR_FOLLOWER.
    leader, isr = placement(cluster, "hang-b")[0]
    (follower,) = [node for node in isr if node != leader]
    node = storage_pb2_grpc.StorageStub(
        grpc.insecure_channel(cluster.storage[follower - 1].address))
    topics = [storage_pb2.WritableTxnMarkerTopic(topic="hang-b", partitions=[0])]
    described = node.DescribeProducers(storage_pb2.DescribeProducersRequest(topics=topics),
                                       timeout=30)
    assert ErrorCode(described.partitions[0].error_code) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    unknown_here = node.DescribeProducers(storage_pb2.DescribeProducersRequest(
        topics=[storage_pb2.WritableTxnMarkerTopic(topic="nowhere", partitions=[0])]),
        timeout=30)
    assert ErrorCode(unknown_here.partitions[0].error_code) \
        is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    marked = node.WriteTxnMarkers(storage_pb2.WriteTxnMarkersRequest(markers=[
        storage_pb2.WritableTxnMarker(producer_id=5, producer_epoch=0, topics=topics)]),
        timeout=30)
    assert ErrorCode(marked.markers[0].topics[0].partitions[0].error_code) \
        is ErrorCode.NOT_LEADER_OR_FOLLOWER
