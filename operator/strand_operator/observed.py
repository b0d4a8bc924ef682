"""A topic as Strand has it now: placement, leaders, configs set, reassignments."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["ObservedTopic"]


@dataclass(frozen=True, slots=True)
class ObservedTopic:
    name: str
    topic_id: str
    # partition -> ordered target replicas (during a reassignment: where it is going)
    assignment: Mapping[int, tuple[int, ...]]
    leaders: Mapping[int, int | None] = field(default_factory=dict)
    config: Mapping[str, str] = field(default_factory=dict)  # the non-default ones
    reassigning: frozenset[int] = frozenset()  # partitions being reassigned now

    @property
    def partitions(self) -> int:
        return len(self.assignment)

    @property
    def replication_factor(self) -> int:
        """The most common replica count (they differ only while a change runs)."""
        counts = Counter(len(r) for r in self.assignment.values())
        return counts.most_common(1)[0][0] if counts else 0

    def partitions_with(self, replicas: int) -> int:
        """Partitions settled at ``replicas`` replicas (not being reassigned)."""
        return sum(1 for p, r in self.assignment.items()
                   if len(r) == replicas and p not in self.reassigning)
