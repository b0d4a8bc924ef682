"""strand.cluster.transaction_calls.CoordinatorTxnVerifier against a real gRPC server
standing in for the transaction coordinator: the questions for one producer asked
while a call is out share the next call, each partition gets its own answer, and a
failed call fails every question it carried."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from strand.cluster import transaction_calls
from strand.cluster.transaction_calls import CoordinatorTxnVerifier
from strand.errors import CoordinatorNotAvailableError, ErrorCode, InvalidTxnStateError
from strand.v1 import transactions_pb2 as pb
from strand.v1 import transactions_pb2_grpc


class Owner:
    instance_id = "txn-1"

    def __init__(self, address: str) -> None:
        self.address = address


class Coordinator(transactions_pb2_grpc.TransactionsServicer):
    """Answers verify-only AddPartitionsToTxn: every partition but ``outside`` is in
    the transaction; the first call waits for ``release``."""

    def __init__(self) -> None:
        self.calls: list[list[tuple[str, int]]] = []
        self.release = asyncio.Event()
        self.outside = {("orders", 2)}
        self.broken = False

    async def AddPartitionsToTxn(self, request: pb.AddPartitionsToTxnRequest,
                                 context: Any) -> pb.AddPartitionsToTxnResponse:
        assert request.verify_only
        asked = [(t.topic, p) for t in request.topics for p in t.partitions]
        self.calls.append(asked)
        if len(self.calls) == 1:
            await self.release.wait()
        if self.broken:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "going away")
        response = pb.AddPartitionsToTxnResponse()
        for topic, partition in asked:
            code = ErrorCode.INVALID_TXN_STATE if (topic, partition) in self.outside \
                else ErrorCode.NONE
            response.results.add(topic=topic, partition=partition, error_code=int(code))
        return response


def run(coordinator: Coordinator, scenario: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        server = grpc.aio.server()
        transactions_pb2_grpc.add_TransactionsServicer_to_server(coordinator, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        monkeypatch.setattr(transaction_calls, "key_shard", lambda cache, topic, key: 0)
        monkeypatch.setattr(transaction_calls, "shard_owner",
                            lambda cache, topic, shard: Owner(f"127.0.0.1:{port}"))
        try:
            await scenario(CoordinatorTxnVerifier(None, "storage node 1",  # type: ignore[arg-type]
                                                  lambda address: channel))
        finally:
            await channel.close()
            await server.stop(None)

    asyncio.run(main())


def test_questions_asked_meanwhile_share_the_next_call(monkeypatch: pytest.MonkeyPatch) -> None:
    coordinator = Coordinator()

    async def scenario(verifier: CoordinatorTxnVerifier) -> None:
        def ask(partition: int, epoch: int = 3) -> asyncio.Future[None]:
            return asyncio.ensure_future(verifier.verify("app", 7, epoch, "orders", partition))

        first = [ask(0), ask(1)]  # asked in the same turn of the loop: one call
        while not coordinator.calls:
            await asyncio.sleep(0.001)
        later = [ask(1), ask(2), ask(3)]  # while that call is out: all in the next one
        other_epoch = ask(4, epoch=4)  # another producer epoch: a call of its own
        await asyncio.sleep(0.05)
        coordinator.release.set()
        await asyncio.gather(*first, later[0], later[2], other_epoch)
        with pytest.raises(InvalidTxnStateError, match=r"orders-2 .* not part of"):
            await later[1]
        assert sorted(coordinator.calls) == sorted([
            [("orders", 0), ("orders", 1)], [("orders", 1), ("orders", 2), ("orders", 3)],
            [("orders", 4)]])

    run(coordinator, scenario, monkeypatch)


def test_a_failed_call_fails_every_question_it_carried(
        monkeypatch: pytest.MonkeyPatch) -> None:
    coordinator = Coordinator()
    coordinator.broken = True
    coordinator.release.set()

    async def scenario(verifier: CoordinatorTxnVerifier) -> None:
        asked = [asyncio.ensure_future(verifier.verify("app", 7, 3, "orders", p))
                 for p in (0, 1)]
        for question in asked:
            with pytest.raises(CoordinatorNotAvailableError, match="did not answer"):
                await question
        assert coordinator.calls == [[("orders", 0), ("orders", 1)]]
        # the next question asks again
        coordinator.broken = False
        await verifier.verify("app", 7, 3, "orders", 0)
        assert len(coordinator.calls) == 2

    run(coordinator, scenario, monkeypatch)
