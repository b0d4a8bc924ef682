"""Kafka's RoundRobinAssignor (``roundrobin``): every partition, dealt like cards.

All partitions of the subscribed topics, sorted by topic then partition, are dealt in
turn to the members in Kafka's member order (static members by ``group.instance.id``
first, then the others by member id), going round and round; a member not subscribed
to a partition's topic is skipped (and loses its turn for that partition). With
identical subscriptions the counts differ by at most one; with different ones the
result can be unbalanced (Kafka's javadoc: C0 on t0, C1 on t0 and t1, C2 on t0, t1
and t2 with 1, 2 and 3 partitions give C0: [t0p0], C1: [t1p0], C2: [t1p1, t2p0, t2p1,
t2p2]).
"""

from __future__ import annotations

from collections.abc import Mapping

from strand.client.structs import TopicPartition
from strand.consumer.assignors.base import (
    PartitionAssignor,
    Subscription,
    member_order,
    subscribed_partitions,
)

__all__ = ["RoundRobinAssignor"]


class RoundRobinAssignor(PartitionAssignor):
    name = "roundrobin"

    def _assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        ring = member_order(subscriptions)
        topics_of = {m: frozenset(subscriptions[m].topics) for m in ring}
        turn = 0  # Kafka's CircularIterator: the member peek() would return
        for topic, count in subscribed_partitions(partitions_per_topic, subscriptions).items():
            for partition in range(count):
                # Someone subscribes to every topic listed, so this stops within one round.
                while topic not in topics_of[ring[turn]]:
                    turn = (turn + 1) % len(ring)
                assignment[ring[turn]].append(TopicPartition(topic, partition))
                turn = (turn + 1) % len(ring)
        return assignment
