"""Rack-aware replica placement: which brokers hold each partition, and in what order.

This is a pure function of its inputs, shared by the controller (topic creation,
partition addition) and the kopf operator (computing a placement, detecting drift),
so both get exactly the same answer for the same cluster: no randomness, no
``hash()`` (which is salted per process), no clock.

Rules it guarantees (``tests/unit/controller/test_placement.py`` checks them)
--------------------------------------------------------------------------------------
1. The replicas of a partition are on distinct brokers.
2. Rack spread: with ``R`` racks and replication factor ``RF``, when ``R >= RF`` every
   replica of a partition is on a different rack. When ``R < RF`` the replicas are
   spread as evenly over the racks as the rack sizes allow ("water-filling"): let
   ``t`` be the smallest level with ``sum(min(size_r, t)) >= RF``; then every rack
   holds between ``min(size_r, t - 1)`` and ``min(size_r, t)`` replicas of the
   partition. When every rack has at least ``ceil(RF / R)`` brokers this is exactly
   "no rack holds more than ``ceil(RF / R)`` replicas and none fewer than
   ``floor(RF / R)``"; a rack too small for its share holds all its brokers and the
   others make up the rest as evenly as possible.
3. Preferred leaders (the first replica) are balanced: over the whole topic,
   including ``existing``, leader counts per broker differ by at most one, provided
   the existing partitions were within one already (true for anything this function
   produced on the same brokers). In general the spread never grows, and it shrinks
   to one as partitions are added, e.g. after brokers joined the cluster.
4. Replica counts per broker are as even as rules 1-3 allow: given the leaders, no
   other placement of the new partitions' followers has a smaller maximum or a
   larger minimum (proof sketch in ``_rebalance``; on tiny clusters the tests confirm
   by brute force that not even a different choice of leaders does better). For a new
   topic on equal racks (or no racks) the counts come out within one of each other
   (checked over a grid and random shapes, not proven); with unequal racks the small
   racks necessarily carry more (a lone broker in its own rack holds a replica of
   every partition when ``R <= RF``).

Why not Kafka's algorithm
-------------------------
Kafka's ZooKeeper-era ``AdminUtils.assignReplicasToBrokers`` (KIP-36) walks a
rack-alternated broker list with a shifting stride, skipping brokers whose rack
already holds a replica until every rack does. That gives distinct racks when
``R >= RF`` and round-robin leaders, but once every rack is used the remaining
replicas go wherever the stride lands: racks of sizes 2 and 3 with ``RF = 4`` get
partitions with three replicas in one rack and one in the other. KRaft's
``StripedReplicaPlacer`` round-robins over racks and then over the brokers inside
each, so the brokers of a small rack lead more partitions than those of a large rack.
The stride also lets replica counts drift two apart on equal racks (two racks of
four, ``RF = 2``, 60 partitions). So Strand uses a different algorithm, in three
steps, against load counters that start from ``existing``:

1. Greedy choice, one partition at a time.
   *Leader*: the broker with the fewest preferred leaders (then the fewest replicas,
   then a fixed tie-break order). Every broker is an admissible leader for every
   partition: if ``t >= 2`` every rack must get at least one replica anyway, and if
   ``t == 1`` any ``RF`` distinct racks including the leader's will do. So the leader
   can always be a least-led broker, which is exactly rule 3: adding one to a minimum
   of counts that are within one keeps them within one (and never widens a wider
   spread).
   *Followers*, one at a time: among brokers not yet chosen whose rack is below its
   upper bound ``min(size_r, t)``, the one with the fewest replicas (then the most
   leaders, since the least-led brokers will soon get leaders and so replicas anyway;
   then the fewest partitions shared with the brokers already chosen, so that a
   failed broker's load spreads over many others; then the tie-break order). When the
   slots left equal the replicas still owed to racks below their lower bound
   ``min(size_r, t - 1)``, only such racks are eligible. This keeps rule 2
   satisfiable at every step: the lower bounds add up to less than ``RF`` (by the
   minimality of ``t``) and the upper bounds to at least ``RF``, so an eligible
   broker always exists, and at the end every rack is within its bounds.
2. Rebalance (``_rebalance``): a greedy choice cannot undo an earlier one, so with the
   leaders fixed, augmenting paths move followers of the new partitions from heavy
   to light brokers until no improvement is possible; this makes rule 4 exact.
3. Follower order: position ``k`` (the next preferred leader if the ones before it
   are gone) goes to the follower that has held position ``k`` least often, then
   pairs of followers swap places while that evens out the position counts, so
   failover leadership is spread too (a best effort, not a guarantee).

The fixed tie-break order is Kafka's rack-alternated list (racks sorted by name,
brokers by id, taking one broker from each rack in turn) rotated by ``start_index``;
callers pass :func:`start_index_for` of the topic name so that different topics do
not all start on the same broker. The greedy step costs
``O(partitions * RF * brokers)``, each augmenting path search
``O(partitions * (RF + racks) + brokers)``; 100 000 partitions on 96 brokers take
about ten seconds, ordinary topics milliseconds.

Racks: either every broker has a rack or none does, as in Kafka (whose rack-aware
mode refuses a mix). With no racks each broker is its own failure domain, so rule 2
reduces to rule 1. A mix is refused with :class:`PlacementError` because it has no
good answer: counting each rack-less broker as its own rack would let two replicas
share a real failure domain without anyone having asked for that.
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from strand.errors import ErrorCode, InvalidPartitionsError, InvalidReplicationFactorError

__all__ = [
    "Broker",
    "PartitionCountError",
    "PlacementError",
    "assign_replicas",
    "change_replication_factor",
    "rack_bounds",
    "start_index_for",
]


class PlacementError(InvalidReplicationFactorError):
    """The brokers cannot hold the requested replicas (bad factor, count or rack mix)."""


class PartitionCountError(PlacementError, InvalidPartitionsError):
    """A partition count placement cannot serve; carries Kafka's INVALID_PARTITIONS code."""

    code = ErrorCode.INVALID_PARTITIONS


