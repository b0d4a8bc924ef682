"""A rebalance listener that records what its member is given and loses."""

from __future__ import annotations

from strand import TopicPartition


class Recorder:
    """Keeps every callback (``events``) and what its member owns (``owned``, a new
    frozenset at each change: readable from any thread)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, set[TopicPartition]]] = []
        self.owned: frozenset[TopicPartition] = frozenset()
        self.most = 0  # the most partitions owned at once

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self.events.append(("assigned", partitions))
        self.owned = self.owned | partitions
        self.most = max(self.most, len(self.owned))

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self.events.append(("revoked", partitions))
        self.owned = self.owned - partitions

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self.events.append(("lost", partitions))
        self.owned = self.owned - partitions

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]
