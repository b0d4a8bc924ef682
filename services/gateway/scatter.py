"""Scatter-gather of a partitioned request over the partitions' leader nodes.

Produce, Fetch and ListOffsets name partitions of many topics; each partition goes to
the node that leads it (:mod:`services.gateway.routing`). A request is split into one
sub-request per leader node, the sub-requests go out concurrently, and the nodes'
per-partition answers are merged back in the order of the request. A partition that
cannot be routed, or whose node does not answer, gets the RPC's error answer and so
never fails its neighbours.

When every partition goes to one node (the SDK sends one request per leader) the
request passes through as it came and the node's answer comes back as it is: no
records are copied into a new message either way.

What differs per RPC is a :class:`ScatterGather` value: how a node is called, how a
sub-request is built, the error answer of a partition, and for Fetch the long-poll
race (the first node with data answers the client; the others are cancelled).
Transport failures arrive as :class:`NodeUnavailable`, so this module knows no gRPC.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from services.gateway.routing import route
from strand.cluster.cache import MetadataCache
from strand.errors import ErrorCode

__all__ = ["NodeUnavailable", "PartitionedMessage", "ScatterGather"]

Key = tuple[str, int]  # (topic, partition)
Item = tuple[str, int, Any]  # (topic, partition, the partition's part of a request)
# A topic's refusal, before any routing: (code, message), or None to go on.
Refused = Callable[[str], "tuple[ErrorCode, str] | None"]
NO_ANSWER = "no answer from the leader"


class _Partition(Protocol):
    @property
    def partition(self) -> int: ...


Part_co = TypeVar("Part_co", bound=_Partition, covariant=True)


class _Topic(Protocol[Part_co]):
    @property
    def topic(self) -> str: ...

    @property
    def partitions(self) -> Iterable[Part_co]: ...


class PartitionedMessage(Protocol[Part_co]):
    """The shape Produce, Fetch and ListOffsets requests and answers share."""

    @property
    def topics(self) -> Iterable[_Topic[Part_co]]: ...


Request = TypeVar("Request", bound=PartitionedMessage[_Partition])
Answer = TypeVar("Answer", bound=_Partition)
Response = TypeVar("Response", bound=PartitionedMessage[Any])


class NodeUnavailable(Exception):
    """Raised by :attr:`ScatterGather.send` when a node did not answer: every
    partition sent there is answered with ``code`` and ``message``."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class ScatterGather(Generic[Request, Response, Answer]):
    """How one partitioned RPC is split over the leader nodes and merged back."""

    # Calls one node (by address); raises NodeUnavailable on a transport failure.
    send: Callable[[str, Request], Awaitable[Response]]
    # The sub-request for one node: the client's request with only these partitions
    # (grouped by topic, in request order).
    split: Callable[[Request, dict[str, list[Any]]], Request]
    # The client's answer from its topics' per-partition answers, in request order.
    respond: Callable[[list[tuple[str, list[Answer]]]], Response]
    # A partition's error answer: (partition, code, message).
    error: Callable[[int, ErrorCode, str], Answer]
    # A partition no node answered; default: the error UNKNOWN_SERVER_ERROR.
    unanswered: Callable[[int], Answer] | None = None
    # Set for a long-polling RPC: a node with such an answer (or a failed node) ends
    # the wait; the other nodes' calls are cancelled and their partitions unanswered.
    decisive: Callable[[Answer], bool] | None = None

    async def call(self, cache: MetadataCache, request: Request,
                   refused: Refused | None = None) -> Response:
        """Forward ``request``; a topic ``refused(topic)`` names (its code and message:
        not authorised) is answered with that error and not forwarded."""
        items: list[Item] = [(t.topic, p.partition, p)
                             for t in request.topics for p in t.partitions]
        results: dict[Key, Answer] = {}
        if refused is not None:
            refusals = {topic: refused(topic) for topic in {item[0] for item in items}}
            for topic, partition, _ in items:
                refusal = refusals[topic]
                if refusal is not None:
                    results[(topic, partition)] = self.error(partition, *refusal)
            items = [item for item in items if refusals[item[0]] is None]
        routes = route(cache, items)
        results.update({(u.topic, u.partition): self.error(u.partition, u.code, u.message)
                        for u in routes.unroutable})
        if not results and len(routes.by_node) == 1:
            ((_, address),) = routes.by_node
            try:
                return await self.send(address, request)  # passed through, not copied
            except NodeUnavailable as exc:
                self._fail(results, items, exc)
        elif routes.by_node:
            await self._scatter(request, [(address, entries) for (_, address), entries
                                          in routes.by_node.items()], results)
        return self._respond(request, results)

    def fail_all(self, request: Request, code: ErrorCode, message: str) -> Response:
        """The answer that refuses every partition of ``request`` alike."""
        return self.respond([(t.topic, [self.error(p.partition, code, message)
                                        for p in t.partitions]) for t in request.topics])

    async def _scatter(self, request: Request, nodes: Sequence[tuple[str, list[Item]]],
                       results: dict[Key, Answer]) -> None:
        decisive = self.decisive

        async def forward(address: str, entries: list[Item]) -> bool:
            """Whether the node's answer ends a long poll."""
            try:
                response = await self.send(address, self.split(request, _by_topic(entries)))
            except NodeUnavailable as exc:
                self._fail(results, entries, exc)
                return True
            ends = False
            for topic in response.topics:
                for part in topic.partitions:
                    results[(topic.topic, part.partition)] = part
                    ends = ends or (decisive is not None and decisive(part))
            return ends

        pending = {asyncio.ensure_future(forward(address, entries))
                   for address, entries in nodes}
        try:
            while pending:
                done, pending = await asyncio.wait(pending,
                                                   return_when=asyncio.FIRST_COMPLETED)
                ended = [task.result() for task in done]
                if decisive is not None and any(ended):
                    break
        finally:
            # A long poll's other nodes (fetch is a read: nothing is lost), or every
            # call when this one fails or is cancelled.
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _fail(self, results: dict[Key, Answer], entries: Iterable[Item],
              exc: NodeUnavailable) -> None:
        for topic, partition, _ in entries:
            results[(topic, partition)] = self.error(partition, exc.code, exc.message)

    def _respond(self, request: Request, results: dict[Key, Answer]) -> Response:
        return self.respond([(t.topic, [self._answer(results, t.topic, p.partition)
                                        for p in t.partitions]) for t in request.topics])

    def _answer(self, results: dict[Key, Answer], topic: str, partition: int) -> Answer:
        answer = results.get((topic, partition))
        if answer is not None:
            return answer
        if self.unanswered is not None:
            return self.unanswered(partition)
        return self.error(partition, ErrorCode.UNKNOWN_SERVER_ERROR, NO_ANSWER)


def _by_topic(entries: Iterable[Item]) -> dict[str, list[Any]]:
    topics: dict[str, list[Any]] = {}
    for topic, _partition, item in entries:
        topics.setdefault(topic, []).append(item)
    return topics
