"""Placement quality: Strand's ``assign_replicas`` (the one placement function of the
controller and the operator) against Kafka's rack-aware assignment (KIP-36,
reimplemented in kafka_assignment.py) on uneven racks and on growth. The test writes
the comparison to docs/placement-quality.md when STRAND_WRITE_PLACEMENT_TABLE=1 and
otherwise checks that the committed file is what it computes, so the document cannot
go stale; and it asserts that Strand is at least as balanced on every measure and
moves no more replicas, against every one of Kafka's random draws, not only the one
the document shows."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from fractions import Fraction
from functools import cached_property

import pytest

from strand.cluster.placement import Broker, assign_replicas, start_index_for
from strand.launcher import REPO
from tests.unit.controller.kafka_assignment import (
    KafkaBroker,
    add_partitions,
    assign_rack_aware,
)

DOC = REPO / "docs" / "placement-quality.md"
WRITE_ENV = "STRAND_WRITE_PLACEMENT_TABLE"
TOPIC = "orders"  # Strand's tie-break rotation is start_index_for(TOPIC), as the controller's
RF = 3
Assignment = Mapping[int, Sequence[int]]

UNEVEN = (Broker(1, "zone-a"), Broker(2, "zone-a"), Broker(3, "zone-a"),
          Broker(4, "zone-b"), Broker(5, "zone-b"), Broker(6, "zone-c"))
THREE = (Broker(1, "zone-a"), Broker(2, "zone-b"), Broker(3, "zone-c"))
FIVE = (*THREE, Broker(4, "zone-a"), Broker(5, "zone-b"))  # two joined zones a and b


def kafka(brokers: Sequence[Broker]) -> list[KafkaBroker]:
    return [KafkaBroker(b.id, b.rack or "") for b in brokers]


def strand_placement(brokers: Sequence[Broker], partitions: int, start_index: int,
                     existing: Assignment | None = None) -> dict[int, list[int]]:
    """The whole topic after Strand places its partitions (existing ones kept)."""
    existing = dict(existing or {})
    new = assign_replicas(brokers, partitions, RF, existing, start_index=start_index)
    assert set(new).isdisjoint(existing)  # it returns only the partitions it placed
    return {**{p: list(r) for p, r in existing.items()}, **new}


def moved(before: Assignment, after: Assignment) -> int:
    """Replicas that must be copied: brokers a partition gets that it was not on."""
    return sum(len(set(after[p]) - set(before.get(p, after[p]))) for p in after)


# ------------------------------------------------------------------ balance measures

@dataclass(frozen=True, order=False)
class Balance:
    """Each is a spread, max - min: smaller is more balanced."""

    replicas_per_broker: int
    leaders_per_broker: int
    replicas_per_broker_within_a_rack: int  # of the worst rack
    replicas_per_rack_per_broker: Fraction  # a rack's replicas / its brokers
    leaders_per_rack_per_broker: Fraction

    def at_most(self, other: Balance) -> bool:
        return all(getattr(self, f.name) <= getattr(other, f.name) for f in fields(self))


MEASURES = {
    "replicas_per_broker": "replicas per broker",
    "leaders_per_broker": "leaders (preferred) per broker",
    "replicas_per_broker_within_a_rack": "replicas per broker within one rack (worst rack)",
    "replicas_per_rack_per_broker": "replicas per rack ÷ its brokers",
    "leaders_per_rack_per_broker": "leaders per rack ÷ its brokers",
}


@dataclass(frozen=True)
class Placement:
    """A topic's placement on ``brokers`` and the replicas it took to get there."""

    brokers: tuple[Broker, ...]
    assignment: Assignment
    moved: int

    @cached_property
    def replicas(self) -> dict[int, int]:
        count = dict.fromkeys((b.id for b in self.brokers), 0)
        for replicas in self.assignment.values():
            for broker in replicas:
                count[broker] += 1
        return count

    @cached_property
    def leaders(self) -> dict[int, int]:
        count = dict.fromkeys((b.id for b in self.brokers), 0)
        for replicas in self.assignment.values():
            count[replicas[0]] += 1
        return count

    @cached_property
    def racks(self) -> dict[str, list[int]]:
        members: dict[str, list[int]] = {}
        for broker in self.brokers:
            members.setdefault(broker.rack or "", []).append(broker.id)
        return dict(sorted(members.items()))

    def per_rack(self, count: Mapping[int, int]) -> dict[str, int]:
        return {rack: sum(count[b] for b in ids) for rack, ids in self.racks.items()}

    def balance(self) -> Balance:
        def spread(values: Sequence[int] | Sequence[Fraction]) -> int | Fraction:
            return max(values) - min(values)

        def normalised(count: Mapping[int, int]) -> list[Fraction]:
            return [Fraction(total, len(self.racks[rack]))
                    for rack, total in self.per_rack(count).items()]

        return Balance(
            replicas_per_broker=int(spread(list(self.replicas.values()))),
            leaders_per_broker=int(spread(list(self.leaders.values()))),
            replicas_per_broker_within_a_rack=max(
                int(spread([self.replicas[b] for b in ids])) for ids in self.racks.values()),
            replicas_per_rack_per_broker=Fraction(spread(normalised(self.replicas))),
            leaders_per_rack_per_broker=Fraction(spread(normalised(self.leaders))),
        )

    def check_valid(self) -> None:
        """RF distinct brokers per partition, and distinct racks (3 racks, RF 3)."""
        rack_of = {b.id: b.rack for b in self.brokers}
        for replicas in self.assignment.values():
            assert len(replicas) == len(set(replicas)) == RF
            assert len({rack_of[b] for b in replicas}) == min(RF, len(self.racks))


