"""KIP-664's admin calls through the gateway: DescribeProducers and WriteTxnMarkers.

Both name partitions whose leaders must answer: each partition goes to its leader
(:func:`services.gateway.routing.route`), one call per leader node, concurrently,
and the answers come back in the order of the request. A partition that cannot be
routed (unknown, no live leader) or whose node does not answer gets its error, and
never fails its neighbours.

WriteTxnMarkers is the operator's abort of a hanging transaction (Kafka's
``Admin.abortTransaction``): the gateway forwards ABORT markers only. A COMMIT makes
records visible, and only the transaction coordinator, which knows every partition of
the transaction, may decide that; it writes its markers to the leaders itself. The
storage node checks the producer and coordinator epochs of each marker.

Transport failures arrive as :class:`NodeUnavailable`, so this module knows no gRPC
(only the generated messages it builds).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from services.gateway.routing import route
from services.gateway.scatter import NodeUnavailable
from strand.cluster.cache import MetadataCache
from strand.errors import ErrorCode
from strand.v1 import storage_pb2 as pb_storage

Item = TypeVar("Item")
Answer = TypeVar("Answer")
# (topic, partition, what the partition's leader is asked)
Entry = tuple[str, int, Item]


async def per_leader(cache: MetadataCache, entries: Sequence[Entry[Item]],
                     send: Callable[[str, list[Entry[Item]]], Awaitable[list[Answer]]],
                     error: Callable[[Entry[Item], ErrorCode, str], Answer]) -> list[Answer]:
    """One answer per entry, in order: ``send(address, entries)`` asks one leader node
    about its entries and answers them in the order given."""
    indexed = [(entry[0], entry[1], (i, entry)) for i, entry in enumerate(entries)]
    routes = route(cache, indexed)
    unroutable = {(u.topic, u.partition): u for u in routes.unroutable}
    answers: list[Answer | None] = [
        None if (failure := unroutable.get((entry[0], entry[1]))) is None
        else error(entry, failure.code, failure.message) for entry in entries]

    async def forward(address: str, node_entries: list[tuple[int, Entry[Item]]]) -> None:
        try:
            got = await send(address, [entry for _, entry in node_entries])
        except NodeUnavailable as exc:
            got = [error(entry, exc.code, exc.message) for _, entry in node_entries]
        for (i, _), answer in zip(node_entries, got, strict=True):
            answers[i] = answer

    await asyncio.gather(*(forward(address, [item for _, _, item in node_entries])
                           for (_, address), node_entries in routes.by_node.items()))
    assert all(answer is not None for answer in answers)
    return answers  # type: ignore[return-value]


# -- DescribeProducers ---------------------------------------------------------------------------

Send = Callable[[str, Any], Awaitable[Any]]  # (node address, request) -> its answer


def _producers_error(entry: Entry[None], code: ErrorCode,
                     message: str) -> pb_storage.DescribeProducersPartition:
    return pb_storage.DescribeProducersPartition(
        topic=entry[0], partition=entry[1], error_code=code.name, error_message=message)


async def describe_producers(cache: MetadataCache, send: Send,
                             request: pb_storage.DescribeProducersRequest
                             ) -> pb_storage.DescribeProducersResponse:
    async def ask(address: str, entries: list[Entry[None]]
                  ) -> list[pb_storage.DescribeProducersPartition]:
        response = await send(address, pb_storage.DescribeProducersRequest(
            topics=_topics((topic, partition) for topic, partition, _ in entries)))
        answered = {(p.topic, p.partition): p for p in response.partitions}
        return [answered.get((topic, partition)) or _producers_error(
            (topic, partition, None), ErrorCode.UNKNOWN_SERVER_ERROR,
            "no answer from the leader") for topic, partition, _ in entries]

    entries: list[Entry[None]] = [(t.topic, p, None) for t in request.topics
                                  for p in t.partitions]
    answers: list[pb_storage.DescribeProducersPartition] = await per_leader(
        cache, entries, ask, _producers_error)
    return pb_storage.DescribeProducersResponse(partitions=answers)


# -- WriteTxnMarkers (admin abort) ---------------------------------------------------------------

_Marker = tuple[int, pb_storage.WritableTxnMarker]  # (index in the request, marker)


def _marker_error(entry: Entry[_Marker], code: ErrorCode,
                  message: str) -> pb_storage.WritableTxnMarkerPartitionResult:
    return pb_storage.WritableTxnMarkerPartitionResult(
        partition=entry[1], error_code=code.name, error_message=message)


async def write_txn_markers(cache: MetadataCache, send: Send,
                            request: pb_storage.WriteTxnMarkersRequest
                            ) -> pb_storage.WriteTxnMarkersResponse:
    async def ask(address: str, entries: list[Entry[_Marker]]
                  ) -> list[pb_storage.WritableTxnMarkerPartitionResult]:
        # One sub-marker per marker of the request, with this node's partitions of it.
        order: list[int] = []
        parts: dict[int, list[tuple[str, int]]] = {}
        for topic, partition, (index, _) in entries:
            if index not in parts:
                order.append(index)
                parts[index] = []
            parts[index].append((topic, partition))
        markers = {index: marker for _, _, (index, marker) in entries}
        response = await send(address, pb_storage.WriteTxnMarkersRequest(
            timeout_ms=request.timeout_ms, markers=[
                pb_storage.WritableTxnMarker(
                    producer_id=markers[i].producer_id,
                    producer_epoch=markers[i].producer_epoch, committed=False,
                    coordinator_epoch=markers[i].coordinator_epoch,
                    topics=_topics(parts[i])) for i in order]))
        answered: dict[tuple[int, str, int], Any] = {}
        for index, result in zip(order, response.markers, strict=False):
            for topic in result.topics:
                for part in topic.partitions:
                    answered[(index, topic.topic, part.partition)] = part
        return [answered.get((index, topic, partition)) or _marker_error(
            (topic, partition, (index, marker)), ErrorCode.UNKNOWN_SERVER_ERROR,
            "no answer from the leader") for topic, partition, (index, marker) in entries]

    entries: list[Entry[_Marker]] = []
    refused: dict[int, str] = {}
    for index, marker in enumerate(request.markers):
        if marker.committed:
            refused[index] = (
                f"a COMMIT marker for producer {marker.producer_id} was refused: the gateway "
                "forwards ABORT markers only (KIP-664's abort of a hanging transaction); "
                "commits are written by the transaction coordinator")
        entries += [(t.topic, p, (index, marker)) for t in marker.topics for p in t.partitions]
    routable = [entry for entry in entries if entry[2][0] not in refused]
    results = iter(await per_leader(cache, routable, ask, _marker_error))
    response = pb_storage.WriteTxnMarkersResponse()
    for index, marker in enumerate(request.markers):
        out = response.markers.add(producer_id=marker.producer_id)
        for topic in marker.topics:
            partitions = out.topics.add(topic=topic.topic).partitions
            for partition in topic.partitions:
                if index in refused:
                    partitions.add(partition=partition,
                                   error_code=ErrorCode.INVALID_REQUEST.name,
                                   error_message=refused[index])
                else:
                    partitions.append(next(results))
    return response


def _topics(partitions: Any) -> list[pb_storage.WritableTxnMarkerTopic]:
    """(topic, partition) pairs grouped by topic, in first-seen order."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return [pb_storage.WritableTxnMarkerTopic(topic=t, partitions=p)
            for t, p in by_topic.items()]
