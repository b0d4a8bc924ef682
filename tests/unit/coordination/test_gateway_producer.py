"""The coordinators' Produce call (strand.cluster.gateway_calls.GatewayProducer) goes
over the process's shared channels (strand.client.channel.AioChannels): one
connection to the gateway whoever writes, closed by the channels' owner — not a
channel of its own that only its own close() would release."""

from __future__ import annotations

import asyncio

import grpc

from strand.client.channel import AioChannels
from strand.cluster.gateway_calls import GatewayProducer
from strand.errors import ErrorCode, NotLeaderOrFollowerError
from strand.v1 import common_pb2, gateway_pb2_grpc


class FakeGateway(gateway_pb2_grpc.GatewayServicer):
    """Answers every Produce with ``code``; remembers who called (user agent)."""

    def __init__(self, code: ErrorCode = ErrorCode.NONE) -> None:
        self.code = code
        self.agents: list[str] = []

    async def Produce(self, request: common_pb2.ProduceRequest,
                      context: grpc.aio.ServicerContext) -> common_pb2.ProduceResponse:
        self.agents.append(dict(context.invocation_metadata() or ()).get("user-agent", ""))
        topic = request.topics[0]
        return common_pb2.ProduceResponse(topics=[common_pb2.TopicProduceResponse(
            topic=topic.topic, partitions=[common_pb2.PartitionProduceResponse(
                partition=topic.partitions[0].partition, error_code=self.code.name,
                error_message="not the leader")])])


async def _serve(servicer: FakeGateway) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    gateway_pb2_grpc.add_GatewayServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


def test_every_write_uses_the_shared_channel_and_its_owner_closes_it() -> None:
    async def scenario() -> None:
        fake = FakeGateway()
        server, address = await _serve(fake)
        channels = AioChannels("txn-coordinator-t1")
        try:
            first = GatewayProducer(channels, address)
            second = GatewayProducer(channels, address)
            assert await first.produce("__transaction_state", 0, b"batch", 1000) is None
            assert await second.produce("__transaction_state", 1, b"batch", 1000) is None
            shared = channels.get(address)  # the one channel both wrote over
            assert channels.get(address) is shared
            assert len(fake.agents) == 2
            assert all("txn-coordinator-t1" in agent for agent in fake.agents), fake.agents
            await channels.close()
            # Closed by its owner: the next write opens a new channel from the same pool.
            assert await first.produce("__transaction_state", 0, b"batch", 1000) is None
            assert channels.get(address) is not shared
        finally:
            await channels.close()
            await server.stop(None)

    asyncio.run(scenario())


def test_a_refusal_comes_back_typed() -> None:
    async def scenario() -> None:
        server, address = await _serve(FakeGateway(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        channels = AioChannels()
        try:
            error = await GatewayProducer(channels, address).produce("t", 0, b"batch", 1000)
            assert isinstance(error, NotLeaderOrFollowerError), error
        finally:
            await channels.close()
            await server.stop(None)

    asyncio.run(scenario())
