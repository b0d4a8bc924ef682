"""Issue 12, point 4, end to end on a real cluster (no transaction coordinator: raw
transactional Produce requests and the coordinator's WriteTxnMarkers caller):
read_committed readers see a transaction over 3 partitions of 2 topics only once its
COMMIT markers are written, an aborted one's records come with its aborted
transaction (so consumers drop them), read_uncommitted sees everything, and a marker
retried across a leader SIGKILL reaches the new leader."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Literal

import grpc

from strand import Admin, Consumer, NewTopic, TopicPartition
from strand.client.channel import AioChannels
from strand.cluster.cache import MetadataCache
from strand.cluster.etcd import MetadataWatcher, connect
from strand.cluster.keys import KeySpace
from strand.cluster.storage_calls import MarkerError, StorageMarkerWriter
from strand.errors import ErrorCode
from strand.records import BatchBuilder
from strand.records.reader import RecordBatch
from strand.v1 import common_pb2 as pb
from strand.v1 import gateway_pb2_grpc
from tests.support.cluster import SdkCluster, placement
from tests.support.raw_produce import produce
from tests.support.waiting import wait_until

PARTITIONS = [("orders", 0), ("orders", 1), ("payments", 0)]


def txn_batch(pid: int, seq: int, label: str, count: int = 2, epoch: int = 0) -> bytes:
    builder = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           transactional=True)
    for i in range(count):
        builder.append(f"{label}-{i}".encode())
    return builder.build()


def fetch(stub: gateway_pb2_grpc.GatewayStub, topic: str, partition: int,
          committed: bool) -> pb.PartitionFetchResponse:
    response = stub.Fetch(pb.FetchRequest(
        max_wait_ms=0, max_bytes=1 << 20,
        isolation_level=pb.READ_COMMITTED if committed else pb.READ_UNCOMMITTED,
        topics=[pb.TopicFetchData(topic=topic, partitions=[pb.PartitionFetchData(
            partition=partition, fetch_offset=0, partition_max_bytes=1 << 20,
            current_leader_epoch=-1)])]),
        timeout=10)
    answer: pb.PartitionFetchResponse = response.topics[0].partitions[0]
    return answer


def visible(stub: gateway_pb2_grpc.GatewayStub, topic: str, partition: int,
            committed: bool) -> list[str]:
    """What a consumer of that isolation level hands to users: data records, without
    those of aborted transactions (Kafka's rule: a producer's records from the first
    offset of an aborted transaction up to its ABORT marker)."""
    answer = fetch(stub, topic, partition, committed)
    assert answer.error_code == 0, answer.error_message
    aborted = {(t.producer_id, t.first_offset) for t in answer.aborted_transactions}
    dropping: set[int] = set()
    out = []
    data = answer.records
    while data:
        batch = RecordBatch(data, validate=False)
        header = batch.header
        size = header.size_in_bytes
        data = data[size:]
        if (header.producer_id, header.base_offset) in aborted:
            dropping.add(header.producer_id)
        if header.is_control:
            dropping.discard(header.producer_id)
            continue
        if header.producer_id in dropping:
            continue
        out += [r.value.decode() for r in batch.records() if r.value is not None]
    return out


async def _write_markers(cluster: SdkCluster, pid: int, commit: bool,
                         partitions: list[tuple[str, int]]
                         ) -> dict[tuple[str, int], MarkerError]:
    etcd = await connect([cluster.etcd.endpoint])
    cache = MetadataCache(KeySpace(cluster.name))
    watcher = MetadataWatcher(etcd, cache)
    await watcher.start()
    channels = AioChannels("test-markers")
    try:
        writer = StorageMarkerWriter(cache, channels.get, timeout_s=60)
        return await writer.write_markers(pid, 0, 0, commit, partitions)
    finally:
        await channels.close()
        await watcher.stop()
        await etcd.close()


def write_markers(cluster: SdkCluster, pid: int, commit: bool,
                  partitions: list[tuple[str, int]]) -> None:
    outcome = asyncio.run(_write_markers(cluster, pid, commit, partitions))
    assert {tp: e.code for tp, e in outcome.items()} == dict.fromkeys(
        partitions, ErrorCode.NONE), outcome


def consume_all(cluster: SdkCluster,
                isolation: Literal["read_committed", "read_uncommitted"]
                ) -> dict[tuple[str, int], list[str]]:
    """Every record a consumer of that isolation level hands out, per partition."""
    got: dict[tuple[str, int], list[str]] = {tp: [] for tp in PARTITIONS}
    with Consumer(cluster.bootstrap, isolation_level=isolation,
                  auto_offset_reset="earliest") as consumer:
        consumer.assign(PARTITIONS)
        # 8 offsets per partition: 6 records and 2 markers; the position passes them all.
        def done() -> bool:
            for tp, records in consumer.poll(timeout_ms=200).items():
                got[(tp.topic, tp.partition)] += [r.value.decode() for r in records
                                                   if r.value is not None]
            return all(consumer.position(TopicPartition(*tp)) == 8 for tp in PARTITIONS)

        wait_until(done, 30, f"a {isolation} consumer at the end of every partition")
    return got


def test_read_committed_sees_committed_transactions_only_after_their_markers(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    # No transaction coordinator here: the leaders take transactional writes unverified.
    cluster = sdk_cluster_factory(
        nodes=3, storage_args=("--transaction-partition-verification", "off"))
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([
            NewTopic("orders", num_partitions=2, replication_factor=3,
                     config={"min.insync.replicas": "2"}),
            NewTopic("payments", num_partitions=1, replication_factor=3,
                     config={"min.insync.replicas": "2"})])
    def in_sync() -> bool:
        return all(len(isr) == 3 for topic in ("orders", "payments")
                   for _, isr in placement(cluster, topic).values())

    wait_until(in_sync, 30, "all replicas in sync")
    stub = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(cluster.bootstrap))

    # Producer 100 commits, producer 200 aborts, interleaved on every partition.
    for topic, partition in PARTITIONS:
        for pid, seq, label in ((100, 0, "c0"), (200, 0, "a0"), (100, 2, "c1")):
            answer = produce(stub, topic, txn_batch(pid, seq, f"{topic}{partition}{label}"),
                             partition=partition)
            assert answer.error_code == 0, answer.error_message
    for topic, partition in PARTITIONS:
        assert visible(stub, topic, partition, committed=True) == []
        assert len(visible(stub, topic, partition, committed=False)) == 6
        assert fetch(stub, topic, partition, committed=True).last_stable_offset == 0

    write_markers(cluster, 100, True, PARTITIONS)
    for topic, partition in PARTITIONS:
        # Producer 200's open transaction (from offset 2) still bounds what is stable.
        answer = fetch(stub, topic, partition, committed=True)
        assert (answer.last_stable_offset, answer.high_watermark) == (2, 7)
        assert visible(stub, topic, partition, committed=True) == [
            f"{topic}{partition}c0-0", f"{topic}{partition}c0-1"]

    write_markers(cluster, 200, False, PARTITIONS)
    for topic, partition in PARTITIONS:
        answer = fetch(stub, topic, partition, committed=True)
        assert answer.last_stable_offset == answer.high_watermark == 8
        assert [(t.producer_id, t.first_offset) for t in answer.aborted_transactions] == [
            (200, 2)]
        prefix = f"{topic}{partition}"
        assert visible(stub, topic, partition, committed=True) == [
            f"{prefix}c0-0", f"{prefix}c0-1", f"{prefix}c1-0", f"{prefix}c1-1"]
        assert len(visible(stub, topic, partition, committed=False)) == 6
        # read_uncommitted gets no aborted list: it shows everything.
        assert not fetch(stub, topic, partition, committed=False).aborted_transactions

    # The SDK consumer: read_committed hands out the committed records only,
    # read_uncommitted every data record; neither hands out a marker.
    expected = {tp: [f"{tp[0]}{tp[1]}{label}-{i}" for label in ("c0", "c1") for i in (0, 1)]
                for tp in PARTITIONS}
    assert consume_all(cluster, "read_committed") == expected
    everything = consume_all(cluster, "read_uncommitted")
    assert {tp: sorted(values) for tp, values in everything.items()} == {
        tp: sorted([*values, f"{tp[0]}{tp[1]}a0-0", f"{tp[0]}{tp[1]}a0-1"])
        for tp, values in expected.items()}

    # A transaction whose partition leader is SIGKILLed before its marker: the
    # coordinator's call retries until the new leader has it.
    answer = produce(stub, "payments", txn_batch(300, 0, "late"))
    assert answer.error_code == 0, answer.error_message
    old_leader = placement(cluster, "payments")[0][0]
    assert old_leader is not None
    cluster.storage[old_leader - 1].kill()
    write_markers(cluster, 300, True, [("payments", 0)])
    assert placement(cluster, "payments")[0][0] != old_leader
    wait_until(lambda: "late-1" in visible(stub, "payments", 0, committed=True), 30,
               "the committed transaction visible on the new leader")