@dataclass(frozen=True, slots=True)
class Broker:
    """A storage node as placement sees it: its id and its failure domain (rack/zone)."""

    id: int
    rack: str | None


def start_index_for(topic: str) -> int:
    """A stable per-topic start offset for :func:`assign_replicas`.

    CRC-32 of the UTF-8 name, so every process (controller, operator, tests) derives
    the same value; Python's ``hash()`` of a string is salted per process.
    """
    return zlib.crc32(topic.encode("utf-8"))


def rack_bounds(rack_sizes: Sequence[int], replication_factor: int) -> list[tuple[int, int]]:
    """Per rack, the (min, max) replicas one partition may put there (rule 2).

    ``t`` is the smallest level with ``sum(min(size, t)) >= RF``; each rack then holds
    between ``min(size, t - 1)`` and ``min(size, t)``. The per-rack counts that add
    up to ``RF`` within these bounds are exactly the most even spreads the rack sizes
    allow (no rack above the smallest possible maximum ``t``, and no rack left below
    ``t - 1`` while it has brokers to spare), and there always is one, because the
    lower bounds add up to less than ``RF`` (``t`` is the smallest level) and the upper
    bounds to at least ``RF``. Exposed so that the operator can check placements.
    """
    if replication_factor < 1 or replication_factor > sum(rack_sizes):
        raise PlacementError(
            f"replication factor {replication_factor} cannot be spread over "
            f"{sum(rack_sizes)} brokers"
        )
    level = max(1, math.ceil(replication_factor / len(rack_sizes)))
    while sum(min(size, level) for size in rack_sizes) < replication_factor:
        level += 1
    return [(min(size, level - 1), min(size, level)) for size in rack_sizes]


def assign_replicas(
    brokers: Sequence[Broker],
    partitions: int,
    replication_factor: int,
    existing: Mapping[int, Sequence[int]] | None = None,
    *,
    start_index: int | None = None,
) -> dict[int, list[int]]:
    """Place the partitions of one topic that ``existing`` does not already place.

    ``partitions`` is the topic's total partition count; the result maps each
    partition id in ``range(partitions)`` missing from ``existing`` to its ordered
    replica list (first = preferred leader). Existing assignments are never changed,
    but their leader and replica counts are the starting load, so that adding
    partitions keeps the whole topic balanced. Replicas in ``existing`` on brokers not
    in ``brokers`` (decommissioned ones) are ignored for balance.

    ``start_index`` rotates the tie-break order (default 0); pass
    :func:`start_index_for` of the topic name. The same inputs always give the same
    output. See the module docstring for the rules and why the algorithm meets them.

    Raises :class:`PlacementError` (INVALID_REPLICATION_FACTOR) for a replication
    factor below one or above the broker count, duplicate broker ids, or brokers that
    mix racks and no racks; :class:`PartitionCountError` (INVALID_PARTITIONS) for a
    partition count below one or one that would drop an existing partition.
    """
    existing = {} if existing is None else existing
    _validate(brokers, partitions, replication_factor, existing)
    placer = _Placer(brokers, replication_factor, start_index or 0)
    for replicas in existing.values():
        placer.record(replicas)
    return placer.place([p for p in range(partitions) if p not in existing])


