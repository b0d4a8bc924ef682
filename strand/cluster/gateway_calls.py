"""The coordinators' raw Produce call to a gateway: one hand-built record batch to
one partition with acks=all (their shard writes, strand.coordination.shard_log).
The SDK's Producer is not used there because a shard's owner writes under its own
reserved producer id and epoch (strand.coordination.shard_fence), which the SDK
leaves to the transaction coordinator."""

from __future__ import annotations

import grpc

from strand.client.bootstrap import resolve_bootstrap
from strand.client.channel import open_aio_channel, transport_error
from strand.errors import ErrorCode, StrandError, UnknownServerError, error_for
from strand.v1 import common_pb2, gateway_pb2_grpc

__all__ = ["GatewayProducer"]


class GatewayProducer:
    def __init__(self, bootstrap: str, client_id: str) -> None:
        self.address = resolve_bootstrap(bootstrap)  # the first of a list, checked
        self.client_id = client_id
        self._channel: grpc.aio.Channel | None = None
        self._stub: gateway_pb2_grpc.GatewayStub | None = None

    async def produce(self, topic: str, partition: int, batch: bytes,
                      timeout_ms: int) -> StrandError | None:
        """Append ``batch`` with acks=all; None when it is written (or was already: a
        retried idempotent batch), else the typed error (retriable or not)."""
        if self._stub is None:
            self._channel = open_aio_channel(self.address, self.client_id)
            self._stub = gateway_pb2_grpc.GatewayStub(self._channel)
        try:
            response = await self._stub.Produce(common_pb2.ProduceRequest(
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

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = self._stub = None
