"""Rack-aware replica placement: the acceptance rules, checked three ways.

* hypothesis over random cluster shapes (1-5 racks of 1-4 brokers, or no racks),
  replication factors 1-3 and 1-200 partitions, fresh and when adding partitions;
* an exhaustive grid of shapes, so the acceptance statement is covered the same way
  on every run;
* brute force on tiny clusters: no placement at all that obeys the rules has a
  smaller maximum or a larger minimum replica count per broker.

The rules are checked by an oracle written independently of the implementation
(it recomputes the most even per-rack spread itself instead of calling
``rack_bounds``).
"""

from __future__ import annotations

import copy
import itertools
import math
import random
from collections import Counter
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strand.cluster.placement import (
    Broker,
    PartitionCountError,
    PlacementError,
    assign_replicas,
    rack_bounds,
    start_index_for,
)
from strand.errors import (
    ErrorCode,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    StrandError,
)

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------- helpers and oracle


def cluster(rack_sizes: Sequence[int] | None, brokers: int = 0) -> list[Broker]:
    """Brokers with ids that are neither contiguous nor in rack order.

    ``rack_sizes=None`` gives ``brokers`` brokers without racks.
    """
    if rack_sizes is None:
        return [Broker(10 + 3 * i, None) for i in range(brokers)]
    out = []
    for rack, size in enumerate(rack_sizes):
        for i in range(size):
            out.append(Broker(1000 - 7 * (rack * 10 + i), f"zone-{chr(ord('a') + rack)}"))
    return out


def domains(brokers: Sequence[Broker]) -> dict[int, str]:
    """Failure domain of each broker: its rack, or itself when nobody has a rack."""
    return {b.id: b.rack if b.rack is not None else f"broker-{b.id}" for b in brokers}


def spread_bounds(sizes: Mapping[str, int], rf: int) -> dict[str, tuple[int, int]]:
    """The most even spread of ``rf`` replicas over racks of the given sizes.

    Water-filling: the smallest level ``t`` whose capped sizes hold ``rf``; each rack
    then holds between ``min(size, t-1)`` and ``min(size, t)``.
    """
    level = 1
    while sum(min(s, level) for s in sizes.values()) < rf:
        level += 1
    return {r: (min(s, level - 1), min(s, level)) for r, s in sizes.items()}


def spread(counts: Mapping[int, int], brokers: Sequence[Broker]) -> int:
    values = [counts.get(b.id, 0) for b in brokers]
    return max(values) - min(values)


def check_partition(brokers: Sequence[Broker], rf: int, replicas: Sequence[int]) -> None:
    """Rules 1 and 2 for one partition."""
    rack_of = domains(brokers)
    sizes = Counter(rack_of.values())
    assert len(replicas) == rf
    assert len(set(replicas)) == rf, f"replicas share a broker: {replicas}"
    assert set(replicas) <= set(rack_of), f"unknown broker in {replicas}"
    per_rack = Counter(rack_of[b] for b in replicas)
    if len(sizes) >= rf:
        assert len(per_rack) == rf, f"{replicas} share a rack although {len(sizes)} exist"
    else:
        # The statement of the brief: no rack holds more than ceil(RF/racks), whenever
        # the rack sizes make that possible at all ...
        cap = math.ceil(rf / len(sizes))
        if sum(min(s, cap) for s in sizes.values()) >= rf:
            assert max(per_rack.values()) <= cap, f"{replicas}: {dict(per_rack)}"
    # ... and in general the water-filling bounds (every rack gets its share).
    for rack, (low, high) in spread_bounds(sizes, rf).items():
        assert low <= per_rack[rack] <= high, f"rack {rack} holds {per_rack[rack]} of {replicas}"