def change_replication_factor(
    brokers: Sequence[Broker],
    assignment: Mapping[int, Sequence[int]],
    replication_factor: int,
    *,
    start_index: int | None = None,
) -> dict[int, list[int]]:
    """The targets of a replication-factor change (KIP-455 reassignment) of one topic.

    ``assignment`` is the topic's current placement (partition -> ordered replicas);
    the result maps every partition to its target list. The preferred leader (first
    replica) never changes and replicas are only added or only removed, so the change
    copies no more data than it must. Added replicas go, partition by partition, to
    brokers whose rack is below its upper bound for the new factor (filling racks
    below their lower bound first, see :func:`rack_bounds`), the least loaded first;
    removed replicas are taken from racks above their bound, then from replicas on
    brokers not in ``brokers``, then from the most loaded brokers. Rack bounds hold
    for placements this module produced; for others (an adopted topic) they are a best
    effort. Replica counts per broker come out within two of each other when
    replicas are added on equal racks (``tests/unit/controller/
    test_replication_factor_change.py``); removals have little choice, since the
    leader stays and the rack bounds often name the replica that goes. Same inputs,
    same output. Raises :class:`PlacementError` like
    :func:`assign_replicas`.
    """
    partitions = max(assignment, default=-1) + 1
    _validate(brokers, max(partitions, 1), replication_factor, assignment)
    placer = _Placer(brokers, replication_factor, start_index or 0)
    rank = {b: i for i, b in enumerate(placer.order)}
    for replicas in assignment.values():
        placer.record(replicas)
    targets: dict[int, list[int]] = {}
    for partition in sorted(assignment):
        replicas = list(assignment[partition])
        while len(replicas) > replication_factor:
            leaving = _removable(placer, replicas, rank)
            replicas.remove(leaving)
            if leaving in placer.replicas:
                placer.replicas[leaving] -= 1
        while len(replicas) < replication_factor:
            joining = _addable(placer, replicas, rank)
            replicas.append(joining)
            placer.replicas[joining] += 1
        targets[partition] = replicas
    _even_out(placer, assignment, targets)
    return targets


def _even_out(placer: _Placer, before: Mapping[int, Sequence[int]],
              targets: dict[int, list[int]]) -> None:
    """Swap a replica the change touches from a broker with the most replicas to one
    with at least two fewer while the rack bounds allow: a replica that was to be
    added moves to the lighter broker, or one that was to be removed stays and the
    heavier broker's is removed instead. Each swap lowers the sum of squared counts,
    so this ends; the greedy pass alone can leave brokers two apart."""
    loads = placer.replicas
    improved = True
    while improved:
        improved = False
        for partition, target in targets.items():
            old = before[partition]
            growing = len(target) > len(old)
            count = _rack_counts(placer, target)
            movable = [b for b in target[1:] if (b not in old) == growing and b in loads]
            spare = ([b for b in placer.order if b not in target] if growing
                     else [b for b in old if b not in target and b in loads])
            for heavy, light in itertools.product(movable, spare):
                if loads[heavy] - loads[light] < 2:
                    continue
                rh, rl = placer.rack_of[heavy], placer.rack_of[light]
                if rh != rl and (count[rh] - 1 < placer.bounds[rh][0]
                                 or count[rl] + 1 > placer.bounds[rl][1]):
                    continue
                target[target.index(heavy)] = light
                loads[heavy] -= 1
                loads[light] += 1
                improved = True
                break


def _rack_counts(placer: _Placer, replicas: Sequence[int]) -> list[int]:
    count = [0] * len(placer.bounds)
    for broker in replicas:
        if broker in placer.rack_of:
            count[placer.rack_of[broker]] += 1
    return count


