"""services.storage.fetch_streams.FetchStreams against a real gRPC server standing in
for a leader: fetches reuse one open stream, concurrent ones get their own, a stream
that times out or breaks is dropped, and a leader without the stream is fetched from
with the unary call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest

from services.storage.fetch_streams import FetchStreams
from services.storage.server import StorageServicer
from strand.v1 import storage_pb2, storage_pb2_grpc


class Leader(storage_pb2_grpc.StorageServicer):
    """Answers each request with its fetch offset as the high watermark; a request
    whose max_wait_ms is 9999 is never answered."""

    def __init__(self) -> None:
        self.streams = 0
        self.unary = 0

    @staticmethod
    def answer(request: storage_pb2.ReplicaFetchRequest) -> storage_pb2.ReplicaFetchResponse:
        response = storage_pb2.ReplicaFetchResponse()
        for p in request.partitions:
            response.partitions.add(topic=p.topic, partition=p.partition,
                                    high_watermark=p.fetch_offset)
        return response

    async def ReplicaFetchStream(self, requests: AsyncIterator[Any],
                                 context: Any) -> AsyncIterator[Any]:
        self.streams += 1
        async for request in requests:
            if request.max_wait_ms == 9999:
                await asyncio.sleep(3600)
            yield self.answer(request)

    async def ReplicaFetch(self, request: Any, context: Any) -> Any:
        self.unary += 1
        return self.answer(request)


class OldLeader(Leader):
    """A leader of an older version: no stream."""

    async def ReplicaFetchStream(self, requests: AsyncIterator[Any],
                                 context: Any) -> AsyncIterator[Any]:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        yield storage_pb2.ReplicaFetchResponse()  # never reached


def request(offset: int, max_wait_ms: int = 100) -> storage_pb2.ReplicaFetchRequest:
    fetch = storage_pb2.ReplicaFetchRequest(replica_id=2, max_wait_ms=max_wait_ms)
    fetch.partitions.add(topic="orders", partition=0, fetch_offset=offset)
    return fetch


class StoppingLeader(StorageServicer):
    """The storage node's own stream handler (and its end_fetch_streams), with the
    fetch itself answered as by Leader: the rest of a storage node is not needed."""

    def __init__(self) -> None:  # no appender, fetcher, ...: only the streams' set
        self._fetch_streams = set()
        self._ending_fetch_streams = False

    async def _replica_fetch(self, request: storage_pb2.ReplicaFetchRequest
                             ) -> storage_pb2.ReplicaFetchResponse:
        return Leader.answer(request)

    @property
    def open_streams(self) -> int:
        return len(self._fetch_streams)


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met within 5 s")


def run(leader: storage_pb2_grpc.StorageServicer,
        scenario: Callable[[FetchStreams, str], Awaitable[None]]) -> None:
    async def main() -> None:
        server = grpc.aio.server()
        storage_pb2_grpc.add_StorageServicer_to_server(leader, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        address = f"127.0.0.1:{port}"
        channel = grpc.aio.insecure_channel(address)
        streams = FetchStreams(lambda _: channel)
        try:
            await scenario(streams, address)
        finally:
            streams.close()
            await channel.close()
            await server.stop(None)

    asyncio.run(main())


def test_fetches_reuse_one_stream_and_concurrent_ones_get_their_own() -> None:
    leader = Leader()

    async def scenario(streams: FetchStreams, address: str) -> None:
        for offset in range(5):
            answer = await streams.fetch(address, request(offset), 5)
            assert answer.partitions[0].high_watermark == offset
        assert (leader.streams, leader.unary) == (1, 0)
        answers = await asyncio.gather(*(streams.fetch(address, request(o), 5)
                                         for o in (10, 11)))
        assert [a.partitions[0].high_watermark for a in answers] == [10, 11]
        assert leader.streams == 2

    run(leader, scenario)


def test_a_stream_that_times_out_is_dropped() -> None:
    leader = Leader()

    async def scenario(streams: FetchStreams, address: str) -> None:
        await streams.fetch(address, request(1), 5)
        with pytest.raises(TimeoutError):
            await streams.fetch(address, request(2, max_wait_ms=9999), 0.2)
        answer = await streams.fetch(address, request(3), 5)  # on a new stream
        assert answer.partitions[0].high_watermark == 3
        assert leader.streams == 2

    run(leader, scenario)


def test_a_leader_without_the_stream_is_fetched_from_with_the_unary_call() -> None:
    leader = OldLeader()

    async def scenario(streams: FetchStreams, address: str) -> None:
        for offset in (4, 5):
            answer = await streams.fetch(address, request(offset), 5)
            assert answer.partitions[0].high_watermark == offset
        assert leader.unary == 2

    run(leader, scenario)


def test_a_stopping_leader_ends_its_followers_streams() -> None:
    """server.stop(grace) would otherwise wait the whole grace for the open streams,
    which a follower keeps between fetches."""
    leader = StoppingLeader()

    async def scenario(streams: FetchStreams, address: str) -> None:
        await streams.fetch(address, request(1), 5)
        await streams.fetch(address, request(2), 5)  # the same, idle, stream again
        assert leader.open_streams == 1
        leader.end_fetch_streams()
        await until(lambda: leader.open_streams == 0)
        answer = await streams.fetch(address, request(3), 5)  # the ended one is dropped
        assert answer.partitions[0].high_watermark == 3
        assert leader.open_streams == 1  # a new one

    run(leader, scenario)


def test_closing_the_idle_streams_to_a_leader_ends_them_there() -> None:
    leader = StoppingLeader()

    async def scenario(streams: FetchStreams, address: str) -> None:
        await streams.fetch(address, request(1), 5)
        assert leader.open_streams == 1
        streams.close_idle("127.0.0.1:1")  # another leader's: nothing changes
        assert leader.open_streams == 1
        streams.close_idle(address)
        await until(lambda: leader.open_streams == 0)

    run(leader, scenario)
