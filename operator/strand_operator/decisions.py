"""Desired against actual: what to do to a topic, decided without doing it.

One pass decides every step, in the order they are carried out: create the topic
(placed by the operator), or else set configs, add partitions (at the current
replication factor), then start a replication-factor change by reassignment, which
the following passes watch until it completes. A decrease in partitions is refused
whole: nothing else is changed either, so that the Topic's condition says exactly
what is wrong and the topic stays as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from strand.cluster.placement import Broker
from strand_operator.config_drift import ConfigChange, config_change
from strand_operator.observed import ObservedTopic
from strand_operator.placement_requests import new_partitions, new_topic, replication_targets
from strand_operator.topic_spec import DesiredTopic

__all__ = ["Refusal", "TopicPlan", "plan_topic"]


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: str  # the Ready condition's reason
    message: str


@dataclass(frozen=True, slots=True)
class TopicPlan:
    create: Mapping[int, Sequence[int]] | None = None  # the new topic's placement
    config: ConfigChange = field(default_factory=lambda: ConfigChange({}, ()))
    new_partitions: Sequence[Sequence[int]] = ()  # appended after the existing ones
    reassign: Mapping[int, Sequence[int]] = field(default_factory=dict)
    refusal: Refusal | None = None
    # a replication-factor change is running: wait for it before adding partitions
    waiting_for_reassignment: bool = False

    def __bool__(self) -> bool:
        return bool(self.create is not None or self.config or self.new_partitions
                    or self.reassign)


def plan_topic(desired: DesiredTopic, actual: ObservedTopic | None,
               brokers: Sequence[Broker]) -> TopicPlan:
    """The steps that take ``actual`` (None: no such topic) to ``desired``.

    Raises strand.cluster.placement.PlacementError when the brokers cannot hold the
    replicas asked for (e.g. more replicas than storage nodes).
    """
    if actual is None:
        return TopicPlan(create=new_topic(brokers, desired.name, desired.partitions,
                                          desired.replicas),
                         config=ConfigChange(dict(desired.config), ()))
    if desired.partitions < actual.partitions:
        return TopicPlan(refusal=Refusal(
            "NotSupported",
            f"topic {desired.name!r} has {actual.partitions} partitions and the Topic asks "
            f"for {desired.partitions}: partitions cannot be removed (the topic is left "
            f"unchanged; set spec.partitions back to at least {actual.partitions})"))
    config = config_change(desired.config, actual.config)
    if actual.reassigning:
        return TopicPlan(config=config, waiting_for_reassignment=True)
    added: list[list[int]] = []
    grown = actual
    if desired.partitions > actual.partitions:
        added = new_partitions(brokers, actual, desired.partitions)
        grown = ObservedTopic(actual.name, actual.topic_id, {
            **actual.assignment,
            **{p: tuple(r) for p, r in enumerate(added, start=actual.partitions)}})
    reassign = (replication_targets(brokers, grown, desired.replicas)
                if any(len(r) != desired.replicas for r in grown.assignment.values()) else {})
    return TopicPlan(config=config, new_partitions=added, reassign=reassign)
