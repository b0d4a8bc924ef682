"""The health summary of ``strand cluster status`` (strand/cli/cluster_health.py) on
hand-built snapshots: every verdict and what makes it, the partitions each kind
counts (Kafka's rules: offline ones are nothing else, a reassignment is measured
against its target), the bounds of every list, the groups' order and the JSON shape."""

from __future__ import annotations

import json

import pytest

from strand.cli.cluster_health import (
    Bounded,
    BrokerState,
    ClusterSnapshot,
    GroupSnapshot,
    PartitionState,
    ReassignmentState,
    Verdict,
    assess,
    topics_that_may_be_under_min_isr,
)

BROKERS = (BrokerState(1, "r1"), BrokerState(2, "r2"), BrokerState(3, "r3"))


def whole(topic: str, partition: int, leader: int = 1,
          replicas: tuple[int, ...] = (1, 2, 3)) -> PartitionState:
    """A partition with its whole replica list in sync."""
    return PartitionState(topic, partition, leader, replicas, replicas)


def snapshot(*partitions: PartitionState, **fields: object) -> ClusterSnapshot:
    base: dict[str, object] = {"cluster_id": "prod", "brokers": BROKERS,
                               "partitions": partitions, "controller_id": "c-1"}
    return ClusterSnapshot(**{**base, **fields})  # type: ignore[arg-type]


HEALTHY = (whole("orders", 0), whole("orders", 1, leader=2), whole("audit", 0, leader=3))


# ------------------------------------------------------------------- verdicts


def test_a_cluster_with_every_partition_led_and_in_sync_is_healthy() -> None:
    report = assess(snapshot(*HEALTHY, groups=(GroupSnapshot("billing", "Stable", 0),)))
    assert report.verdict is Verdict.HEALTHY and report.exit_status == 0
    assert report.reasons == () and report.notes == ()
    assert (report.topic_count, report.partition_count) == (2, 3)
    assert [b.node_id for b in report.brokers] == [1, 2, 3] and report.missing_brokers == ()
    for bounded in (report.offline, report.under_min_isr, report.under_replicated,
                    report.reassigning):
        assert bounded.total == 0 and bounded.shown == ()
    assert report.controller_id == "c-1" and report.controller_reported


def test_an_empty_cluster_with_storage_nodes_is_healthy() -> None:
    report = assess(snapshot())
    assert report.verdict is Verdict.HEALTHY
    assert (report.topic_count, report.partition_count, report.groups.total) == (0, 0, 0)


def test_an_isr_smaller_than_the_replicas_is_under_replicated_degraded() -> None:
    shrunk = PartitionState("orders", 1, 2, (2, 3, 1), (2, 1))
    report = assess(snapshot(*HEALTHY[:1], shrunk, *HEALTHY[2:]))
    assert report.verdict is Verdict.DEGRADED and report.exit_status == 1
    assert report.reasons == ("1 under-replicated partition",)
    assert report.under_replicated == Bounded((shrunk,), 1)
    assert report.under_min_isr.total == 0 and report.offline.total == 0


def test_an_isr_below_min_insync_replicas_is_under_min_isr_and_under_replicated() -> None:
    """As Kafka's metrics: an under-min-ISR partition is under-replicated too."""
    alone = PartitionState("orders", 0, 1, (1, 2, 3), (1,))
    two_of_three = PartitionState("audit", 0, 3, (1, 2, 3), (3, 1))
    report = assess(snapshot(alone, two_of_three,
                             min_insync_replicas={"orders": 2, "audit": 2}))
    assert report.verdict is Verdict.DEGRADED
    assert report.under_min_isr.shown == (alone,)
    assert report.under_replicated.shown == (two_of_three, alone)  # by topic, partition
    assert report.reasons == ("1 partition under min.insync.replicas",
                              "2 under-replicated partitions")


def test_a_topic_without_its_min_insync_replicas_is_not_checked_against_it() -> None:
    alone = PartitionState("orders", 0, 1, (1, 2, 3), (1,))
    assert assess(snapshot(alone)).under_min_isr.total == 0


def test_a_storage_node_named_by_replica_lists_but_not_alive_is_degraded() -> None:
    report = assess(snapshot(*HEALTHY, brokers=BROKERS[:2]))
    # orders-0 (leader 1) and orders-1 (leader 2) are led; audit-0's leader 3 is gone.
    assert report.missing_brokers == (3,)
    assert "1 storage node not alive: 3" in report.reasons
    assert report.verdict is Verdict.UNAVAILABLE  # audit-0 lost its leader


def test_a_missing_node_alone_is_degraded() -> None:
    followers_only = (whole("orders", 0, replicas=(1, 2, 4)),)
    report = assess(snapshot(*followers_only))
    assert report.verdict is Verdict.DEGRADED
    assert report.reasons == ("1 storage node not alive: 4",)


