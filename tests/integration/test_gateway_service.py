"""The whole data path through the gateway, with every process real: etcd, a
controller, two storage nodes and a gateway. Produce and fetch many partitions in
one call, metadata, offsets, configs, typed errors, and a gateway killed and
restarted losing nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from strand.errors import ErrorCode
from strand.launcher import EtcdServer, ServiceProcess
from strand.records import BatchBuilder, Compression, iter_record_batches
from strand.v1 import common_pb2 as pb
from strand.v1 import gateway_pb2_grpc
from tests.support.waiting import wait_until

CLUSTER = "gw"


@dataclass
class Cluster:
    etcd: EtcdServer
    controller: ServiceProcess
    storage: list[ServiceProcess]
    gateway: ServiceProcess
    tmp: Path

    def stub(self) -> gateway_pb2_grpc.GatewayStub:
        return gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(self.gateway.address))

    def new_gateway(self) -> ServiceProcess:
        return ServiceProcess("gateway", ["--etcd", self.etcd.endpoint, "--cluster", CLUSTER],
                              self.tmp / "gateway-2.log").start()


@pytest.fixture
def cluster(etcd: EtcdServer, tmp_path: Path) -> Iterator[Cluster]:
    common = ["--etcd", etcd.endpoint, "--cluster", CLUSTER]
    controller = ServiceProcess("controller", [*common, "--lease-ttl", "2"],
                                tmp_path / "controller.log").start()
    storage = [
        ServiceProcess("storage", [*common, "--node-id", str(i), "--rack", rack,
                                   "--data-dir", str(tmp_path / f"data-{i}"), "--lease-ttl", "3"],
                       tmp_path / f"storage-{i}.log").start()
        for i, rack in ((1, "a"), (2, "b"))
    ]
    gateway = ServiceProcess("gateway", common, tmp_path / "gateway.log").start()
    result = Cluster(etcd, controller, storage, gateway, tmp_path)
    stub = result.stub()
    wait_until(lambda: len(stub.Metadata(pb.MetadataRequest(), timeout=5).brokers) == 2, 20,
               "both storage nodes to register")
    yield result
    # result.gateway may be a replacement started by the test: stop it too
    for proc in (result.gateway, gateway, *storage, controller):
        proc.stop()


def create_topic(stub: gateway_pb2_grpc.GatewayStub, name: str, partitions: int) -> None:
    response = stub.CreateTopics(pb.CreateTopicsRequest(topics=[pb.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1)]), timeout=30)
    assert response.topics[0].error_code == ErrorCode.NONE, response.topics[0].error_message

    def served() -> bool:  # every partition's leader answers list-offsets
        offsets = stub.ListOffsets(pb.ListOffsetsRequest(topics=[pb.TopicListOffsets(
            topic=name, partitions=[pb.PartitionListOffsets(partition=p, timestamp=-1)
                                    for p in range(partitions)])]), timeout=5)
        return all(p.error_code == ErrorCode.NONE for p in offsets.topics[0].partitions)

    wait_until(served, 20, f"{name} to be served")


def batch(partition: int, n: int, codec: Compression) -> bytes:
    builder = BatchBuilder(compression=codec)
    for i in range(n):
        builder.append(f"p{partition}-v{i}".encode(), key=f"k{i}".encode(),
                       headers=[("h", str(partition).encode())])
    return builder.build()


def produce(stub: gateway_pb2_grpc.GatewayStub, topic: str, partitions: int, n: int,
            codec: Compression = Compression.NONE, acks: int = 1) -> pb.ProduceResponse:
    response: pb.ProduceResponse = stub.Produce(pb.ProduceRequest(
        acks=acks, timeout_ms=5000, topics=[pb.TopicProduceData(topic=topic, partitions=[
            pb.PartitionProduceData(partition=p, records=batch(p, n, codec))
            for p in range(partitions)])]), timeout=30)
    return response


def fetch_all(stub: gateway_pb2_grpc.GatewayStub, topic: str,
              partitions: int) -> dict[int, list[tuple[int, bytes | None]]]:
    out: dict[int, list[tuple[int, bytes | None]]] = {p: [] for p in range(partitions)}
    offsets = dict.fromkeys(range(partitions), 0)
    for _ in range(50):
        response = stub.Fetch(pb.FetchRequest(max_wait_ms=100, min_bytes=1, max_bytes=1 << 20,
                                              topics=[pb.TopicFetchData(topic=topic, partitions=[
                                                  pb.PartitionFetchData(
                                                      partition=p, fetch_offset=offsets[p],
                                                      partition_max_bytes=1 << 20,
                                                      current_leader_epoch=-1)
                                                  for p in range(partitions)])]), timeout=30)
        progressed = False
        for part in response.topics[0].partitions:
            assert part.error_code == ErrorCode.NONE, part.error_message
            for b in iter_record_batches(part.records):
                for record in b.records():
                    if record.offset >= offsets[part.partition]:
                        out[part.partition].append((record.offset, record.value))
                offsets[part.partition] = b.header.next_offset
                progressed = True
        if not progressed and all(offsets[p] > 0 for p in offsets):
            break
    return out


def test_round_trip_through_the_gateway(cluster: Cluster) -> None:
    stub = cluster.stub()
    create_topic(stub, "events", 4)
    metadata = stub.Metadata(pb.MetadataRequest(topics=["events"]), timeout=5)
    leaders = {p.leader for p in metadata.topics[0].partitions}
    assert leaders == {1, 2}  # one call per leader node, both nodes involved
    for codec in Compression:
        response = produce(stub, "events", 4, 5, codec)
        for part in response.topics[0].partitions:
            assert part.error_code == ErrorCode.NONE, part.error_message
    got = fetch_all(stub, "events", 4)
    for p in range(4):
        assert [o for o, _ in got[p]] == list(range(25))
        assert [v for _, v in got[p]] == [f"p{p}-v{i}".encode() for i in range(5)] * 5
    latest = stub.ListOffsets(pb.ListOffsetsRequest(topics=[pb.TopicListOffsets(
        topic="events", partitions=[pb.PartitionListOffsets(partition=p, timestamp=-1)
                                    for p in range(4)])]), timeout=5)
    assert [p.offset for p in latest.topics[0].partitions] == [25] * 4
    configs = stub.DescribeConfigs(pb.DescribeConfigsRequest(topics=["events"]), timeout=5)
    entries = {c.key: c for c in configs.topics[0].configs}
    assert entries["cleanup.policy"].value == "delete" and entries["cleanup.policy"].is_default


def test_bad_requests_are_refused_with_typed_errors(cluster: Cluster) -> None:
    stub = cluster.stub()
    create_topic(stub, "strict", 1)
    bad_acks = produce(stub, "strict", 1, 1, acks=2).topics[0].partitions[0]
    assert bad_acks.error_code == ErrorCode.INVALID_REQUIRED_ACKS
    unknown = produce(stub, "nope", 1, 1).topics[0].partitions[0]
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    corrupt = bytearray(batch(0, 3, Compression.NONE))
    corrupt[-1] ^= 0xFF
    response = stub.Produce(pb.ProduceRequest(acks=1, timeout_ms=5000, topics=[
        pb.TopicProduceData(topic="strict", partitions=[
            pb.PartitionProduceData(partition=0, records=bytes(corrupt)),
            pb.PartitionProduceData(partition=7, records=bytes(corrupt))])]), timeout=30)
    codes = [p.error_code for p in response.topics[0].partitions]
    assert codes == [ErrorCode.CORRUPT_MESSAGE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    out_of_range = stub.Fetch(pb.FetchRequest(max_wait_ms=0, max_bytes=1024, topics=[
        pb.TopicFetchData(topic="strict", partitions=[pb.PartitionFetchData(
            partition=0, fetch_offset=99, partition_max_bytes=1024,
            current_leader_epoch=-1)])]), timeout=10)
    assert out_of_range.topics[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    latest = stub.ListOffsets(pb.ListOffsetsRequest(topics=[pb.TopicListOffsets(
        topic="strict", partitions=[pb.PartitionListOffsets(partition=0, timestamp=-1)])]),
        timeout=5)
    assert latest.topics[0].partitions[0].offset == 0  # nothing was written
    bad_topic = stub.CreateTopics(pb.CreateTopicsRequest(topics=[pb.CreatableTopic(
        name="no way", num_partitions=1, replication_factor=1)]), timeout=30).topics[0]
    assert bad_topic.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_gateway_killed_and_restarted_loses_nothing(cluster: Cluster) -> None:
    stub = cluster.stub()
    create_topic(stub, "durable", 2)
    for part in produce(stub, "durable", 2, 10).topics[0].partitions:
        assert part.error_code == ErrorCode.NONE
    cluster.gateway.kill()
    replacement = cluster.new_gateway()
    cluster.gateway = replacement
    stub = cluster.stub()
    for part in produce(stub, "durable", 2, 10).topics[0].partitions:
        assert part.error_code == ErrorCode.NONE, part.error_message
    got = fetch_all(stub, "durable", 2)
    assert {p: [o for o, _ in got[p]] for p in got} == {0: list(range(20)), 1: list(range(20))}


def test_several_gateways_serve_at_once(cluster: Cluster) -> None:
    stub = cluster.stub()
    create_topic(stub, "shared", 2)
    other = cluster.new_gateway()
    try:
        other_stub = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(other.address))

        async def both() -> None:
            await asyncio.gather(asyncio.to_thread(produce, stub, "shared", 2, 5),
                                 asyncio.to_thread(produce, other_stub, "shared", 2, 5))

        asyncio.run(both())
        got = fetch_all(other_stub, "shared", 2)
        assert all(len(got[p]) == 10 for p in range(2))
    finally:
        other.stop()


def test_gateway_serves_prometheus_metrics(cluster: Cluster) -> None:
    import urllib.request

    from strand.launcher import free_port

    port = free_port()
    gateway = ServiceProcess("gateway", ["--etcd", cluster.etcd.endpoint, "--cluster", CLUSTER,
                                         "--metrics-port", str(port)],
                             cluster.tmp / "gateway-metrics.log").start()
    try:
        stub = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(gateway.address))
        for _ in range(3):
            stub.Metadata(pb.MetadataRequest(), timeout=5)
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
        lines = [line for line in text.decode().splitlines()
                 if line.startswith("strand_requests_total")
                 and 'request="Metadata"' in line]
        assert lines and float(lines[0].rsplit(" ", 1)[1]) >= 3, text.decode()[-2000:]
    finally:
        gateway.stop()
