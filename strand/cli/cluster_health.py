"""The health summary of ``strand cluster status``: a pure function from what the
admin client described (plain values, gathered by strand/cli/cluster.py) to a
verdict, its reasons and the affected partitions and groups, in the terms of Kafka's
health metrics (ActiveControllerCount, OfflinePartitionsCount,
UnderMinIsrPartitionCount, UnderReplicatedPartitions). No I/O here: tests build the
inputs by hand.

The verdict, worst first:

* UNAVAILABLE (exit 2): an offline partition (no live leader: nothing can be read or
  written there), no active controller (no leader elections, no admin changes), or
  no storage node alive;
* DEGRADED (exit 1): under-min-ISR partitions (``acks=all`` writes refused),
  under-replicated partitions, a storage node that replica lists name but that is not
  alive, reassignments in progress, or consumer-group coordinators that do not answer;
* HEALTHY (exit 0) otherwise. Consumer lag is reported, never judged: it is the
  consumers' health, not the cluster's.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = [
    "Bounded",
    "BrokerState",
    "ClusterSnapshot",
    "GroupSnapshot",
    "HealthReport",
    "PartitionState",
    "ReassignmentState",
    "Verdict",
    "assess",
    "topics_that_may_be_under_min_isr",
]

T = TypeVar("T")


class Verdict(enum.Enum):
    """The cluster's health; the value is the command's exit status."""

    HEALTHY = 0
    DEGRADED = 1
    UNAVAILABLE = 2

    @property
    def exit_status(self) -> int:
        return self.value


@dataclass(frozen=True, slots=True)
class BrokerState:
    """A live storage node."""

    node_id: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionState:
    topic: str
    partition: int
    leader: int | None  # None: no live leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class ReassignmentState:
    """An ongoing reassignment of a partition: ``adding`` still copy the data,
    ``removing`` leave once it switches."""

    topic: str
    partition: int
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """A consumer group; ``lag`` is the sum over the partitions it committed offsets
    for (None: not measured, or no partition's could be), ``lag_unknown_partitions``
    those left out of it (offline, or their end offset did not come)."""

    group_id: str
    state: str
    lag: int | None = None
    lag_unknown_partitions: int = 0


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """What the admin client described, as one value.

    ``controller_reported`` False: the metadata does not say which controller is
    active (it cannot then be judged; ``controller_id`` is ignored). Otherwise
    ``controller_id`` None means there is none.

    ``min_insync_replicas`` by topic: a topic left out is not checked against it (the
    gatherer asks only for the topics of :func:`topics_that_may_be_under_min_isr`).

    ``groups_unavailable``: why the consumer groups could not be listed (None: they
    were, as ``groups``); ``lag_measured`` False: ``--no-lag``.
    """

    cluster_id: str
    brokers: tuple[BrokerState, ...]
    partitions: tuple[PartitionState, ...]
    controller_id: str | None = None
    controller_reported: bool = True
    min_insync_replicas: Mapping[str, int] = field(default_factory=dict)
    reassignments: tuple[ReassignmentState, ...] = ()
    groups: tuple[GroupSnapshot, ...] = ()
    groups_unavailable: str | None = None
    lag_measured: bool = True
    notes: tuple[str, ...] = ()  # the gatherer's: what it could not find out


@dataclass(frozen=True, slots=True)
class Bounded(Generic[T]):
    """The first items of a list (``shown``) and how many there are in all."""

    shown: tuple[T, ...]
    total: int

    @property
    def more(self) -> int:
        return self.total - len(self.shown)

    @classmethod
    def of(cls, items: Iterable[T], limit: int) -> Bounded[T]:
        whole = tuple(items)
        return cls(whole[:max(0, limit)], len(whole))


@dataclass(frozen=True, slots=True)
class HealthReport:
    cluster_id: str
    verdict: Verdict
    reasons: tuple[str, ...]  # why it is not HEALTHY, worst first
    controller_id: str | None
    controller_reported: bool
    brokers: tuple[BrokerState, ...]  # alive, by id
    missing_brokers: tuple[int, ...]  # named by a replica list, not alive
    topic_count: int
    partition_count: int
    offline: Bounded[PartitionState]
    under_min_isr: Bounded[PartitionState]
    under_replicated: Bounded[PartitionState]
    reassigning: Bounded[ReassignmentState]
    groups: Bounded[GroupSnapshot]  # the most lag first
    group_states: Mapping[str, int]
    groups_unavailable: str | None
    lag_measured: bool
    notes: tuple[str, ...]

    @property
    def exit_status(self) -> int:
        return self.verdict.exit_status

    def as_json(self) -> dict[str, Any]:
        """The report as ``--json`` prints it (a stable shape for scripts)."""
        return {
            "cluster": self.cluster_id,
            "verdict": self.verdict.name,
            "exit_status": self.exit_status,
            "reasons": list(self.reasons),
            "controller": {"id": self.controller_id, "reported": self.controller_reported},
            "brokers": {"alive": [{"id": b.node_id, "rack": b.rack} for b in self.brokers],
                        "missing": list(self.missing_brokers),
                        "expected": len(self.brokers) + len(self.missing_brokers)},
            "topics": self.topic_count,
            "partitions": self.partition_count,
            "offline_partitions": _partitions_json(self.offline),
            "under_min_isr_partitions": _partitions_json(self.under_min_isr),
            "under_replicated_partitions": _partitions_json(self.under_replicated),
            "reassigning_partitions": {
                "count": self.reassigning.total, "more": self.reassigning.more,
                "partitions": [{"topic": r.topic, "partition": r.partition,
                                "adding": list(r.adding), "removing": list(r.removing)}
                               for r in self.reassigning.shown]},
            "groups": {
                "count": self.groups.total, "more": self.groups.more,
                "states": dict(self.group_states), "unavailable": self.groups_unavailable,
                "lag_measured": self.lag_measured,
                "groups": [{"group": g.group_id, "state": g.state, "lag": g.lag,
                            "lag_unknown_partitions": g.lag_unknown_partitions}
                           for g in self.groups.shown]},
            "notes": list(self.notes),
        }


def _partitions_json(bounded: Bounded[PartitionState]) -> dict[str, Any]:
    return {"count": bounded.total, "more": bounded.more,
            "partitions": [{"topic": p.topic, "partition": p.partition, "leader": p.leader,
                            "replicas": list(p.replicas), "isr": list(p.isr)}
                           for p in bounded.shown]}


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


def topics_that_may_be_under_min_isr(partitions: Iterable[PartitionState]) -> set[str]:
    """The topics whose ``min.insync.replicas`` is worth asking for: those with a
    partition whose ISR is smaller than its replica list. A whole ISR cannot be under
    it, because the controller refuses a ``min.insync.replicas`` above the replica
    count (at creation, on alter, and for a reassignment's target)."""
    return {p.topic for p in partitions if len(p.isr) < len(p.replicas)}


def assess(snapshot: ClusterSnapshot, limit: int = 10) -> HealthReport:
    """The health of the cluster ``snapshot`` describes; each list keeps its first
    ``limit`` items (partitions by topic and number, groups by lag, most first)."""
    alive = {b.node_id for b in snapshot.brokers}
    partitions = sorted(snapshot.partitions, key=lambda p: (p.topic, p.partition))
    reassignments = sorted(snapshot.reassignments, key=lambda r: (r.topic, r.partition))
    removing = {(r.topic, r.partition): len(r.removing) for r in reassignments}

    # A leader the broker list does not hold is as good as none (the gateway already
    # answers -1 for it; this keeps the rule whole for any other source).
    offline = [p for p in partitions if p.leader is None or p.leader not in alive]
    online = [p for p in partitions if p.leader is not None and p.leader in alive]
    under_min_isr = [p for p in online if len(p.isr) < snapshot.min_insync_replicas.get(
        p.topic, 0)]
    # Kafka's rule: during a reassignment the ISR is measured against the target
    # replicas (the list less those being removed), as the replication factor.
    under_replicated = [p for p in online
                        if len(p.isr) < len(p.replicas) - removing.get((p.topic, p.partition), 0)]
    named = {r for p in partitions for r in p.replicas} | {
        r for m in reassignments for r in m.adding}
    missing = tuple(sorted(named - alive))
    controller_missing = snapshot.controller_reported and snapshot.controller_id is None

    unavailable: list[str] = []
    if offline:
        unavailable.append(f"{_plural(len(offline), 'offline partition')} (no leader)")
    if controller_missing:
        unavailable.append("no active controller")
    if not alive:
        unavailable.append("no storage node alive")
    degraded: list[str] = []
    if under_min_isr:
        degraded.append(f"{_plural(len(under_min_isr), 'partition')} under min.insync.replicas")
    if under_replicated:
        degraded.append(_plural(len(under_replicated), "under-replicated partition"))
    if missing and alive:  # with none alive, "no storage node alive" says it
        degraded.append(f"{_plural(len(missing), 'storage node')} not alive: "
                        + ", ".join(map(str, missing)))
    if reassignments:
        degraded.append(f"{_plural(len(reassignments), 'partition')} being reassigned")
    if snapshot.groups_unavailable is not None:
        degraded.append("consumer groups unavailable")
    verdict = (Verdict.UNAVAILABLE if unavailable else Verdict.DEGRADED if degraded
               else Verdict.HEALTHY)

    notes = list(snapshot.notes)
    if not snapshot.controller_reported:
        notes.append("the gateway does not report the active controller: not checked")
    groups = sorted(snapshot.groups, key=lambda g: (g.lag is None, -(g.lag or 0), g.group_id))
    return HealthReport(
        cluster_id=snapshot.cluster_id, verdict=verdict,
        reasons=tuple(unavailable + degraded),
        controller_id=snapshot.controller_id if snapshot.controller_reported else None,
        controller_reported=snapshot.controller_reported,
        brokers=tuple(sorted(snapshot.brokers, key=lambda b: b.node_id)),
        missing_brokers=missing,
        topic_count=len({p.topic for p in partitions}), partition_count=len(partitions),
        offline=Bounded.of(offline, limit), under_min_isr=Bounded.of(under_min_isr, limit),
        under_replicated=Bounded.of(under_replicated, limit),
        reassigning=Bounded.of(reassignments, limit), groups=Bounded.of(groups, limit),
        group_states=dict(sorted(Counter(g.state for g in snapshot.groups).items())),
        groups_unavailable=snapshot.groups_unavailable, lag_measured=snapshot.lag_measured,
        notes=tuple(notes))
