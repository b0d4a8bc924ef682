"""Where new replicas go, computed with the controller's own placement function
(strand.cluster.placement), fed with the storage nodes and their racks."""

from __future__ import annotations

from collections.abc import Sequence

from strand.cluster.placement import (
    Broker,
    assign_replicas,
    change_replication_factor,
    start_index_for,
)
from strand_operator.observed import ObservedTopic

__all__ = ["new_partitions", "new_topic", "replication_targets"]


def new_topic(brokers: Sequence[Broker], name: str, partitions: int,
              replicas: int) -> dict[int, list[int]]:
    """A new topic's placement: the same answer the controller would give."""
    return assign_replicas(brokers, partitions, replicas, start_index=start_index_for(name))


def new_partitions(brokers: Sequence[Broker], topic: ObservedTopic,
                   total: int) -> list[list[int]]:
    """Replica lists of the partitions ``topic.partitions .. total - 1``, placed so the
    whole topic stays balanced per broker and rack; existing partitions stay put."""
    placed = assign_replicas(brokers, total, topic.replication_factor,
                             existing={p: list(r) for p, r in topic.assignment.items()},
                             start_index=start_index_for(topic.name))
    return [placed[p] for p in range(topic.partitions, total)]


def replication_targets(brokers: Sequence[Broker], topic: ObservedTopic,
                        replicas: int) -> dict[int, list[int]]:
    """Reassignment targets of the partitions whose replica count is not ``replicas``."""
    targets = change_replication_factor(
        brokers, {p: list(r) for p, r in topic.assignment.items()}, replicas,
        start_index=start_index_for(topic.name))
    return {p: t for p, t in targets.items() if tuple(t) != topic.assignment[p]}