def test_a_reassignment_in_progress_is_degraded_and_measured_against_its_target() -> None:
    """[1] moving to [2, 3]: replicas 2,3,1 while it copies; once 2 and 3 are in
    sync the ISR covers the target (Kafka's rule) and only the move is reported."""
    copying = PartitionState("orders", 0, 1, (2, 3, 1), (1,))
    caught_up = PartitionState("orders", 1, 1, (2, 3, 1), (1, 2, 3))
    moves = (ReassignmentState("orders", 1, (2, 3), (1,)),
             ReassignmentState("orders", 0, (2, 3), (1,)))
    report = assess(snapshot(copying, caught_up, reassignments=moves))
    assert report.verdict is Verdict.DEGRADED
    assert report.reassigning.shown == (moves[1], moves[0])
    assert report.under_replicated.shown == (copying,)
    assert report.reasons == ("1 under-replicated partition", "2 partitions being reassigned")


def test_a_replica_being_added_on_a_node_not_alive_is_missing() -> None:
    adding = (ReassignmentState("orders", 0, (5,), ()),)
    assert assess(snapshot(*HEALTHY, reassignments=adding)).missing_brokers == (5,)


def test_consumer_groups_that_cannot_be_listed_are_degraded() -> None:
    report = assess(snapshot(*HEALTHY, groups_unavailable="COORDINATOR_NOT_AVAILABLE: shard 2"))
    assert report.verdict is Verdict.DEGRADED
    assert report.reasons == ("consumer groups unavailable",)
    assert report.groups_unavailable == "COORDINATOR_NOT_AVAILABLE: shard 2"


def test_lag_never_changes_the_verdict() -> None:
    behind = (GroupSnapshot("etl", "Empty", 10**9),)
    assert assess(snapshot(*HEALTHY, groups=behind)).verdict is Verdict.HEALTHY


def test_a_partition_without_a_leader_is_offline_unavailable_and_nothing_else() -> None:
    lost = PartitionState("orders", 1, None, (3,), (3,))
    shrunk = PartitionState("audit", 0, None, (2, 3), (3,))
    report = assess(snapshot(HEALTHY[0], lost, shrunk, min_insync_replicas={"audit": 2}))
    assert report.verdict is Verdict.UNAVAILABLE and report.exit_status == 2
    assert report.offline.shown == (shrunk, lost)
    assert report.under_replicated.total == 0 and report.under_min_isr.total == 0
    assert report.reasons == ("2 offline partitions (no leader)",)


def test_a_leader_the_broker_list_does_not_hold_is_offline() -> None:
    stale = PartitionState("orders", 0, 3, (1, 3), (1, 3))
    report = assess(snapshot(stale, brokers=BROKERS[:2]))
    assert report.offline.shown == (stale,) and report.verdict is Verdict.UNAVAILABLE


def test_no_active_controller_is_unavailable() -> None:
    report = assess(snapshot(*HEALTHY, controller_id=None))
    assert report.verdict is Verdict.UNAVAILABLE
    assert report.reasons == ("no active controller",)


def test_a_controller_the_metadata_does_not_report_is_a_note_not_a_verdict() -> None:
    report = assess(snapshot(*HEALTHY, controller_id=None, controller_reported=False))
    assert report.verdict is Verdict.HEALTHY
    assert report.controller_id is None and not report.controller_reported
    assert report.notes == ("the gateway does not report the active controller: not checked",)


def test_no_storage_node_alive_is_unavailable_without_listing_each_as_missing() -> None:
    report = assess(snapshot(brokers=()))
    assert report.verdict is Verdict.UNAVAILABLE
    assert report.reasons == ("no storage node alive",)
    with_topics = assess(snapshot(*HEALTHY, brokers=()))
    assert with_topics.reasons == ("3 offline partitions (no leader)", "no storage node alive")
    assert with_topics.missing_brokers == (1, 2, 3)


def test_the_reasons_are_worst_first() -> None:
    lost = PartitionState("orders", 0, None, (3,), (3,))
    shrunk = PartitionState("audit", 0, 1, (1, 2), (1,))
    report = assess(snapshot(lost, shrunk, brokers=BROKERS[:2], controller_id=None,
                             groups_unavailable="REQUEST_TIMED_OUT: ListGroups"))
    assert report.verdict is Verdict.UNAVAILABLE
    assert report.reasons == ("1 offline partition (no leader)", "no active controller",
                              "1 under-replicated partition", "1 storage node not alive: 3",
                              "consumer groups unavailable")


def test_the_gatherers_notes_come_first() -> None:
    report = assess(snapshot(*HEALTHY, controller_reported=False, notes=("configs refused",)))
    assert report.notes[0] == "configs refused" and len(report.notes) == 2


# --------------------------------------------------------------------- bounds