def check_topic(
    brokers: Sequence[Broker],
    partitions: int,
    rf: int,
    existing: Mapping[int, Sequence[int]],
    result: Mapping[int, Sequence[int]],
    *,
    max_leader_spread: int = 1,
) -> dict[int, list[int]]:
    """Every rule over the whole topic; returns existing + new as one mapping."""
    assert set(result) == set(range(partitions)) - set(existing)
    for replicas in result.values():
        check_partition(brokers, rf, replicas)
    topic = {**{p: list(r) for p, r in existing.items()}, **{p: list(r) for p, r in result.items()}}
    leaders = Counter(r[0] for r in topic.values())
    assert spread(leaders, brokers) <= max_leader_spread, f"leaders per broker: {leaders}"
    return topic


def no_single_move_helps(
    brokers: Sequence[Broker], rf: int, result: Mapping[int, list[int]], loads: Counter[int]
) -> bool:
    """No follower of a new partition can move to a broker with two fewer replicas.

    A weak, implementation-independent local optimality check for the property tests
    (the brute-force test below checks global optimality on tiny clusters).
    """
    rack_of = domains(brokers)
    sizes = Counter(rack_of.values())
    for replicas in result.values():
        for follower in replicas[1:]:
            for b in brokers:
                if b.id in replicas or loads[follower] - loads[b.id] < 2:
                    continue
                moved = [b.id if x == follower else x for x in replicas]
                per_rack = Counter(rack_of[x] for x in moved)
                bounds = spread_bounds(sizes, rf)
                if all(lo <= per_rack[r] <= hi for r, (lo, hi) in bounds.items()):
                    return False
    return True


# ---------------------------------------------------------------- hypothesis


@st.composite
def clusters(draw: st.DrawFn) -> list[Broker]:
    """1-5 racks of 1-4 brokers (uneven), or 1-12 brokers without racks, shuffled."""
    if draw(st.integers(0, 4)) == 0:
        count = draw(st.integers(1, 12))
        racks: list[str | None] = [None] * count
    else:
        sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=5))
        names = draw(st.permutations([f"rack-{c}" for c in "pqrst"]))
        racks = [names[r] for r, size in enumerate(sizes) for _ in range(size)]
    ids = draw(
        st.lists(st.integers(0, 5000), min_size=len(racks), max_size=len(racks), unique=True)
    )
    return draw(st.permutations([Broker(i, r) for i, r in zip(ids, racks, strict=True)]))


@PROPS
@given(
    brokers=clusters(),
    data=st.data(),
    partitions=st.integers(1, 200),
    start=st.none() | st.integers(0, 2**32),
)
def test_fresh_topic_obeys_every_rule(
    brokers: list[Broker], data: st.DataObject, partitions: int, start: int | None
) -> None:
    rf = data.draw(st.integers(1, min(3, len(brokers))), label="rf")
    result = assign_replicas(brokers, partitions, rf, start_index=start)
    topic = check_topic(brokers, partitions, rf, {}, result)
    loads = Counter(b for r in topic.values() for b in r)
    assert no_single_move_helps(brokers, rf, result, loads)
    rack_sizes = set(Counter(domains(brokers).values()).values())
    if len(rack_sizes) == 1:  # equal racks (or none): replica counts within one
        assert spread(loads, brokers) <= 1, f"replicas per broker: {loads}"
    # Deterministic, and independent of the order the brokers are listed in.
    assert assign_replicas(brokers, partitions, rf, start_index=start) == result
    shuffled = data.draw(st.permutations(brokers), label="shuffled")
    assert assign_replicas(shuffled, partitions, rf, start_index=start) == result


@PROPS
@given(
    brokers=clusters(),
    data=st.data(),
    first=st.integers(1, 120),
    more=st.integers(1, 120),
    start=st.none() | st.integers(0, 2**32),
)
def test_adding_partitions_keeps_existing_and_balance(
    brokers: list[Broker], data: st.DataObject, first: int, more: int, start: int | None
) -> None:
    rf = data.draw(st.integers(1, min(3, len(brokers))), label="rf")
    existing = assign_replicas(brokers, first, rf, start_index=start)
    snapshot = copy.deepcopy(existing)
    added = assign_replicas(brokers, first + more, rf, existing, start_index=start)
    assert existing == snapshot, "the existing assignment was modified"
    assert set(added) == set(range(first, first + more))
    topic = check_topic(brokers, first + more, rf, existing, added)
    loads = Counter(b for r in topic.values() for b in r)
    assert no_single_move_helps(brokers, rf, added, loads)
    assert assign_replicas(brokers, first + more, rf, existing, start_index=start) == added


