"""change_replication_factor: the targets of a replication-factor change.

Checked over a grid of shapes (equal and unequal racks, no racks), growing and
shrinking placements that assign_replicas produced: the preferred leader stays,
replicas are only added (the old ones kept, in order) or only removed, the replicas
of a partition are distinct and spread over racks within rack_bounds, and replica
counts per broker stay balanced.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence

import pytest

from strand.cluster.placement import (
    Broker,
    PlacementError,
    assign_replicas,
    change_replication_factor,
    rack_bounds,
)


def _brokers(rack_sizes: Sequence[int]) -> list[Broker]:
    if not rack_sizes:
        return [Broker(i, None) for i in range(1, 5)]
    ids = itertools.count(1)
    return [Broker(next(ids), f"zone-{r}") for r, size in enumerate(rack_sizes)
            for _ in range(size)]


def _racks_within_bounds(brokers: Sequence[Broker], replicas: Sequence[int]) -> bool:
    racks = sorted({b.rack or str(b.id) for b in brokers})
    rack_of = {b.id: b.rack or str(b.id) for b in brokers}
    sizes = [sum(1 for b in brokers if rack_of[b.id] == r) for r in racks]
    bounds = rack_bounds(sizes, len(replicas))
    spread = Counter(rack_of[b] for b in replicas)
    return all(low <= spread[r] <= high for r, (low, high) in zip(racks, bounds, strict=True))


def _spread(assignment: Mapping[int, Sequence[int]], brokers: Sequence[Broker]) -> int:
    load = Counter(b for replicas in assignment.values() for b in replicas)
    counts = [load[b.id] for b in brokers]
    return max(counts) - min(counts)


SHAPES = [(), (1, 1, 1), (2, 2, 2), (3, 3), (3, 2, 1), (4, 1), (2, 2, 2, 2)]


@pytest.mark.parametrize("rack_sizes", SHAPES)
@pytest.mark.parametrize("partitions", [1, 5, 12])
@pytest.mark.parametrize(("before", "after"), [(1, 2), (1, 3), (2, 3), (3, 1), (3, 2), (2, 1)])
def test_targets_keep_the_leader_and_obey_the_rack_rules(
        rack_sizes: tuple[int, ...], partitions: int, before: int, after: int) -> None:
    brokers = _brokers(rack_sizes)
    if max(before, after) > len(brokers):
        pytest.skip("more replicas than brokers")
    current = assign_replicas(brokers, partitions, before, start_index=7)
    targets = change_replication_factor(brokers, current, after, start_index=7)
    assert sorted(targets) == sorted(current)
    for partition, target in targets.items():
        old = current[partition]
        assert len(target) == after and len(set(target)) == after
        assert target[0] == old[0]  # the preferred leader does not move
        if after > before:
            assert target[:before] == old  # only additions, the old replicas in order
        else:
            assert set(target) <= set(old)  # only removals
        assert _racks_within_bounds(brokers, target), (partition, target)
    if after > before:  # free to choose: about as even as a fresh placement
        fresh = assign_replicas(brokers, partitions, after, start_index=7)
        assert _spread(targets, brokers) <= max(2, _spread(fresh, brokers))


def test_growing_one_replica_to_three_on_three_zones() -> None:
    brokers = [Broker(1, "a"), Broker(2, "b"), Broker(3, "c")]
    current = {0: [1], 1: [2], 2: [3]}
    targets = change_replication_factor(brokers, current, 3)
    assert {p: (t[0], sorted(t)) for p, t in targets.items()} == {
        0: (1, [1, 2, 3]), 1: (2, [1, 2, 3]), 2: (3, [1, 2, 3])}


def test_replicas_on_gone_brokers_are_removed_first() -> None:
    brokers = [Broker(1, "a"), Broker(2, "b"), Broker(3, "c")]
    targets = change_replication_factor(brokers, {0: [1, 9, 2]}, 2)
    assert targets == {0: [1, 2]}


def test_a_replica_over_its_racks_bound_is_removed_first() -> None:
    brokers = [Broker(1, "a"), Broker(2, "a"), Broker(3, "b"), Broker(4, "b")]
    # 1 and 2 share rack a: with two replicas every partition needs both racks.
    targets = change_replication_factor(brokers, {0: [1, 3, 2]}, 2)
    assert targets == {0: [1, 3]}


def test_an_unchanged_factor_changes_nothing() -> None:
    brokers = _brokers((2, 2))
    current = assign_replicas(brokers, 6, 2)
    assert change_replication_factor(brokers, current, 2) == current


@pytest.mark.parametrize("factor", [0, 5])
def test_impossible_factors_are_refused(factor: int) -> None:
    with pytest.raises(PlacementError, match="replication factor"):
        change_replication_factor(_brokers((2, 2)), {0: [1]}, factor)