# ------------------------------------------------------------------------ scenarios

KafkaRun = Callable[[int, int], Placement]  # (start index, replica shift) -> placement


@dataclass(frozen=True)
class Outcome:
    label: str
    placement: Placement
    # Kafka only: its placement for any of its random draws, and how many draws.
    any_draw: KafkaRun | None = None
    draws: int = 0

    def all_draws(self) -> list[Placement]:
        if self.any_draw is None:
            return [self.placement]
        return [self.any_draw(start, shift)
                for start, shift in itertools.product(range(self.draws), repeat=2)]


@dataclass(frozen=True)
class Scenario:
    title: str
    story: str
    outcomes: tuple[Outcome, ...]  # Strand's first

    @property
    def strand(self) -> Outcome:
        return self.outcomes[0]


def new_topic(partitions: int, start_index: int) -> Scenario:
    def kafka_run(start: int, shift: int) -> Placement:
        return Placement(UNEVEN, assign_rack_aware(kafka(UNEVEN), partitions, RF, start,
                                                   shift), 0)

    return Scenario(
        f"Uneven racks 3/2/1, a new topic of {partitions} partitions",
        f"Six brokers: zone-a holds 1, 2, 3; zone-b 4, 5; zone-c 6. A topic of "
        f"{partitions} partitions, replication factor {RF}, is created.",
        (Outcome("Strand", Placement(UNEVEN, strand_placement(UNEVEN, partitions, start_index),
                                     0)),
         Outcome("Kafka", kafka_run(0, 0), kafka_run, len(UNEVEN))))


def more_partitions(start_index: int) -> Scenario:
    strand_before = strand_placement(UNEVEN, 6, start_index)
    strand_after = strand_placement(UNEVEN, 12, start_index, strand_before)

    def kafka_run(start: int, shift: int) -> Placement:
        before = assign_rack_aware(kafka(UNEVEN), 6, RF, start, shift)
        after = {**before, **add_partitions(kafka(UNEVEN), before, 12)}
        return Placement(UNEVEN, after, moved(before, after))

    return Scenario(
        "Growth: 6 → 12 partitions on uneven racks 3/2/1",
        f"The six brokers above. A topic of 6 partitions (replication factor {RF}) is "
        "created, then grown to 12: the 6 existing partitions stay where they are "
        "(Strand gets them as `existing`, Kafka's `addPartitions` never touches them).",
        (Outcome("Strand", Placement(UNEVEN, strand_after, moved(strand_before, strand_after))),
         Outcome("Kafka", kafka_run(0, 0), kafka_run, len(UNEVEN))))