def test_each_list_keeps_its_first_items_and_counts_the_rest() -> None:
    shrunk = [PartitionState(f"t{i % 3}", i, 1, (1, 2), (1,)) for i in range(25)]
    offline = [PartitionState("gone", i, None, (3,), (3,)) for i in range(12)]
    moves = [ReassignmentState("t0", i, (3,), ()) for i in range(11)]
    groups = [GroupSnapshot(f"g{i:02}", "Empty", i) for i in range(14)]
    report = assess(snapshot(*shrunk, *offline, reassignments=tuple(moves),
                             groups=tuple(groups)), limit=4)
    assert (report.under_replicated.total, len(report.under_replicated.shown),
            report.under_replicated.more) == (25, 4, 21)
    assert [p.name for p in report.under_replicated.shown] == ["t0-0", "t0-3", "t0-6", "t0-9"]
    assert (report.offline.total, report.offline.more) == (12, 8)
    assert (report.reassigning.total, report.reassigning.more) == (11, 7)
    assert [g.group_id for g in report.groups.shown] == ["g13", "g12", "g11", "g10"]
    assert report.groups.more == 10


def test_a_limit_of_zero_keeps_only_the_counts() -> None:
    shrunk = PartitionState("orders", 0, 1, (1, 2), (1,))
    report = assess(snapshot(shrunk, groups=(GroupSnapshot("a", "Stable", 1),)), limit=0)
    assert report.under_replicated == Bounded((), 1) and report.under_replicated.more == 1
    assert report.groups == Bounded((), 1)
    assert report.verdict is Verdict.DEGRADED


@pytest.mark.parametrize(("items", "limit", "shown", "more"), [
    ([], 3, (), 0), ([1, 2], 3, (1, 2), 0), ([1, 2, 3], 3, (1, 2, 3), 0),
    ([1, 2, 3, 4], 3, (1, 2, 3), 1), ([1], -1, (), 1),
])
def test_bounded_of(items: list[int], limit: int, shown: tuple[int, ...], more: int) -> None:
    bounded = Bounded.of(items, limit)
    assert (bounded.shown, bounded.total, bounded.more) == (shown, len(items), more)


def test_groups_go_most_lag_first_then_unknown_lag_then_by_name() -> None:
    groups = (GroupSnapshot("b", "Stable", 5), GroupSnapshot("z", "Empty", None),
              GroupSnapshot("a", "Stable", 5), GroupSnapshot("c", "Dead", 0),
              GroupSnapshot("y", "Stable", 900), GroupSnapshot("x", "Empty", None))
    report = assess(snapshot(groups=groups))
    assert [g.group_id for g in report.groups.shown] == ["y", "a", "b", "c", "x", "z"]
    assert report.group_states == {"Dead": 1, "Empty": 2, "Stable": 3}
    assert list(report.group_states) == ["Dead", "Empty", "Stable"]


# ------------------------------------------------------------- min ISR topics


def test_only_topics_with_a_shrunk_isr_may_be_under_min_insync_replicas() -> None:
    partitions = (whole("full", 0), PartitionState("shrunk", 0, 1, (1, 2), (1,)),
                  PartitionState("lost", 0, None, (3,), ()), whole("shrunk", 1))
    assert topics_that_may_be_under_min_isr(partitions) == {"shrunk", "lost"}


# ----------------------------------------------------------------------- JSON


def test_the_json_report_names_every_part() -> None:
    lost = PartitionState("single", 0, None, (3,), (3,))
    shrunk = PartitionState("orders", 2, 1, (1, 2, 3), (1, 2))
    move = ReassignmentState("orders", 2, (2,), (3,))
    report = assess(snapshot(lost, shrunk, brokers=BROKERS[:2], reassignments=(move,),
                             groups=(GroupSnapshot("etl", "Empty", 7, 1),),
                             controller_reported=False), limit=5)
    document = json.loads(json.dumps(report.as_json()))
    assert document == {
        "cluster": "prod", "verdict": "UNAVAILABLE", "exit_status": 2,
        "reasons": ["1 offline partition (no leader)", "1 storage node not alive: 3",
                    "1 partition being reassigned"],
        "controller": {"id": None, "reported": False},
        "brokers": {"alive": [{"id": 1, "rack": "r1"}, {"id": 2, "rack": "r2"}],
                    "missing": [3], "expected": 3},
        "topics": 2, "partitions": 2,
        "offline_partitions": {"count": 1, "more": 0, "partitions": [
            {"topic": "single", "partition": 0, "leader": None, "replicas": [3],
             "isr": [3]}]},
        "under_min_isr_partitions": {"count": 0, "more": 0, "partitions": []},
        # 2 of the 2 target replicas (1, 2) are in sync: not under-replicated.
        "under_replicated_partitions": {"count": 0, "more": 0, "partitions": []},
        "reassigning_partitions": {"count": 1, "more": 0, "partitions": [
            {"topic": "orders", "partition": 2, "adding": [2], "removing": [3]}]},
        "groups": {"count": 1, "more": 0, "states": {"Empty": 1}, "unavailable": None,
                   "lag_measured": True, "groups": [
                       {"group": "etl", "state": "Empty", "lag": 7,
                        "lag_unknown_partitions": 1}]},
        "notes": ["the gateway does not report the active controller: not checked"],
    }


def test_verdicts_are_their_exit_statuses() -> None:
    assert [(v.name, v.exit_status) for v in Verdict] == [
        ("HEALTHY", 0), ("DEGRADED", 1), ("UNAVAILABLE", 2)]
