"""The Topic's status: the Ready condition, the replica assignment summary and the
progress of a replication-factor change, built from what the operator saw and did."""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from strand.cluster.placement import Broker
from strand_operator.observed import ObservedTopic

__all__ = ["assignment_summary", "now", "ready_condition", "replicas_change"]


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ready_condition(ready: bool, reason: str, message: str, generation: int | None,
                    previous: Sequence[Mapping[str, Any]] = (),
                    at: str | None = None) -> dict[str, Any]:
    """The Ready condition; its lastTransitionTime moves only when its status does."""
    status = "True" if ready else "False"
    before = next((c for c in previous if c.get("type") == "Ready"), None)
    changed = before is None or before.get("status") != status
    condition: dict[str, Any] = {
        "type": "Ready", "status": status, "reason": reason, "message": message,
        "lastTransitionTime": (at or now()) if changed or before is None
        else before.get("lastTransitionTime") or (at or now())}
    if generation is not None:
        condition["observedGeneration"] = generation
    return condition


def assignment_summary(topic: ObservedTopic, brokers: Sequence[Broker]) -> dict[str, Any]:
    """Replicas and (current) leaders per broker and per rack. Brokers that hold none
    are listed too, so an unused broker shows as zero rather than missing."""
    rack_of = {b.id: b.rack for b in brokers}
    replicas = Counter(b for r in topic.assignment.values() for b in r)
    leaders = Counter(leader for leader in topic.leaders.values() if leader is not None)
    ids = sorted(set(rack_of) | set(replicas))
    per_broker = []
    for broker in ids:
        entry: dict[str, Any] = {"id": broker, "replicas": replicas[broker],
                                 "leaders": leaders[broker]}
        if rack_of.get(broker):
            entry["rack"] = rack_of[broker]
        per_broker.append(entry)
    racks = sorted({r for r in rack_of.values() if r})
    per_rack = [{"rack": rack,
                 "replicas": sum(replicas[b] for b in ids if rack_of.get(b) == rack),
                 "leaders": sum(leaders[b] for b in ids if rack_of.get(b) == rack)}
                for rack in racks]
    return {"partitions": topic.partitions, "replicationFactor": topic.replication_factor,
            "brokers": per_broker, "racks": per_rack}


def replicas_change(topic: ObservedTopic, wanted: int, previous: Mapping[str, Any] | None,
                    before: int) -> dict[str, Any] | None:
    """Progress of the change to ``wanted`` replicas, or None when every partition
    has them and none is being reassigned. ``before`` is the factor the operator saw
    when it started the change (kept from ``previous`` on later passes)."""
    done = topic.partitions_with(wanted)
    if done == topic.partitions:
        return None
    same = previous is not None and previous.get("to") == wanted
    return {"from": previous.get("from", before) if previous is not None and same else before,
            "to": wanted, "partitionsDone": done, "partitionsTotal": topic.partitions,
            "startedAt": previous.get("startedAt", now()) if previous is not None and same
            else now()}
