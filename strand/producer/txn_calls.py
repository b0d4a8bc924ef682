"""The transactional producer's calls to the transaction and group coordinators,
through the gateway: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit and EndTxn (Kafka's TransactionManager request handlers).

Each call is retried, ``retry_backoff_ms`` apart, while the answer says the
coordinator is moving or busy (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS, a timed-out or unreachable
gateway), until its deadline (then RequestTimedOutError, naming the last answer).
PRODUCER_FENCED and INVALID_PRODUCER_EPOCH become ProducerFencedError; any other
error is raised as its typed error, for the caller to decide whether it ends the
transaction or the producer.

The calls run on the sender thread's event loop, one at a time (a lock), as
Kafka's sender sends one transactional request at a time: an EndTxn never
overtakes the AddPartitionsToTxn of the same transaction.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import grpc

from strand.client.channel import transport_error
from strand.errors import (
    ErrorCode,
    ProducerFencedError,
    RequestTimedOutError,
    StrandError,
    error_for,
)
from strand.producer.producer_batch import TopicPartition
from strand.v1 import gateway_pb2_grpc
from strand.v1 import groups_pb2 as pb_groups
from strand.v1 import transactions_pb2 as pb_txn

__all__ = ["RETRIABLE_TXN_ERRORS", "GroupMember", "TxnCalls"]

# The coordinator is loading, moved, or finishing the previous transaction: ask again.
RETRIABLE_TXN_ERRORS = frozenset({
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # TxnOffsetCommit: metadata not there yet
})
_FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})
# Kafka retries a busy coordinator's AddPartitionsToTxn after 20 ms, not the full
# backoff: the previous transaction's markers usually complete within a few ms.
_CONCURRENT_BACKOFF_S = 0.02


class GroupMember(Protocol):
    """What TxnOffsetCommit sends of the consumer (its ConsumerGroupMetadata)."""

    @property
    def group_id(self) -> str: ...
    @property
    def generation_id(self) -> int: ...
    @property
    def member_id(self) -> str: ...
    @property
    def group_instance_id(self) -> str | None: ...


class TxnCalls:
    """One transactional producer's coordinator calls; see the module docstring."""

    def __init__(self, transactional_id: str, transaction_timeout_ms: int, address: str,
                 request_timeout_ms: float, retry_backoff_ms: float) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.address = address
        self.request_timeout_s = request_timeout_ms / 1000
        self.backoff_s = retry_backoff_ms / 1000
        self.stub: gateway_pb2_grpc.GatewayStub | None = None  # set on the sender's loop
        self._lock: asyncio.Lock | None = None

    async def _retrying(self, name: str, deadline: float,
                        call: Callable[[float], Awaitable[Any]],
                        still_wanted: Callable[[], bool] = lambda: True) -> Any:
        """``call(timeout_s)`` until it answers NONE; see the module docstring."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            last: StrandError | None = None
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not still_wanted():
                    raise RequestTimedOutError(
                        f"{name} for transactional id {self.transactional_id!r} did not "
                        f"succeed in time" + (f"; last answer: {last}" if last else "")
                        + ": the call may be repeated")
                try:
                    response = await call(min(self.request_timeout_s, remaining))
                except grpc.aio.AioRpcError as exc:
                    error = transport_error(exc, self.address, name)
                    code = error.code
                else:
                    code = response.error_code
                    if code == ErrorCode.NONE:
                        return response
                    error = error_for(code, response.error_message)
                if code in _FENCED:
                    raise ProducerFencedError(
                        f"transactional producer {self.transactional_id!r} is fenced "
                        f"({name}: {error}): a newer instance with the same transactional "
                        "id exists, or its transaction timed out; close this producer")
                if not (error.retriable or code in RETRIABLE_TXN_ERRORS):
                    raise error
                last = error
                pause = _CONCURRENT_BACKOFF_S if code == ErrorCode.CONCURRENT_TRANSACTIONS \
                    else self.backoff_s
                await asyncio.sleep(max(0.0, min(pause, deadline - time.monotonic())))

    def _stub(self) -> gateway_pb2_grpc.GatewayStub:
        assert self.stub is not None, "the sender thread has not started"
        return self.stub

    async def init_producer_id(self, deadline: float,
                               current: tuple[int, int] | None = None) -> tuple[int, int]:
        """A producer id and epoch for the transactional id; ``current`` (KIP-360): the
        id and epoch this instance has, to be bumped instead of fenced."""
        request = pb_txn.InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.transaction_timeout_ms)
        if current is not None:
            request.producer_id, request.producer_epoch = current
        stub = self._stub()
        response = await self._retrying(
            "InitProducerId", deadline,
            lambda timeout: stub.InitProducerId(request, timeout=timeout))
        return int(response.producer_id), int(response.producer_epoch)

    async def add_partitions(self, producer_id: int, epoch: int,
                             partitions: Collection[TopicPartition], deadline: float,
                             still_wanted: Callable[[], bool]) -> None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            by_topic.setdefault(topic, []).append(partition)
        request = pb_txn.AddPartitionsToTxnRequest(
            transactional_id=self.transactional_id, producer_id=producer_id,
            producer_epoch=epoch,
            topics=[pb_txn.TxnTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])
        stub = self._stub()

        async def call(timeout: float) -> Any:
            response = await stub.AddPartitionsToTxn(request, timeout=timeout)
            return _first_failure(response, response.results)

        await self._retrying("AddPartitionsToTxn", deadline, call, still_wanted)

    async def add_offsets(self, producer_id: int, epoch: int, group_id: str,
                          deadline: float) -> None:
        request = pb_txn.AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id, producer_id=producer_id,
            producer_epoch=epoch, group_id=group_id)
        stub = self._stub()
        await self._retrying("AddOffsetsToTxn", deadline,
                             lambda timeout: stub.AddOffsetsToTxn(request, timeout=timeout))

    async def txn_offset_commit(self, producer_id: int, epoch: int, member: GroupMember,
                                offsets: Mapping[TopicPartition, tuple[int, str]],
                                deadline: float) -> None:
        request = pb_groups.TxnOffsetCommitRequest(
            transactional_id=self.transactional_id, group_id=member.group_id,
            producer_id=producer_id, producer_epoch=epoch, member_id=member.member_id,
            generation_id=member.generation_id,
            group_instance_id=member.group_instance_id or "",
            partitions=[pb_groups.OffsetCommitPartition(topic=t, partition=p, offset=o,
                                                        metadata=m)
                        for (t, p), (o, m) in sorted(offsets.items())])
        stub = self._stub()

        async def call(timeout: float) -> Any:
            response = await stub.TxnOffsetCommit(request, timeout=timeout)
            return _first_failure(response, response.partitions)

        await self._retrying("TxnOffsetCommit", deadline, call)

    async def end_txn(self, producer_id: int, epoch: int, commit: bool, deadline: float,
                      opens: Iterable[TopicPartition] = ()) -> tuple[int, int, bool]:
        """Returns the producer id and epoch of the next transaction (every end moves
        the transactional id to the next epoch), and whether that transaction is open
        already with the partitions ``opens`` (the coordinator begins it in the same
        write)."""
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(opens):
            topics.setdefault(topic, []).append(partition)
        request = pb_txn.EndTxnRequest(
            transactional_id=self.transactional_id, producer_id=producer_id,
            producer_epoch=epoch, committed=commit, next_topics=[
                pb_txn.TxnTopic(topic=t, partitions=ps) for t, ps in topics.items()])
        stub = self._stub()
        response = await self._retrying("EndTxn", deadline,
                                        lambda timeout: stub.EndTxn(request, timeout=timeout))
        return (int(response.producer_id), int(response.producer_epoch),
                bool(opens) and response.next_opened)


@dataclass(frozen=True, slots=True)
class _Failure:
    error_code: int
    error_message: str


def _first_failure(response: Any, partitions: Iterable[Any]) -> Any:
    """A request answered per partition fails as a whole with its first failed
    partition's error: all of it is retried, or fails the transaction, together."""
    if response.error_code == ErrorCode.NONE:
        for part in partitions:
            if part.error_code != ErrorCode.NONE:
                why = getattr(part, "error_message", "") or ErrorCode(part.error_code).name
                return _Failure(part.error_code, f"{part.topic}-{part.partition}: {why}")
    return response