def more_brokers(start_index: int) -> Scenario:
    strand_before = strand_placement(THREE, 6, start_index)
    strand_after = strand_placement(FIVE, 12, start_index, strand_before)

    def kafka_added(start: int, shift: int) -> Placement:
        before = assign_rack_aware(kafka(THREE), 6, RF, start, shift)
        after = {**before, **add_partitions(kafka(FIVE), before, 12)}
        return Placement(FIVE, after, moved(before, after))

    added = kafka_added(0, 0).assignment

    def kafka_generated(start: int, shift: int) -> Placement:
        target = assign_rack_aware(kafka(FIVE), 12, RF, start, shift)
        return Placement(FIVE, target, moved(added, target))

    return Scenario(
        "Growth: 3 → 5 brokers, then 6 → 12 partitions",
        f"A topic of 6 partitions (replication factor {RF}) is created on brokers 1, 2, 3 "
        "(zone-a, zone-b, zone-c); brokers 4 (zone-a) and 5 (zone-b) join; the topic is "
        "grown to 12 partitions. Strand has no command that moves existing partitions: "
        "it only places the new ones, balanced against the whole topic's load. Kafka's "
        "`addPartitions` does the same with its round-robin; `kafka-reassign-partitions "
        "--generate` instead recomputes every partition on the five brokers (from "
        "Kafka's placement after the growth), which moves replicas.",
        (Outcome("Strand", Placement(FIVE, strand_after, moved(strand_before, strand_after))),
         Outcome("Kafka", kafka_added(0, 0), kafka_added, len(THREE)),
         Outcome("Kafka --generate", kafka_generated(0, 0), kafka_generated, len(FIVE))))


def scenarios(start_index: int) -> dict[str, Scenario]:
    """The scenarios, Strand's tie-break rotated by ``start_index``."""
    return {"new-12": new_topic(12, start_index), "new-24": new_topic(24, start_index),
            "more-partitions": more_partitions(start_index),
            "more-brokers": more_brokers(start_index)}


SCENARIOS = scenarios(start_index_for(TOPIC))
# Every rotation of Strand's tie-break order on 3, 5 and 6 brokers (lcm 30): any topic name.
ROTATIONS = range(30)


# ----------------------------------------------------------------------- the document

def number(value: int | Fraction) -> str:
    if isinstance(value, Fraction) and value.denominator != 1:
        return f"{float(value):.2f}"
    return str(int(value))


def measure(placement: Placement, name: str) -> int | Fraction:
    """A Balance field of the placement, or "moved"."""
    if name == "moved":
        return placement.moved
    value: int | Fraction = getattr(placement.balance(), name)
    return value


def scenario_section(scenario: Scenario) -> list[str]:
    outcomes = scenario.outcomes
    first = outcomes[0].placement
    heads = " | ".join(f"{o.label} replicas | {o.label} leaders" for o in outcomes)
    rule = "|---" * (2 + 2 * len(outcomes)) + "|"
    lines = [f"## {scenario.title}", "", scenario.story, "",
             f"| broker | rack | {heads} |", rule]
    for broker in first.brokers:
        cells = " | ".join(f"{o.placement.replicas[broker.id]} | {o.placement.leaders[broker.id]}"
                           for o in outcomes)
        lines.append(f"| {broker.id} | {broker.rack} | {cells} |")
    lines += ["", f"| rack | brokers | {heads} |", rule]
    for rack, ids in first.racks.items():
        cells = " | ".join(f"{o.placement.per_rack(o.placement.replicas)[rack]} | "
                           f"{o.placement.per_rack(o.placement.leaders)[rack]}"
                           for o in outcomes)
        lines.append(f"| {rack} | {len(ids)} | {cells} |")
    kafkas = [o for o in outcomes if o.any_draw is not None]
    lines += ["", "| spread (max - min) | " + " | ".join(o.label for o in outcomes) + " | "
              + " | ".join(f"{o.label}, any of its {o.draws ** 2} draws" for o in kafkas) + " |",
              "|---" * (1 + len(outcomes) + len(kafkas)) + "|"]
    for name, text in [*MEASURES.items(), ("moved", "replicas moved")]:
        shown = [number(measure(o.placement, name)) for o in outcomes]
        ranges = []
        for o in kafkas:
            values = [measure(p, name) for p in o.all_draws()]
            low, high = number(min(values)), number(max(values))
            ranges.append(low if low == high else f"{low} to {high}")
        lines.append(f"| {text} | " + " | ".join(shown + ranges) + " |")
    return [*lines, ""]


