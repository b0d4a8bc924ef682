"""The gateway's raw Produce and ListOffsets calls on one partition, for tests that
send hand-made batches (no SDK in between)."""

from __future__ import annotations

from strand.v1 import common_pb2 as pb
from strand.v1 import gateway_pb2_grpc


def produce(stub: gateway_pb2_grpc.GatewayStub, topic: str, records: bytes, *,
            partition: int = 0, timeout_ms: int = 10_000,
            transactional_id: str = "") -> pb.PartitionProduceResponse:
    """One acks=all Produce of ``records``; the partition's answer."""
    response = stub.Produce(pb.ProduceRequest(
        acks=-1, timeout_ms=timeout_ms, transactional_id=transactional_id, topics=[
        pb.TopicProduceData(topic=topic, partitions=[
            pb.PartitionProduceData(partition=partition, records=records)])]), timeout=30)
    part: pb.PartitionProduceResponse = response.topics[0].partitions[0]
    return part


def log_end(stub: gateway_pb2_grpc.GatewayStub, topic: str, partition: int = 0) -> int:
    """The partition's log end offset (ListOffsets "latest")."""
    response = stub.ListOffsets(pb.ListOffsetsRequest(topics=[pb.TopicListOffsets(
        topic=topic, partitions=[pb.PartitionListOffsets(partition=partition, timestamp=-1)])]),
        timeout=10)
    offset: int = response.topics[0].partitions[0].offset
    return offset