def _removable(placer: _Placer, replicas: Sequence[int], rank: Mapping[int, int]) -> int:
    """The follower to drop: over its rack's upper bound, else on a broker that is
    gone, else one whose rack stays at or above its lower bound, the most loaded."""
    count = _rack_counts(placer, replicas)

    def key(broker: int) -> tuple[int, int, int, int, int]:
        if broker not in placer.rack_of:
            return (0, 1, 0, 0, 0)
        rack = placer.rack_of[broker]
        low, high = placer.bounds[rack]
        return (int(count[rack] > high), 0, int(count[rack] > low), placer.replicas[broker],
                rank[broker])

    return max(replicas[1:], key=key)


def _addable(placer: _Placer, replicas: Sequence[int], rank: Mapping[int, int]) -> int:
    """The broker to add: one whose rack has room (racks owed a replica first), least
    loaded; any broker not yet a replica when the current placement leaves no such one."""
    count = _rack_counts(placer, replicas)
    owed = sum(max(0, low - have) for (low, _), have in zip(placer.bounds, count, strict=True))
    must_fill = owed >= placer.rf - len(replicas)
    free = [b for b in placer.order if b not in replicas]
    candidates = [b for b in free
                  if count[placer.rack_of[b]] < placer.bounds[placer.rack_of[b]][1]
                  and not (must_fill
                           and count[placer.rack_of[b]] >= placer.bounds[placer.rack_of[b]][0])]
    return min(candidates or free, key=lambda b: (placer.replicas[b], rank[b]))


def _validate(
    brokers: Sequence[Broker],
    partitions: int,
    replication_factor: int,
    existing: Mapping[int, Sequence[int]],
) -> None:
    if replication_factor < 1:
        raise PlacementError(f"replication factor must be at least 1, got {replication_factor}")
    if replication_factor > len(brokers):
        raise PlacementError(
            f"replication factor {replication_factor} is larger than the number of "
            f"available brokers ({len(brokers)})"
        )
    if partitions < 1:
        raise PartitionCountError(f"number of partitions must be at least 1, got {partitions}")
    duplicates = sorted(i for i, n in Counter(b.id for b in brokers).items() if n > 1)
    if duplicates:
        raise PlacementError(f"duplicate broker ids: {duplicates}")
    without_rack = sorted(broker.id for broker in brokers if broker.rack is None)
    if without_rack and len(without_rack) < len(brokers):
        raise PlacementError(
            "either every broker must have a rack or none may; brokers without a rack: "
            f"{without_rack}"
        )
    outside = sorted(p for p in existing if not 0 <= p < partitions)
    if outside:
        raise PartitionCountError(
            f"existing partitions {outside} are outside 0..{partitions - 1}; "
            f"the partition count of a topic can only grow"
        )