def document() -> str:
    lines = [
        "# Placement quality: Strand against Kafka's rack-aware assignment",
        "",
        "Generated by `tests/unit/controller/test_placement_quality.py`, which fails when "
        "this file differs from what it computes; rewrite it with",
        f"`{WRITE_ENV}=1 .venv/bin/pytest tests/unit/controller/test_placement_quality.py`.",
        "",
        "**Strand** is `strand.cluster.placement.assign_replicas`, the placement both the "
        "controller and the Kubernetes operator use, with the controller's tie-break "
        f"rotation for a topic named `{TOPIC}` (`start_index_for`). **Kafka** is "
        "`AdminUtils.assignReplicasToBrokers`, rack-aware variant (KIP-36; used by "
        "`kafka-topics` and `kafka-reassign-partitions --generate` with ZooKeeper), "
        "reimplemented in `tests/unit/controller/kafka_assignment.py` (checked against "
        "the example in Kafka's own documentation of the function). Kafka draws a random "
        "start index and a random replica shift for each new topic and each `--generate`; "
        "the tables show start index 0 and shift 0, and the last columns the range over "
        "all of Kafka's draws (every start index and shift below the broker count). "
        "Kafka's `addPartitions` fixes both itself from partition 0's leader.",
        "",
        "Replication factor 3 throughout, so with three racks every partition has one "
        "replica in each rack (both algorithms guarantee it): a rack's share of replicas "
        "is fixed, and a one-broker rack holds a replica of every partition. What differs "
        "is how evenly replicas spread over the brokers inside a rack, and leaders. "
        "Leaders are preferred leaders (first replicas). Spreads are max - min over "
        "brokers or over racks; replicas moved are replicas copied to a broker that did "
        "not hold that partition. The test asserts Strand's spreads and moves are at "
        "most Kafka's for every one of Kafka's draws, and whatever the topic's name "
        "(every rotation of Strand's tie-break order).",
        "",
    ]
    for scenario in SCENARIOS.values():
        lines += scenario_section(scenario)
    return "\n".join(lines)


# ------------------------------------------------------------------------------ tests

def test_the_kafka_reimplementation_gives_kafkas_documented_example() -> None:
    """AdminUtils' scaladoc: brokers 0..5 on racks 1, 3, 3, 2, 2, 1, six partitions
    and a seventh, replication factor 3, start index 0 and shift 0."""
    racks = ["rack1", "rack3", "rack3", "rack2", "rack2", "rack1"]
    brokers = [KafkaBroker(i, rack) for i, rack in enumerate(racks)]
    assert assign_rack_aware(brokers, 7, 3, 0, 0) == {
        0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3],
        6: [0, 4, 2]}


@pytest.mark.parametrize("key", list(SCENARIOS))
def test_every_placement_is_valid(key: str) -> None:
    for outcome in SCENARIOS[key].outcomes:
        for placement in outcome.all_draws():
            placement.check_valid()


def assert_strand_wins(scenario: Scenario, kafka_outcomes: Sequence[Outcome]) -> None:
    strand = scenario.strand.placement
    strand.check_valid()
    for kafka_outcome in kafka_outcomes:
        for placement in kafka_outcome.all_draws():
            assert strand.balance().at_most(placement.balance()), (
                scenario.title, kafka_outcome.label, strand.balance(), placement.balance())
            assert strand.moved <= placement.moved


@pytest.mark.parametrize("key", list(SCENARIOS))
def test_strand_is_at_least_as_balanced_as_kafka_and_moves_no_more(key: str) -> None:
    assert_strand_wins(SCENARIOS[key], SCENARIOS[key].outcomes[1:])


def test_so_it_is_whatever_the_topics_name() -> None:
    """The document shows one topic name; every other name rotates Strand's tie-break
    order to one of these (Kafka's outcomes do not depend on it)."""
    for start_index in ROTATIONS:
        for key, scenario in scenarios(start_index).items():
            assert_strand_wins(scenario, SCENARIOS[key].outcomes[1:])


def test_growth_leaves_existing_partitions_where_they_were() -> None:
    for key in ("more-partitions", "more-brokers"):
        assert SCENARIOS[key].strand.placement.moved == 0
        assert SCENARIOS[key].outcomes[1].placement.moved == 0  # Kafka's addPartitions


def test_the_document_is_what_the_test_computes() -> None:
    text = document()
    if os.environ.get(WRITE_ENV) == "1":
        DOC.write_text(text, encoding="utf-8")
    assert DOC.exists(), f"{DOC} is missing: run with {WRITE_ENV}=1 to write it"
    assert DOC.read_text(encoding="utf-8") == text, (
        f"{DOC} is stale: rerun this test with {WRITE_ENV}=1 and commit the result")
