"""Calls the transaction coordinator makes to partition leaders: WriteTxnMarkers.

Each partition's marker goes to its leader as the watched metadata cache knows it,
grouped into one call per leader node; partitions answered with a retriable error
(the leadership moved, not enough in-sync replicas, a timeout, the node unreachable)
are sent again, to the then current leader, until every partition has a final
answer or ``timeout_s`` passes (Kafka's TransactionMarkerChannelManager retries the
same way). A partition of a deleted topic is final (nothing left to end).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass

import grpc

from strand.cluster.cache import MetadataCache
from strand.coordination.txn_verifier import OpenedNext
from strand.errors import ErrorCode
from strand.v1 import storage_pb2, storage_pb2_grpc

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 10.0
RETRY_S = 0.1
TopicPartition = tuple[str, int]

# Answers after which the coordinator asks again (maybe another leader).
RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
})
_UNREACHABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                grpc.StatusCode.CANCELLED}


@dataclass(frozen=True, slots=True)
class MarkerError:
    code: ErrorCode
    message: str


async def until_final(cache: MetadataCache, partitions: Iterable[TopicPartition],
                      send: Callable[[list[TopicPartition], float],
                                     Awaitable[dict[TopicPartition, MarkerError]]],
                      retriable: Collection[ErrorCode], timeout_s: float, what: str,
                      context: Mapping[str, object]) -> dict[TopicPartition, MarkerError]:
    """Send the partitions still without a final answer (one round: ``send`` answers
    each of them, retriable or not) again as the metadata changes, until every one
    has a final answer or ``timeout_s`` passes; then the rest keep their last
    (retriable) error. How the transaction coordinator ends a transaction on its
    partitions (markers, transactional offsets), as Kafka's
    TransactionMarkerChannelManager retries."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    pending = dict.fromkeys(partitions, MarkerError(ErrorCode.REQUEST_TIMED_OUT,
                                                    "not sent yet"))
    done: dict[TopicPartition, MarkerError] = {}
    while pending:
        answers = await send(list(pending), max(deadline - loop.time(), 0.1))
        for tp, error in answers.items():
            if error.code in retriable:
                pending[tp] = error
            else:
                done[tp] = error
                pending.pop(tp, None)
        if not pending:
            break
        if loop.time() >= deadline:
            done.update(pending)
            break
        log.info("retrying %s", what, extra={
            **context, "partitions": len(pending),
            "error": next(iter(pending.values())).message})
        await cache.wait_changed(min(max(deadline - loop.time(), 0), RETRY_S))
    return done


class StorageMarkerWriter:
    """Writes a transaction's COMMIT/ABORT markers to its partitions' leaders."""

    def __init__(self, cache: MetadataCache, channel: Callable[[str], grpc.aio.Channel],
                 timeout_s: float = 30.0) -> None:
        self.cache = cache
        # The caller's channel to an address, kept open: a connection per call would
        # add its handshake to every transaction's end.
        self._channel = channel
        self.timeout_s = timeout_s

    async def write_markers(self, producer_id: int, producer_epoch: int,
                            coordinator_epoch: int, commit: bool,
                            partitions: Iterable[TopicPartition],
                            opened: OpenedNext | None = None
                            ) -> dict[TopicPartition, MarkerError]:
        """Each partition's final answer (code NONE: its marker is written and
        replicated). A partition still failing with a retriable error when the time is
        up keeps that error: the caller tries again later."""

        async def send(pending: list[TopicPartition], remaining_s: float
                       ) -> dict[TopicPartition, MarkerError]:
            answers: dict[TopicPartition, MarkerError] = {}
            by_leader: dict[str, list[TopicPartition]] = {}
            for tp in pending:
                leader = self.cache.leader_of(*tp)
                if tp[0] not in self.cache.topics:
                    answers[tp] = MarkerError(ErrorCode.NONE, "the topic was deleted")
                elif leader is None:
                    answers[tp] = MarkerError(ErrorCode.LEADER_NOT_AVAILABLE,
                                              f"{tp[0]}-{tp[1]} has no leader")
                else:
                    by_leader.setdefault(leader.address, []).append(tp)
            for answer in await asyncio.gather(*(
                    self._call(address, tps, producer_id, producer_epoch, coordinator_epoch,
                               commit, remaining_s, opened)
                    for address, tps in by_leader.items())):
                answers.update(answer)
            return answers

        return await until_final(self.cache, partitions, send, RETRIABLE, self.timeout_s,
                                 "transaction markers", {"producer_id": producer_id})

    async def _call(self, address: str, partitions: list[TopicPartition], producer_id: int,
                    producer_epoch: int, coordinator_epoch: int, commit: bool,
                    timeout_s: float, opened: OpenedNext | None
                    ) -> dict[TopicPartition, MarkerError]:
        # Two markers when only some partitions have the next transaction open.
        groups: dict[bool, dict[str, list[int]]] = {}
        for topic, partition in partitions:
            opens = opened is not None and (topic, partition) in opened.partitions
            groups.setdefault(opens, {}).setdefault(topic, []).append(partition)
        request = storage_pb2.WriteTxnMarkersRequest(
            timeout_ms=int(min(timeout_s, CALL_TIMEOUT_S) * 1000),
            markers=[storage_pb2.WritableTxnMarker(
                producer_id=producer_id, producer_epoch=producer_epoch, committed=commit,
                coordinator_epoch=coordinator_epoch,
                next_producer_epoch=opened.producer_epoch if opens and opened else None,
                topics=[storage_pb2.WritableTxnMarkerTopic(topic=t, partitions=ps)
                        for t, ps in topics.items()])
                for opens, topics in groups.items()])
        try:
            response = await storage_pb2_grpc.StorageStub(self._channel(address)) \
                .WriteTxnMarkers(request, timeout=min(timeout_s, CALL_TIMEOUT_S) + 1)
        except grpc.aio.AioRpcError as exc:
            if exc.code() not in _UNREACHABLE:
                raise
            why = MarkerError(ErrorCode.NETWORK_EXCEPTION,
                              f"storage node {address} unreachable ({exc.code().name})")
            return dict.fromkeys(partitions, why)
        answers: dict[TopicPartition, MarkerError] = {}
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    answers[(topic.topic, p.partition)] = MarkerError(
                        ErrorCode(p.error_code), p.error_message)
        return answers
