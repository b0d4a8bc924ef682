"""Kafka's StickyAssignor (``sticky``, eager) and the algorithm it shares with the
cooperative one (Kafka's ``AbstractStickyAssignor``).

Two goals, the first before the second:

1. balance: the counts of partitions differ by at most one between members, or, when
   subscriptions differ and that is impossible, no member with two or more fewer
   partitions than another could take one of that other member's partitions;
2. stickiness: partitions stay with the member that owned them before the rebalance
   as much as balance allows.

Each member says what it owned, and in which generation, through its subscription.
When two members claim the same partition (one of them missed a rebalance), the
claim of the higher generation wins; two claims in the same generation are both
dropped (Kafka logs it as invalid input) and the partition is assigned afresh.

When every member subscribes to the same topics, Kafka's *constrained* algorithm
runs: each member keeps up to its quota (``total // members``, or one more for the
first ``total % members`` members that own that many) of what it owned, lowest
partition numbers first, and the rest is dealt round robin to the members under
quota, sorted by member id. That revokes the fewest partitions balance allows.
Otherwise the *general* algorithm runs: members keep what they own and still
subscribe to, the rest goes one by one (topics with the fewest candidate members
first) to the least loaded candidate, then partitions move from a member to one
with two or more fewer partitions until none can — back to its owner of an older
generation when that helps, and undoing an earlier move of the same topic between
the same two members rather than making a new one.

The eager ``sticky`` assignor carries owned partitions and generation in its user
data (:func:`~strand.consumer.assignors.base.encode_member_data`), as Kafka's does.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from strand.client.structs import TopicPartition
from strand.consumer.assignors.base import (
    DEFAULT_GENERATION,
    MemberData,
    PartitionAssignor,
    Subscription,
    UserDataError,
    decode_member_data,
    encode_member_data,
    subscribed_partitions,
)

__all__ = ["AbstractStickyAssignor", "Ownership", "StickyAssignor", "resolve_ownership"]

log = logging.getLogger(__name__)


@dataclass
class Ownership:
    """Who owned what before this rebalance, once conflicting claims are settled."""

    # member -> the partitions it validly owns (existing, subscribed by someone), sorted
    owned: dict[str, list[TopicPartition]]
    # partitions claimed by two or more members in the same, highest, generation
    contested: set[TopicPartition] = field(default_factory=set)
    # partition -> its claimant of the highest generation below the group's highest
    # (Kafka's prevAssignment: where a partition goes back to when balance allows)
    previous: dict[TopicPartition, str] = field(default_factory=dict)

    def owners(self) -> dict[TopicPartition, str]:
        return {tp: member for member, tps in self.owned.items() for tp in tps}


def resolve_ownership(
    partitions_per_topic: Mapping[str, int], claims: Mapping[str, MemberData]
) -> Ownership:
    """Settle the members' claims: claims on partitions that do not exist (in
    ``partitions_per_topic``) are ignored; of two claims on one partition the higher
    generation wins; equal highest generations leave the partition ``contested``."""

    def exists(tp: TopicPartition) -> bool:
        return 0 <= tp.partition < partitions_per_topic.get(tp.topic, 0)

    best: dict[TopicPartition, tuple[int, list[str]]] = {}
    for member in sorted(claims):
        generation = claims[member].generation
        for tp in sorted(set(claims[member].partitions)):
            if not exists(tp):
                continue
            current = best.get(tp)
            if current is None or generation > current[0]:
                best[tp] = (generation, [member])
            elif generation == current[0]:
                current[1].append(member)
    ownership = Ownership(owned={member: [] for member in claims})
    for tp, (generation, holders) in sorted(best.items()):
        if len(holders) == 1:
            ownership.owned[holders[0]].append(tp)
        else:
            log.warning("members %s all claim %s in generation %d: none of them keeps it",
                        holders, tp, generation)
            ownership.contested.add(tp)
    max_generation = max((d.generation for d in claims.values()), default=DEFAULT_GENERATION)
    previous_generation: dict[TopicPartition, int] = {}
    for member in sorted(claims):
        data = claims[member]
        if data.generation >= max_generation:
            continue
        for tp in set(data.partitions):
            if exists(tp) and data.generation > previous_generation.get(tp, DEFAULT_GENERATION - 1):
                previous_generation[tp] = data.generation
                ownership.previous[tp] = member
    return ownership


def _constrained(
    counts: Mapping[str, int], ownership: Ownership
) -> dict[str, list[TopicPartition]]:
    """Kafka's ConstrainedAssignmentBuilder: every member subscribes to every topic."""
    members = sorted(ownership.owned)
    min_quota, expected_over = divmod(sum(counts.values()), len(members))
    max_quota = min_quota + (1 if expected_over else 0)
    current_over = 0
    assignment: dict[str, list[TopicPartition]] = {m: [] for m in members}
    under: list[str] = []  # members below min_quota
    exact: list[str] = []  # members at min_quota that may still take one more
    for member in members:
        owned = sorted(ownership.owned[member], key=lambda tp: (tp.partition, tp.topic))
        if len(owned) < min_quota:
            keep = owned
            under.append(member)
        elif len(owned) >= max_quota and current_over < expected_over:
            keep = owned[:max_quota]
            current_over += 1
            if current_over == expected_over:
                exact.clear()
        else:
            keep = owned[:min_quota]
            if current_over < expected_over:
                exact.append(member)
        assignment[member] += keep
    taken = {tp for tps in assignment.values() for tp in tps}
    unassigned = [tp for topic, count in counts.items()
                  for tp in (TopicPartition(topic, p) for p in range(count)) if tp not in taken]
    at_min = deque(exact)
    i = 0  # Kafka's iterator over the under-quota members, restarted when it runs out
    for tp in unassigned:
        from_under = True
        if i < len(under):
            member = under[i]
        elif under:
            i, member = 0, under[0]
        elif at_min:
            member, from_under = at_min.popleft(), False
        else:
            raise AssertionError(f"sticky assignor: no member left for {tp}")
        assignment[member].append(tp)
        count = len(assignment[member])
        if from_under and count == min_quota:
            under.pop(i)
            at_min.append(member)
        else:
            i += from_under
    return assignment


