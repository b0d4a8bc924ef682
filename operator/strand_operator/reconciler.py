"""One reconciliation of a Topic: decide, act through Strand, and say what happened.

No kopf here: the outcome is data (a status to merge into the Topic's, and the
Events to record), which the kopf handlers (handlers.py) apply.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from strand.cluster.placement import Broker, PlacementError
from strand.errors import (
    InvalidConfigError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    StrandError,
)
from strand_operator.conflicts import Claim, owner_of
from strand_operator.decisions import TopicPlan, plan_topic
from strand_operator.observed import ObservedTopic
from strand_operator.status import assignment_summary, ready_condition, replicas_change
from strand_operator.strand_gateway import StrandGateway
from strand_operator.topic_spec import (
    MANAGED_ANNOTATION,
    PAUSED_ANNOTATION,
    InvalidTopicSpec,
    desired_topic,
    is_managed,
    is_paused,
    topic_name,
)

__all__ = ["Outcome", "TopicEvent", "TopicResource", "delete_topic", "reconcile"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TopicEvent:
    type: str  # Normal or Warning
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class TopicResource:
    """The parts of a Topic resource reconciliation reads."""

    namespace: str
    name: str
    spec: Mapping[str, Any]
    annotations: Mapping[str, str] = field(default_factory=dict)
    status: Mapping[str, Any] = field(default_factory=dict)
    generation: int | None = None

    @property
    def topic(self) -> str:
        return topic_name(self.name, self.spec)

    def owns(self, claims: Iterable[Claim]) -> Claim | None:
        """The owning claim when it is someone else's, else None (this one owns it)."""
        owner = owner_of(claims)
        if owner is None or (owner.namespace, owner.name) == (self.namespace, self.name):
            return None
        return owner


@dataclass(slots=True)
class Outcome:
    status: dict[str, Any]  # merged into the Topic's status
    events: list[TopicEvent] = field(default_factory=list)


# Errors that say the Topic asks for something Strand will not do, by condition reason.
_SPEC_ERRORS: tuple[tuple[type[StrandError], str], ...] = (
    (InvalidConfigError, "InvalidConfig"),
    (InvalidTopicError, "InvalidTopicName"),
    (PlacementError, "PlacementFailed"),
    (InvalidReplicationFactorError, "PlacementFailed"),
    (InvalidReplicaAssignmentError, "PlacementFailed"),
)


def _reason_for(exc: StrandError) -> str:
    return next((reason for kind, reason in _SPEC_ERRORS if isinstance(exc, kind)),
                "ClusterError")


class _Pass:
    """The state of one reconciliation: the resource, what was seen, events so far."""

    def __init__(self, resource: TopicResource) -> None:
        self.resource = resource
        self.events: list[TopicEvent] = []
        self.previous_conditions: list[Mapping[str, Any]] = list(
            resource.status.get("conditions") or [])

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        self.events.append(TopicEvent("Warning" if warning else "Normal", reason, message))

    def outcome(self, ready: bool | None, reason: str, message: str,
                **status: Any) -> Outcome:
        """The status (Ready condition and ``status``), and a Warning Event when the
        Topic newly fails for ``reason`` (not on every pass: a timer re-checks often)."""
        before = next((c for c in self.previous_conditions if c.get("type") == "Ready"), {})
        condition = ready_condition(bool(ready), reason, message, self.resource.generation,
                                    self.previous_conditions)
        if ready is None:
            condition["status"] = "Unknown"
        if not ready and (before.get("reason"), before.get("message")) != (reason, message):
            self.event(reason, message, warning=ready is False)
        elif ready and before.get("status") == "False":
            self.event("Ready", f"ready again (was {before.get('reason')}): {message}")
        status["conditions"] = [condition]
        status["topicName"] = self.resource.topic
        if self.resource.generation is not None:
            status["observedGeneration"] = self.resource.generation
        return Outcome(status, self.events)


