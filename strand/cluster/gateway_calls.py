"""The coordinators' raw calls to a gateway: Produce of one hand-built record batch
to one partition with acks=all (their shard writes, strand.coordination.shard_log),
and ListOffsets of partitions' ends (the group coordinator's consumer lag).
The SDK's Producer is not used there because a shard's owner writes under its own
reserved producer id and epoch (strand.coordination.shard_fence), which the SDK
leaves to the transaction coordinator.

The channel is the process's shared one (strand.client.channel.AioChannels, owned
and closed by the service), not one of its own: a coordinator talks to its gateway
over one connection whatever calls it."""

from __future__ import annotations

from collections.abc import Iterable

import grpc

from strand.client.bootstrap import resolve_bootstrap
from strand.client.channel import AioChannels, transport_error
from strand.errors import ErrorCode, StrandError, UnknownServerError, error_for
from strand.v1 import common_pb2, gateway_pb2_grpc

__all__ = ["GatewayProducer", "latest_offsets"]


class GatewayProducer:
    def __init__(self, channels: AioChannels, bootstrap: str) -> None:
        self.address = resolve_bootstrap(bootstrap)  # the first of a list, checked
        self.channels = channels

    async def produce(self, topic: str, partition: int, batch: bytes,
                      timeout_ms: int) -> StrandError | None:
        """Append ``batch`` with acks=all; None when it is written (or was already: a
        retried idempotent batch), else the typed error (retriable or not)."""
        stub = gateway_pb2_grpc.GatewayStub(self.channels.get(self.address))
        try:
            response = await stub.Produce(common_pb2.ProduceRequest(
                acks=-1, timeout_ms=timeout_ms, topics=[common_pb2.TopicProduceData(
                    topic=topic, partitions=[common_pb2.PartitionProduceData(
                        partition=partition, records=batch)])]),
                timeout=timeout_ms / 1000 + 5)
        except grpc.aio.AioRpcError as exc:
            return transport_error(exc, self.address, f"Produce to {topic}-{partition}")
        if not response.topics or not response.topics[0].partitions:
            return UnknownServerError(f"the gateway at {self.address} answered a Produce to "
                                      f"{topic}-{partition} without that partition")
        answer = response.topics[0].partitions[0]
        if answer.error_code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
            return None
        return error_for(answer.error_code, answer.error_message)


async def latest_offsets(channels: AioChannels, address: str,
                         partitions: Iterable[tuple[str, int]], timeout_s: float = 10.0
                         ) -> dict[tuple[str, int], int]:
    """Each partition's high watermark (ListOffsets, latest), those that answered
    with an error left out; raises the typed error when the call fails."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    if not by_topic:
        return {}
    stub = gateway_pb2_grpc.GatewayStub(channels.get(address))
    request = common_pb2.ListOffsetsRequest(topics=[
        common_pb2.TopicListOffsets(topic=topic, partitions=[
            common_pb2.PartitionListOffsets(partition=p, timestamp=-1) for p in numbers])
        for topic, numbers in by_topic.items()])
    try:
        response = await stub.ListOffsets(request, timeout=timeout_s)
    except grpc.aio.AioRpcError as exc:
        raise transport_error(exc, address, "ListOffsets") from None
    return {(t.topic, p.partition): p.offset for t in response.topics for p in t.partitions
            if p.error_code == ErrorCode.NONE}
