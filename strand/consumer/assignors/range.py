"""Kafka's RangeAssignor (``range``): contiguous ranges of each topic, topic by topic.

For each topic, the members subscribed to it are put in Kafka's member order (static
members by ``group.instance.id`` first, then the others by member id) and the
partitions in numeric order; with ``n`` partitions and ``m`` members each member gets
``n // m`` consecutive partitions and the first ``n % m`` members one more. Topics are
independent, so with several topics the first members get the extra partition of
every topic; in exchange, co-partitioned topics (same partition count, same members)
have partition ``i`` of each on the same member.

Kafka's example: C0 and C1 subscribed to t0 and t1 with 3 partitions each give
C0: [t0p0, t0p1, t1p0, t1p1] and C1: [t0p2, t1p2].

Kafka's rack-aware variant (KIP-881) needs the racks of each partition's replicas,
which ``partitions_per_topic`` does not carry: as in Kafka when those are unknown,
the assignment ignores ``rack_id``.
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

__all__ = ["RangeAssignor"]


class RangeAssignor(PartitionAssignor):
    name = "range"

    def _assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        ordered = member_order(subscriptions)
        for topic, count in subscribed_partitions(partitions_per_topic, subscriptions).items():
            members = [m for m in ordered if topic in subscriptions[m].topics]
            per_member, with_extra = divmod(count, len(members))
            for i, member in enumerate(members):
                start = per_member * i + min(i, with_extra)
                length = per_member + (1 if i < with_extra else 0)
                assignment[member] += (TopicPartition(topic, p)
                                       for p in range(start, start + length))
        return assignment