async def reconcile(resource: TopicResource, gateway: StrandGateway,
                    claims: Iterable[Claim]) -> Outcome:
    """Bring the Strand topic to what ``resource`` asks for, as far as allowed now."""
    run = _Pass(resource)
    name = resource.topic
    if not is_managed(resource.annotations):
        return run.outcome(None, "Unmanaged", f"{MANAGED_ANNOTATION} is \"false\": the "
                           f"operator leaves topic {name!r} alone")
    if is_paused(resource.annotations):
        return run.outcome(False, "ReconciliationPaused", f"{PAUSED_ANNOTATION} is \"true\": "
                           f"topic {name!r} is not reconciled until it is removed")
    owner = resource.owns(claims)
    if owner is not None:
        return run.outcome(False, "ResourceConflict",
                           f"topic {name!r} is managed by the older {owner.describe()}; "
                           "delete this Topic or give it another spec.topicName")
    try:
        desired = desired_topic(resource.name, resource.spec)
    except InvalidTopicSpec as exc:
        return run.outcome(False, exc.reason, str(exc))
    actual: ObservedTopic | None = None
    try:
        brokers = await gateway.brokers()
        actual = await gateway.observe(name)
        plan = plan_topic(desired, actual, brokers)
        if plan.refusal is not None:
            return run.outcome(False, plan.refusal.reason, plan.refusal.message,
                               **_observed_status(actual, brokers))
        await _carry_out(run, plan, desired.replicas, actual, gateway)
        observed = await gateway.observe(name) if plan else actual
    except StrandError as exc:
        reason = _reason_for(exc)
        log.warning("reconciling topic failed", extra={
            "namespace": resource.namespace, "resource": resource.name, "topic": name,
            "reason": reason, "error": str(exc)})
        what = "Strand refused" if reason != "ClusterError" else "cannot reach or use Strand for"
        return run.outcome(False, reason, f"{what} topic {name!r}: {exc}")
    if observed is None:  # deleted again between the change and the look: next pass
        return run.outcome(False, "ClusterError", f"topic {name!r} vanished while reconciled")
    status = _observed_status(observed, brokers)
    before = actual.replication_factor if actual is not None else desired.replicas
    progress = replicas_change(observed, desired.replicas,
                               resource.status.get("replicasChange"), before)
    status["replicasChange"] = progress  # None removes it (merge patch)
    if progress is not None:
        return run.outcome(True, "ReplicasChanging",
                           f"changing the replication factor of {name!r} from "
                           f"{progress['from']} to {progress['to']}: "
                           f"{progress['partitionsDone']}/{progress['partitionsTotal']} "
                           "partitions done", **status)
    if resource.status.get("replicasChange"):
        run.event("ReplicasChanged", f"every partition of {name!r} now has "
                  f"{desired.replicas} replica(s)")
    return run.outcome(True, "Reconciled", f"topic {name!r} matches the Topic", **status)


def _observed_status(topic: ObservedTopic | None, brokers: list[Broker]) -> dict[str, Any]:
    if topic is None:
        return {}
    return {"topicId": topic.topic_id, "assignment": assignment_summary(topic, brokers)}


async def _carry_out(run: _Pass, plan: TopicPlan, replicas: int,
                     actual: ObservedTopic | None, gateway: StrandGateway) -> None:
    """Apply ``plan``: each action one call and one Event. A replication factor that
    grows is changed before the configs (a new min.insync.replicas may need the new
    replicas), one that shrinks after them (it may need a lower one first)."""
    name = run.resource.topic
    if plan.create is not None:
        await gateway.create(name, plan.create, plan.config.set)
        again = bool(run.resource.status.get("topicId"))
        run.event("Recreated" if again else "Created",
                  (f"topic {name!r} was deleted outside the operator; re-created it"
                   if again else f"created topic {name!r}") +
                  f" with {len(plan.create)} partition(s) placed rack-aware: "
                  + _placement_text(plan.create))
        return
    assert actual is not None
    growing = replicas > actual.replication_factor
    if plan.config and not growing:
        await _apply_config(run, plan, gateway)
    if plan.new_partitions:
        total = actual.partitions + len(plan.new_partitions)
        await gateway.add_partitions(name, total, plan.new_partitions)
        run.event("PartitionsIncreased", f"added partitions {actual.partitions}..{total - 1} "
                  f"to {name!r}: " + _placement_text(dict(enumerate(
                      plan.new_partitions, start=actual.partitions))))
    if plan.reassign:
        await gateway.reassign(name, plan.reassign)
        run.event("ReplicasChangeStarted",
                  f"changing the replication factor of {name!r} from "
                  f"{actual.replication_factor} to {replicas}: reassigning "
                  f"{len(plan.reassign)} partition(s)")
    if plan.config and growing:
        await _apply_config(run, plan, gateway)


async def _apply_config(run: _Pass, plan: TopicPlan, gateway: StrandGateway) -> None:
    name = run.resource.topic
    await gateway.alter_configs(name, plan.config.set, plan.config.delete)
    run.event("ConfigUpdated", f"set the configs of {name!r}: {plan.config.describe()}")


def _placement_text(assignment: Mapping[int, Any]) -> str:
    shown = ", ".join(f"{p}:{list(r)}" for p, r in sorted(assignment.items())[:12])
    return shown + (" ..." if len(assignment) > 12 else "")


async def delete_topic(resource: TopicResource, gateway: StrandGateway,
                       claims: Iterable[Claim]) -> list[TopicEvent]:
    """Delete the Strand topic of a deleted Topic, unless another Topic owns it.
    Strand errors propagate (the handler retries)."""
    name = resource.topic
    owner = resource.owns(claims)
    if owner is not None:
        return [TopicEvent("Normal", "NotDeleted", f"topic {name!r} belongs to the older "
                           f"{owner.describe()}: left in place")]
    if await gateway.delete(name):
        return [TopicEvent("Normal", "Deleted", f"deleted topic {name!r}")]
    return [TopicEvent("Normal", "Deleted", f"topic {name!r} did not exist any more")]