@PROPS
@given(
    brokers=clusters(),
    data=st.data(),
    first=st.integers(1, 80),
    more=st.integers(1, 120),
)
def test_adding_partitions_after_brokers_joined(
    brokers: list[Broker], data: st.DataObject, first: int, more: int
) -> None:
    """Old partitions on a subset of the brokers: the leader spread only narrows."""
    # New brokers join racks that already exist (or, without racks, anywhere).
    joined = data.draw(st.integers(1, len(brokers)), label="old brokers")
    old = brokers[:joined]
    rf = data.draw(st.integers(1, min(3, len(old))), label="rf")
    existing = assign_replicas(old, first, rf)
    before = spread(Counter(r[0] for r in existing.values()), brokers)
    added = assign_replicas(brokers, first + more, rf, existing)
    check_topic(brokers, first + more, rf, existing, added, max_leader_spread=max(1, before))


# ---------------------------------------------------------------- exhaustive grid

GRID_SHAPES: list[tuple[int, ...] | int] = [
    *(s for r in range(1, 5) for s in itertools.combinations_with_replacement(range(1, 5), r)),
    (1, 1, 1, 1, 1),
    (1, 2, 3, 4, 4),
    (4, 4, 4, 4, 4),
    *range(1, 9),  # an int: that many brokers without racks
]


def _grid_cluster(shape: tuple[int, ...] | int) -> list[Broker]:
    return cluster(None, shape) if isinstance(shape, int) else cluster(shape)


@pytest.mark.parametrize("shape", GRID_SHAPES, ids=str)
def test_grid_fresh_and_added(shape: tuple[int, ...] | int) -> None:
    """Every rule for every replication factor up to 4 and a spread of partition counts."""
    brokers = _grid_cluster(shape)
    n = len(brokers)
    equal = len(set(Counter(domains(brokers).values()).values())) == 1
    for rf in range(1, min(4, n) + 1):
        for partitions in sorted({1, 2, 3, n - 1, n, n + 1, 2 * n + 1, 37, 100} - {0}):
            result = assign_replicas(brokers, partitions, rf)
            topic = check_topic(brokers, partitions, rf, {}, result)
            loads = Counter(b for r in topic.values() for b in r)
            if equal:
                assert spread(loads, brokers) <= 1, (rf, partitions, loads)
            for more in (1, n, 13):
                added = assign_replicas(brokers, partitions + more, rf, result)
                check_topic(brokers, partitions + more, rf, result, added)


# ---------------------------------------------------------------- brute force


def _leaders_can_be_distinct(sets: Sequence[Sequence[int]]) -> bool:
    """Whether each set can pick its own broker, none shared (Kuhn's matching)."""
    owner: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for b in sets[i]:
            if b not in seen:
                seen.add(b)
                if b not in owner or augment(owner[b], seen):
                    owner[b] = i
                    return True
        return False

    return all(augment(i, set()) for i in range(len(sets)))


TINY = [(1, 2), (1, 3), (2, 3), (1, 1, 2), (1, 1, 3), (1, 2, 2), (1, 1, 1, 2), 4, 5]


