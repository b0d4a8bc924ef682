"""Which node leads each requested partition: pure decisions over the metadata cache.

A request for many partitions becomes one sub-request per leader node (docs/architecture.md §3,
§10: throughput comes from few large calls). Partitions that cannot be routed get
their typed error here and never leave the gateway.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from strand.cluster.cache import MetadataCache
from strand.errors import ErrorCode

Item = TypeVar("Item")


@dataclass(slots=True)
class Unroutable:
    topic: str
    partition: int
    code: ErrorCode
    message: str


@dataclass(slots=True)
class Routes(Generic[Item]):
    """Per leader node (id, address): the (topic, partition, item) triples it gets."""

    by_node: dict[tuple[int, str], list[tuple[str, int, Item]]] = field(
        default_factory=lambda: defaultdict(list))
    unroutable: list[Unroutable] = field(default_factory=list)


def route(cache: MetadataCache, items: list[tuple[str, int, Item]]) -> Routes[Item]:
    routes: Routes[Item] = Routes()
    for topic, partition, item in items:
        record = cache.topics.get(topic)
        if record is None or not 0 <= partition < record.partitions:
            routes.unroutable.append(Unroutable(
                topic, partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"unknown topic or partition {topic}-{partition}"))
            continue
        leader = cache.leader_of(topic, partition)
        if leader is None:
            routes.unroutable.append(Unroutable(
                topic, partition, ErrorCode.LEADER_NOT_AVAILABLE,
                f"{topic}-{partition} has no live leader right now; retry"))
            continue
        routes.by_node[(leader.node_id, leader.address)].append((topic, partition, item))
    return routes
