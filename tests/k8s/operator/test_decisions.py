"""The operator's pure decisions: the Topic's spec read and checked, config drift,
what to do to a topic (create, grow, refuse, change the replication factor), who
owns a topic name, and the status it reports."""

from __future__ import annotations

import pytest

from strand.cluster.placement import Broker, PlacementError, assign_replicas, start_index_for
from strand_operator.config_drift import config_change
from strand_operator.conflicts import Claim, owner_of
from strand_operator.decisions import plan_topic
from strand_operator.observed import ObservedTopic
from strand_operator.status import assignment_summary, ready_condition, replicas_change
from strand_operator.topic_spec import (
    DesiredTopic,
    InvalidTopicSpec,
    desired_topic,
    is_managed,
    is_paused,
)

BROKERS = [Broker(1, "a"), Broker(2, "b"), Broker(3, "c"), Broker(4, "a")]


def _observed(assignment: dict[int, tuple[int, ...]], **kw: object) -> ObservedTopic:
    return ObservedTopic("t", "id", assignment, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the spec

def test_the_spec_gives_the_topic_with_strand_config_text() -> None:
    topic = desired_topic("orders", {"partitions": 3, "replicas": 2, "topicName": "Orders_1",
                                     "config": {"retention.ms": 1000,
                                                "unclean.leader.election.enable": True,
                                                "min.cleanable.dirty.ratio": 0.25}})
    assert topic == DesiredTopic("Orders_1", 3, 2, {
        "retention.ms": "1000", "unclean.leader.election.enable": "true",
        "min.cleanable.dirty.ratio": "0.25"})
    assert desired_topic("orders", {"partitions": 1, "replicas": 1}).name == "orders"


@pytest.mark.parametrize(("spec", "reason", "words"), [
    ({"partitions": 0, "replicas": 1}, "InvalidSpec", "spec.partitions must be an integer"),
    ({"partitions": 1, "replicas": "2"}, "InvalidSpec", "spec.replicas"),
    ({"partitions": 1, "replicas": 1, "config": {"retention.hours": 1}}, "InvalidConfig",
     "unknown topic config 'retention.hours'"),
    ({"partitions": 1, "replicas": 1, "config": {"retention.ms": -5}}, "InvalidConfig",
     "retention.ms"),
    ({"partitions": 1, "replicas": 1, "config": {"min.insync.replicas": 2}}, "InvalidConfig",
     "more than spec.replicas=1"),
])
def test_a_bad_spec_is_refused_with_its_reason(spec: dict[str, object], reason: str,
                                               words: str) -> None:
    with pytest.raises(InvalidTopicSpec, match=words) as refused:
        desired_topic("t", spec)
    assert refused.value.reason == reason


def test_annotations() -> None:
    assert is_managed({}) and is_managed({"strand.io/managed": "true"})
    assert not is_managed({"strand.io/managed": "False"})
    assert is_paused({"strand.io/paused": "true"}) and not is_paused({})


# ---------------------------------------------------------------- config drift

def test_config_drift_sets_what_differs_and_reverts_the_rest() -> None:
    change = config_change({"cleanup.policy": "compact,delete", "retention.ms": "1000"},
                           {"cleanup.policy": "delete,compact", "retention.ms": "5",
                            "segment.ms": "60000"})
    assert (dict(change.set), change.delete) == ({"retention.ms": "1000"}, ("segment.ms",))
    assert not config_change({"retention.ms": "1000"}, {"retention.ms": "1000"})


# ---------------------------------------------------------------- plans

def test_a_missing_topic_is_created_where_the_controller_would_place_it() -> None:
    plan = plan_topic(DesiredTopic("t", 6, 3, {"retention.ms": "1"}), None, BROKERS)
    assert plan.create == assign_replicas(BROKERS, 6, 3, start_index=start_index_for("t"))
    assert dict(plan.config.set) == {"retention.ms": "1"}


def test_a_decrease_is_refused_and_nothing_else_is_done() -> None:
    actual = _observed({0: (1,), 1: (2,), 2: (3,)}, config={"segment.ms": "1"})
    plan = plan_topic(DesiredTopic("t", 2, 3), actual, BROKERS)
    assert plan.refusal is not None and plan.refusal.reason == "NotSupported"
    assert not plan


def test_new_partitions_keep_the_old_ones_and_balance_the_topic() -> None:
    existing = assign_replicas(BROKERS, 3, 2, start_index=start_index_for("t"))
    actual = _observed({p: tuple(r) for p, r in existing.items()})
    plan = plan_topic(DesiredTopic("t", 5, 2), actual, BROKERS)
    wanted = assign_replicas(BROKERS, 5, 2, existing, start_index=start_index_for("t"))
    assert [list(r) for r in plan.new_partitions] == [wanted[3], wanted[4]]
    assert not plan.reassign


def test_a_new_replication_factor_reassigns_every_partition_new_ones_included() -> None:
    actual = _observed({0: (1,), 1: (2,)})
    plan = plan_topic(DesiredTopic("t", 3, 3), actual, BROKERS)
    assert len(plan.new_partitions) == 1 and len(plan.new_partitions[0]) == 1
    assert sorted(plan.reassign) == [0, 1, 2]
    assert all(len(t) == 3 and len({dict((b.id, b.rack) for b in BROKERS)[r] for r in t}) == 3
               for t in plan.reassign.values())
    assert plan.reassign[0][0] == 1 and plan.reassign[1][0] == 2


def test_a_lower_replication_factor_keeps_the_leaders() -> None:
    actual = _observed({0: (1, 2, 3), 1: (2, 3, 4)})
    plan = plan_topic(DesiredTopic("t", 2, 1), actual, BROKERS)
    assert {p: list(t) for p, t in plan.reassign.items()} == {0: [1], 1: [2]}


def test_nothing_moves_while_a_reassignment_runs() -> None:
    actual = _observed({0: (1, 2, 3), 1: (2,)}, reassigning=frozenset({0}))
    plan = plan_topic(DesiredTopic("t", 4, 3), actual, BROKERS)
    assert plan.waiting_for_reassignment and not plan.new_partitions and not plan.reassign


def test_more_replicas_than_brokers_is_a_placement_error() -> None:
    with pytest.raises(PlacementError):
        plan_topic(DesiredTopic("t", 1, 5), None, BROKERS)


# ---------------------------------------------------------------- conflicts

def test_the_oldest_claim_owns_the_topic() -> None:
    young = Claim("2026-01-02T00:00:00Z", "a", "y", "t")
    old = Claim("2026-01-01T00:00:00Z", "b", "x", "t")
    twin = Claim("2026-01-01T00:00:00Z", "a", "z", "t")
    assert owner_of([young, old]) == old
    assert owner_of([old, twin]) == twin  # same second: namespace, then name
    assert owner_of([]) is None


# ---------------------------------------------------------------- status

def test_the_assignment_summary_counts_per_broker_and_rack() -> None:
    topic = _observed({0: (1, 2), 1: (2, 3)}, leaders={0: 1, 1: None})
    summary = assignment_summary(topic, BROKERS)
    assert summary["brokers"] == [
        {"id": 1, "rack": "a", "replicas": 1, "leaders": 1},
        {"id": 2, "rack": "b", "replicas": 2, "leaders": 0},
        {"id": 3, "rack": "c", "replicas": 1, "leaders": 0},
        {"id": 4, "rack": "a", "replicas": 0, "leaders": 0}]
    assert summary["racks"] == [{"rack": "a", "replicas": 1, "leaders": 1},
                                {"rack": "b", "replicas": 2, "leaders": 0},
                                {"rack": "c", "replicas": 1, "leaders": 0}]


def test_the_ready_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    first = ready_condition(False, "ClusterError", "down", 3, (), at="2026-01-01T00:00:00Z")
    again = ready_condition(False, "InvalidConfig", "bad", 4, [first], at="2026-01-02T00:00:00Z")
    flipped = ready_condition(True, "Reconciled", "ok", 4, [again], at="2026-01-03T00:00:00Z")
    assert again["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert flipped["lastTransitionTime"] == "2026-01-03T00:00:00Z"
    assert (flipped["status"], flipped["observedGeneration"]) == ("True", 4)


def test_replicas_change_progress() -> None:
    moving = _observed({0: (1, 2, 3), 1: (2, 3, 4)}, reassigning=frozenset({1}))
    progress = replicas_change(moving, 3, None, 1)
    assert progress is not None
    assert (progress["from"], progress["to"], progress["partitionsDone"],
            progress["partitionsTotal"]) == (1, 3, 1, 2)
    later = replicas_change(moving, 3, progress, 3)
    assert later is not None and later["from"] == 1  # kept from when it started
    assert replicas_change(_observed({0: (1, 2, 3)}), 3, progress, 3) is None