@pytest.mark.parametrize("shape", TINY, ids=str)
def test_replica_counts_are_globally_optimal_on_tiny_clusters(shape: tuple[int, ...] | int) -> None:
    """Against every rule-abiding placement (any leaders, as long as they are balanced).

    With at most as many partitions as brokers, balanced leaders are distinct
    leaders, so a candidate placement is admissible when its replica sets obey rules 1
    and 2 and have a system of distinct representatives.
    """
    brokers = _grid_cluster(shape)
    rack_of = domains(brokers)
    sizes = Counter(rack_of.values())
    ids = [b.id for b in brokers]
    for rf in range(2, min(3, len(ids)) + 1):
        bounds = spread_bounds(sizes, rf)
        admissible = [
            s
            for s in itertools.combinations(ids, rf)
            if all(lo <= Counter(rack_of[b] for b in s)[r] <= hi for r, (lo, hi) in bounds.items())
        ]
        for partitions in range(2, len(ids) + 1):
            result = assign_replicas(brokers, partitions, rf)
            loads = Counter(b for r in result.values() for b in r)
            ours = (max(loads[i] for i in ids), min(loads[i] for i in ids))
            best_max, best_min = math.inf, -math.inf
            for sets in itertools.combinations_with_replacement(admissible, partitions):
                if not _leaders_can_be_distinct(sets):
                    continue
                counts = Counter(b for s in sets for b in s)
                best_max = min(best_max, max(counts[i] for i in ids))
                best_min = max(best_min, min(counts[i] for i in ids))
            assert ours == (best_max, best_min), (rf, partitions, dict(loads))


# ---------------------------------------------------------------- specific cases


def test_uneven_racks_fewer_than_rf_spread_evenly() -> None:
    """Kafka's rack-aware stride puts 3 of 4 replicas in one rack here; Strand puts 2+2."""
    brokers = cluster((2, 3))
    for replicas in assign_replicas(brokers, 50, 4).values():
        assert sorted(Counter(domains(brokers)[b] for b in replicas).values()) == [2, 2]


def test_lone_broker_rack_holds_every_partition_but_leads_its_share() -> None:
    brokers = cluster((1, 4))
    result = assign_replicas(brokers, 100, 2)
    lone = next(b.id for b in brokers if b.rack == "zone-a")
    assert all(lone in replicas for replicas in result.values())
    leaders = Counter(r[0] for r in result.values())
    assert leaders[lone] == 20 and set(leaders.values()) == {20}


def test_equal_racks_match_the_classic_layout_balance() -> None:
    """3 racks x 3 brokers, RF 3, 9 partitions: leaders and replicas exactly even."""
    brokers = cluster((3, 3, 3))
    result = assign_replicas(brokers, 9, 3)
    assert set(Counter(r[0] for r in result.values()).values()) == {1}
    assert set(Counter(b for r in result.values() for b in r).values()) == {3}
    # Failover order is balanced on a best-effort basis only.
    for position in (1, 2):
        counts = Counter(r[position] for r in result.values())
        assert spread(counts, brokers) <= 2, counts


def test_failover_load_is_spread() -> None:
    """Followers of each broker's partitions are not always the same few brokers."""
    brokers = cluster(None, 6)
    result = assign_replicas(brokers, 60, 3)
    for b in brokers:
        peers = Counter(x for r in result.values() if b.id in r for x in r if x != b.id)
        assert len(peers) == 5


def test_start_index_rotates_the_first_leader() -> None:
    brokers = cluster((2, 2, 2))
    firsts = {assign_replicas(brokers, 1, 3, start_index=s)[0][0] for s in range(6)}
    assert firsts == {b.id for b in brokers}
    assert assign_replicas(brokers, 5, 2, start_index=None) == assign_replicas(
        brokers, 5, 2, start_index=0
    )


def test_start_index_for_is_stable_and_spreads_topics() -> None:
    # A fixed value, not Python's per-process salted hash(): every process agrees.
    assert start_index_for("orders") == 3845127662
    brokers = cluster(None, 8)
    leaders = {
        assign_replicas(brokers, 1, 1, start_index=start_index_for(f"topic-{i}"))[0][0]
        for i in range(40)
    }
    assert len(leaders) >= 6


def test_existing_is_kept_and_counted() -> None:
    brokers = cluster(None, 3)
    ids = [b.id for b in brokers]
    # Two partitions led by the first broker already: the new ones go elsewhere first.
    existing = {0: [ids[0], ids[1]], 1: [ids[0], ids[2]]}
    added = assign_replicas(brokers, 4, 2, existing)
    assert set(added) == {2, 3}
    assert {added[2][0], added[3][0]} == {ids[1], ids[2]}