class _Movements:
    """Kafka's PartitionMovements, reduced to what it is used for: when a partition of
    a topic must go from A to B and one of that topic went from B to A earlier in this
    rebalance, send that one back instead, so neither moves."""

    def __init__(self) -> None:
        self._origin: dict[TopicPartition, str] = {}  # moved partition -> its owner before
        self._by_pair: dict[tuple[str, str, str], set[TopicPartition]] = {}

    def pick(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        back = self._by_pair.get((tp.topic, new, old))
        return min(back) if back else tp

    def record(self, tp: TopicPartition, old: str, new: str) -> None:
        origin = self._origin.pop(tp, old)
        if origin != old:
            pair = self._by_pair[(tp.topic, origin, old)]
            pair.discard(tp)
            if not pair:
                del self._by_pair[(tp.topic, origin, old)]
        if origin != new:
            self._origin[tp] = origin
            self._by_pair.setdefault((tp.topic, origin, new), set()).add(tp)


class _General:
    """Kafka's GeneralAssignmentBuilder: members subscribe to different topics."""

    def __init__(self, counts: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                 ownership: Ownership) -> None:
        members = sorted(subscriptions)
        self.topics_of = {m: frozenset(t for t in subscriptions[m].topics if t in counts)
                          for m in members}
        self.candidates = {t: [m for m in members if t in self.topics_of[m]] for t in counts}
        self.assignment: dict[str, list[TopicPartition]] = {m: [] for m in members}
        self.owner: dict[TopicPartition, str] = {}
        self.revocation_required = False
        for member in members:
            for tp in ownership.owned[member]:
                if tp.topic in self.topics_of[member]:
                    self._place(tp, member)
                else:  # the member unsubscribed from the topic
                    self.revocation_required = True
        self.previous = {tp: m for tp, m in ownership.previous.items()
                         if tp.topic in self.topics_of[m]}
        order = sorted(counts, key=lambda t: (len(self.candidates[t]), t))
        self.all_partitions = [TopicPartition(t, p) for t in order for p in range(counts[t])]
        self.movements = _Movements()

    def build(self) -> dict[str, list[TopicPartition]]:
        unassigned = [tp for tp in self.all_partitions if tp not in self.owner]
        for tp in unassigned:
            self._place(tp, self._least_loaded(tp.topic))
        movable = [tp for tp in self.all_partitions if len(self.candidates[tp.topic]) > 1]
        if not self.revocation_required:  # first try moving only what was unassigned
            movable_set = set(movable)
            self._rebalance([tp for tp in unassigned if tp in movable_set])
        self._rebalance(movable)
        return self.assignment

    def _load(self, member: str) -> int:
        return len(self.assignment[member])

    def _least_loaded(self, topic: str) -> str:
        return min(self.candidates[topic], key=lambda m: (self._load(m), m))

    def _place(self, tp: TopicPartition, member: str) -> None:
        self.assignment[member].append(tp)
        self.owner[tp] = member

    def _rebalance(self, partitions: Iterable[TopicPartition]) -> None:
        # Every move goes from a member to one with two or more fewer partitions, which
        # lowers the sum of squared loads: this ends, and it ends only when no partition
        # can move that way (Kafka's isBalanced).
        modified = True
        while modified:
            modified = False
            for tp in partitions:
                owner = self.owner[tp]
                previous = self.previous.get(tp)
                if previous is not None and self._load(owner) > self._load(previous) + 1:
                    target = previous
                else:
                    target = self._least_loaded(tp.topic)
                    if self._load(owner) <= self._load(target) + 1:
                        continue
                self._move(self.movements.pick(tp, owner, target), owner, target)
                modified = True

    def _move(self, tp: TopicPartition, old: str, new: str) -> None:
        self.movements.record(tp, old, new)
        self.assignment[old].remove(tp)
        self._place(tp, new)


class AbstractStickyAssignor(PartitionAssignor):
    """The sticky algorithm; subclasses say where a member's :class:`MemberData` is."""

    @abstractmethod
    def member_data(self, subscription: Subscription) -> MemberData:
        """The partitions this member owned and their generation."""

    def sticky_target(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> tuple[dict[str, list[TopicPartition]], Ownership]:
        """The balanced, sticky assignment, and the ownership it started from."""
        counts = subscribed_partitions(partitions_per_topic, subscriptions)
        ownership = resolve_ownership(
            counts, {m: self.member_data(s) for m, s in subscriptions.items()})
        if len({frozenset(s.topics) for s in subscriptions.values()}) == 1:
            return _constrained(counts, ownership), ownership
        return _General(counts, subscriptions, ownership).build(), ownership

    def _assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        return self.sticky_target(partitions_per_topic, subscriptions)[0]


class StickyAssignor(AbstractStickyAssignor):
    """``sticky``: eager protocol, owned partitions and generation in the user data."""

    name = "sticky"

    def member_data(self, subscription: Subscription) -> MemberData:
        """The member data in the user data; user data that cannot be decoded counts as
        owning nothing, as in Kafka. Without user data, the subscription's own
        ``owned_partitions`` and ``generation`` (Kafka ignores those for this eager
        assignor: its members send none, having revoked everything before joining)."""
        if not subscription.user_data:
            return MemberData(subscription.owned_partitions, subscription.generation)
        try:
            return decode_member_data(subscription.user_data)
        except UserDataError as e:
            log.warning("ignoring a member's previous assignment: %s", e)
            return MemberData()

    def subscription_user_data(self, owned: Iterable[TopicPartition], generation: int) -> bytes:
        return encode_member_data(MemberData(tuple(owned), generation))