class _Placer:
    """Load counters for one topic and the three steps that place its new partitions."""

    def __init__(self, brokers: Sequence[Broker], replication_factor: int, start: int) -> None:
        self.rf = replication_factor
        # Failure domains: named racks, or one per broker when nobody has a rack.
        by_rack: dict[str, list[int]] = {}
        for broker in brokers:
            if broker.rack is not None:
                by_rack.setdefault(broker.rack, []).append(broker.id)
        if by_rack:
            racks = [sorted(by_rack[name]) for name in sorted(by_rack)]
        else:
            racks = [[broker_id] for broker_id in sorted(b.id for b in brokers)]
        self.racks = racks
        self.rack_of = {b: r for r, members in enumerate(racks) for b in members}
        self.bounds = rack_bounds([len(members) for members in racks], replication_factor)
        # Kafka's rack-alternated list, rotated per topic: the fixed tie-break order.
        alternated = [
            members[i]
            for i in range(max(len(members) for members in racks))
            for members in racks
            if i < len(members)
        ]
        shift = start % len(alternated)
        self.order = alternated[shift:] + alternated[:shift]
        self.leaders = dict.fromkeys(self.order, 0)
        self.replicas = dict.fromkeys(self.order, 0)
        self.at_position = [dict.fromkeys(self.order, 0) for _ in range(replication_factor)]
        self.shared = {b: dict.fromkeys(self.order, 0) for b in self.order}

    def record(self, replicas: Sequence[int]) -> None:
        """Count an existing partition into the loads (brokers we do not know are skipped)."""
        known = [b for b in replicas if b in self.replicas]
        if replicas and replicas[0] in self.leaders:
            self.leaders[replicas[0]] += 1
        for position, broker in enumerate(replicas):
            if broker in self.replicas:
                self.replicas[broker] += 1
                if position < self.rf:
                    self.at_position[position][broker] += 1
        self._share(known)

    def place(self, partitions: Sequence[int]) -> dict[int, list[int]]:
        """Place ``partitions`` in order: choose greedily, rebalance, then order followers."""
        chosen = {p: self._choose() for p in partitions}
        self._rebalance(chosen)
        ordered = {p: self._order(replicas) for p, replicas in chosen.items()}
        self._balance_positions(ordered)
        return ordered

    def _share(self, members: Sequence[int]) -> None:
        for a in members:
            for b in members:
                if a != b:
                    self.shared[a][b] += 1

    def _choose(self) -> list[int]:
        """Pick the next partition's leader and (unordered) followers, and count them."""
        leader = min(self.order, key=lambda b: (self.leaders[b], self.replicas[b]))
        chosen = [leader]
        count = [0] * len(self.bounds)
        count[self.rack_of[leader]] = 1
        owed = sum(max(0, low - have) for (low, _), have in zip(self.bounds, count, strict=True))
        for slot in range(1, self.rf):
            must_fill = owed == self.rf - slot
            candidates = [
                b
                for b in self.order
                if b not in chosen
                and count[self.rack_of[b]] < self.bounds[self.rack_of[b]][1]
                and not (must_fill and count[self.rack_of[b]] >= self.bounds[self.rack_of[b]][0])
            ]
            # Fewest replicas first. Among equals prefer brokers that already lead more:
            # the least-led ones are about to receive leaders (and so replicas) anyway.
            # Then spread co-location; min() keeps the first of equal keys (self.order).
            follower = min(
                candidates,
                key=lambda b: (
                    self.replicas[b],
                    -self.leaders[b],
                    sum(self.shared[c][b] for c in chosen),
                ),
            )
            rack = self.rack_of[follower]
            if count[rack] < self.bounds[rack][0]:
                owed -= 1
            count[rack] += 1
            chosen.append(follower)
        self.leaders[leader] += 1
        for broker in chosen:
            self.replicas[broker] += 1
        self._share(chosen)
        return chosen

    def _rebalance(self, chosen: dict[int, list[int]]) -> None:
        """Move followers of the new partitions until replica counts are as even as possible.

        The greedy step must put each leader on a least-led broker even when that
        broker holds more replicas, and a greedy choice cannot undo an earlier one, so
        two brokers can end up two or more replicas apart when a better placement
        exists. With the leaders fixed, placing followers is a flow problem: each new
        partition sends ``RF - 1`` units through per-rack slots (bounded by
        :func:`rack_bounds`, minus the leader's own rack) to distinct brokers. An
        augmenting path in its residual graph from a broker with ``n`` replicas to one
        with ``n - 2`` or fewer is a chain of follower moves (possibly switching a
        partition's rack within its bounds) that shifts one replica from the first to
        the last and leaves everyone in between unchanged; it strictly lowers the sum
        of squared replica counts, so the loop ends. When no such path exists the
        counts are optimal for that convex cost, which on this kind of flow polytope
        (an M-convex set; Frank and Murota, "Discrete decreasing minimization") means
        decreasingly minimal: the smallest possible maximum, then the fewest brokers
        at it, and so on, and the largest possible minimum, for the chosen leaders.
        """
        follows: dict[int, dict[int, None]] = {b: {} for b in self.order}
        for partition, replicas in chosen.items():
            for broker in replicas[1:]:
                follows[broker][partition] = None
        while True:
            path = self._improving_path(chosen, follows)
            if path is None:
                return
            for partition, leaving, joining in path:
                replicas = chosen[partition]
                if leaving is not None:
                    replicas.remove(leaving)
                    del follows[leaving][partition]
                if joining is not None:
                    replicas.append(joining)
                    follows[joining][partition] = None
            source, target = path[0][1], path[-1][2]
            assert source is not None and target is not None
            self.replicas[source] -= 1
            self.replicas[target] += 1

    def _improving_path(
        self, chosen: dict[int, list[int]], follows: dict[int, dict[int, None]]
    ) -> list[tuple[int, int | None, int | None]] | None:
        """Search the residual graph for a path from a heavy to a much lighter broker.

        Returns the path as ``(partition, broker leaving it, broker joining it)`` steps,
        or None when there is none. Sources are tried heaviest first and share one
        visited set: whatever a lighter source reaches that a heavier one already
        reached cannot give it a better target.
        """
        rank = {b: i for i, b in enumerate(self.order)}
        lightest = min(self.replicas.values())
        Node = tuple[int, ...]
        # Node kinds: (0, broker), (1, partition, rack) a rack slot, (2, partition).
        parent: dict[Node, Node | None] = {}
        unvisited = [list(members) for members in self.racks]
        for source in sorted(self.order, key=lambda b: (-self.replicas[b], rank[b])):
            load = self.replicas[source]
            if load - lightest < 2:
                return None
            if (0, source) in parent:
                continue
            parent[(0, source)] = None
            queue: deque[Node] = deque([(0, source)])
            reached: list[int] = []
            while queue:
                node = queue.popleft()
                successors: list[Node] = []
                if node[0] == 0:
                    broker = node[1]
                    successors = [(1, p, self.rack_of[broker]) for p in follows[broker]]
                elif node[0] == 1:
                    _, partition, rack = node
                    members = chosen[partition]
                    joinable = [
                        b for b in unvisited[rack] if b not in members and (0, b) not in parent
                    ]
                    unvisited[rack] = [b for b in unvisited[rack] if b in members]
                    successors = [(0, b) for b in joinable]
                    reached.extend(joinable)
                    low, _ = self._slot_bounds(members, rack)
                    if self._in_rack(members, rack) > low:
                        successors.append((2, partition))
                else:
                    partition = node[1]
                    members = chosen[partition]
                    successors = [
                        (1, partition, rack)
                        for rack in range(len(self.racks))
                        if self._in_rack(members, rack) < self._slot_bounds(members, rack)[1]
                    ]
                for nxt in successors:
                    if nxt not in parent:
                        parent[nxt] = node
                        queue.append(nxt)
            if not reached:
                continue
            target = min(reached, key=lambda b: (self.replicas[b], rank[b]))
            if self.replicas[target] > load - 2:
                continue
            steps: list[tuple[int, int | None, int | None]] = []
            node = (0, target)
            while (up := parent[node]) is not None:
                if node[0] == 0 and up[0] == 1:
                    steps.append((up[1], None, node[1]))
                elif node[0] == 1 and up[0] == 0:
                    steps.append((node[1], up[1], None))
                node = up
            return steps[::-1]
        return None

    def _in_rack(self, members: list[int], rack: int) -> int:
        """Followers of a partition (its leader excluded) in ``rack``."""
        return sum(1 for b in members[1:] if self.rack_of[b] == rack)

    def _slot_bounds(self, members: list[int], rack: int) -> tuple[int, int]:
        """How many followers of a partition ``rack`` may hold, given where its leader is."""
        low, high = self.bounds[rack]
        if self.rack_of[members[0]] == rack:
            return max(0, low - 1), high - 1
        return low, high

    def _order(self, replicas: list[int]) -> list[int]:
        """Order the followers: position k goes to whoever held position k least often."""
        ordered = [replicas[0]]
        followers = replicas[1:]
        for position in range(1, self.rf):
            nxt = min(followers, key=lambda b: self.at_position[position][b])
            followers.remove(nxt)
            ordered.append(nxt)
        for position, broker in enumerate(ordered):
            self.at_position[position][broker] += 1
        return ordered

    def _balance_positions(self, ordered: dict[int, list[int]]) -> None:
        """Swap two followers of a new partition while that evens out position counts.

        A swap of ``x`` at position ``i`` with ``y`` at position ``j`` changes the sum
        of squared position counts by ``2 * (b + c - a - d) + 4`` where ``a, b`` are
        how often ``x, y`` hold position ``i`` and ``c, d`` position ``j``; swapping
        only when that is negative makes the loop finish.
        """
        at = self.at_position
        improved = True
        while improved:
            improved = False
            for replicas in ordered.values():
                for i, j in itertools.combinations(range(1, len(replicas)), 2):
                    x, y = replicas[i], replicas[j]
                    if at[i][x] + at[j][y] - at[i][y] - at[j][x] >= 3:
                        replicas[i], replicas[j] = y, x
                        at[i][x] -= 1
                        at[i][y] += 1
                        at[j][y] -= 1
                        at[j][x] += 1
                        improved = True