def test_existing_on_departed_brokers_is_ignored_for_balance() -> None:
    brokers = cluster(None, 3)
    existing = {0: [999, 998], 1: [999, 997]}
    added = assign_replicas(brokers, 5, 2, existing)
    assert set(added) == {2, 3, 4}
    assert len({r[0] for r in added.values()}) == 3


def test_nothing_to_add() -> None:
    brokers = cluster(None, 3)
    existing = assign_replicas(brokers, 4, 2)
    assert assign_replicas(brokers, 4, 2, existing) == {}


def test_existing_partitions_need_not_be_a_prefix() -> None:
    brokers = cluster((2, 2))
    existing = {1: [brokers[0].id, brokers[2].id]}
    added = assign_replicas(brokers, 3, 2, existing)
    assert set(added) == {0, 2}
    check_topic(brokers, 3, 2, existing, added)


def test_rack_bounds_examples() -> None:
    assert rack_bounds([3, 3, 3], 3) == [(0, 1)] * 3
    assert rack_bounds([2, 3], 4) == [(1, 2), (1, 2)]
    assert rack_bounds([1, 4], 4) == [(1, 1), (2, 3)]
    assert rack_bounds([1, 1, 5], 5) == [(1, 1), (1, 1), (2, 3)]


def test_large_topic_is_fast_enough() -> None:
    brokers = cluster((4, 4, 3))
    result = assign_replicas(brokers, 3000, 3)
    check_topic(brokers, 3000, 3, {}, result)


def test_many_random_shapes_with_a_fixed_seed() -> None:
    """A seeded sweep beyond the grid (RF up to 5, bigger uneven clusters)."""
    rng = random.Random(20240601)
    for _ in range(60):
        sizes = tuple(rng.randint(1, 6) for _ in range(rng.randint(1, 6)))
        brokers = cluster(sizes)
        rf = rng.randint(1, min(5, len(brokers)))
        partitions = rng.randint(1, 150)
        result = assign_replicas(brokers, partitions, rf, start_index=rng.randint(0, 99))
        check_topic(brokers, partitions, rf, {}, result)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf", "match"),
    [
        (cluster(None, 3), 3, 0, "at least 1"),
        (cluster(None, 3), 3, -1, "at least 1"),
        (cluster(None, 3), 3, 4, r"larger than the number of available brokers \(3\)"),
        ([], 1, 1, r"available brokers \(0\)"),
        ([Broker(1, "a"), Broker(2, None)], 1, 1, "every broker must have a rack or none"),
        ([Broker(1, "a"), Broker(1, "b")], 1, 1, r"duplicate broker ids: \[1\]"),
    ],
)
def test_placement_errors(brokers: list[Broker], partitions: int, rf: int, match: str) -> None:
    with pytest.raises(PlacementError, match=match) as info:
        assign_replicas(brokers, partitions, rf)
    assert info.value.code is ErrorCode.INVALID_REPLICATION_FACTOR
    assert int(info.value.code) == 38
    assert isinstance(info.value, InvalidReplicationFactorError)
    assert isinstance(info.value, StrandError)


@pytest.mark.parametrize("partitions", [0, -5])
def test_partition_count_errors(partitions: int) -> None:
    with pytest.raises(PartitionCountError, match="at least 1") as info:
        assign_replicas(cluster(None, 3), partitions, 1)
    assert info.value.code is ErrorCode.INVALID_PARTITIONS
    assert int(info.value.code) == 37
    assert isinstance(info.value, PlacementError)
    assert isinstance(info.value, InvalidPartitionsError)


def test_existing_beyond_the_partition_count_is_refused() -> None:
    brokers = cluster(None, 3)
    existing = assign_replicas(brokers, 5, 2)
    with pytest.raises(PartitionCountError, match=r"existing partitions \[3, 4\]"):
        assign_replicas(brokers, 3, 2, existing)
