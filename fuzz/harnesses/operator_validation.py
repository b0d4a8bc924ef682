"""The operator's custom resources as the Kubernetes API delivers them (JSON), read and
acted on by the operator.

Input: one flags byte, then the resource's JSON. The API server only ever delivers
valid JSON objects with string names and string annotations, so other inputs are
skipped; the spec and status can hold anything (a CRD's schema can be bypassed, and
the operator says it checks again).

* A Topic (flags bit 0 clear) is reconciled against a fake cluster of three racks
  (flags bits 1-2: no such topic yet, the topic as it is, or being reassigned), and its
  finalizer's deletion run. ``desired_topic`` may refuse it (InvalidTopicSpec), the
  placement may not fit (a StrandError): either becomes the Topic's Ready condition,
  so ``reconcile`` itself raises nothing. What it did must match the spec it accepted
  (partitions, replicas on distinct live brokers), and its status must be JSON the
  API server takes.
* A StrandUser (bit 0 set) is read by ``desired_user``: InvalidUserSpec, or a user
  whose ACLs pass Strand's own check and whose quotas are positive numbers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from fuzz.harnesses.common import check
from strand.cluster.placement import Broker
from strand_operator.conflicts import Claim
from strand_operator.observed import ObservedTopic
from strand_operator.reconciler import Outcome, TopicResource, delete_topic, reconcile
from strand_operator.strand_gateway import StrandGateway
from strand_operator.topic_spec import DesiredTopic, InvalidTopicSpec, desired_topic
from strand_operator.user_spec import InvalidUserSpec, desired_user

__all__ = ["STRAND_USER", "test_one_input"]

STRAND_USER = 0x01  # else a Topic
_EXISTING = 0x06  # bits 1-2: 0 no topic, 1 the topic, 2 the topic being reassigned

_BROKERS = [Broker(1, "a"), Broker(2, "b"), Broker(3, "c"), Broker(4, "a")]


class FakeCluster(StrandGateway):
    """A Strand cluster in memory: the operator's admin calls change it at once."""

    def __init__(self, topic: ObservedTopic | None) -> None:
        super().__init__("fuzz:9092")
        self.topic = topic
        self.created: Mapping[int, Sequence[int]] | None = None

    async def brokers(self) -> list[Broker]:
        return list(_BROKERS)

    async def observe(self, name: str) -> ObservedTopic | None:
        return self.topic if self.topic is not None and self.topic.name == name else None

    async def create(self, name: str, assignment: Mapping[int, Sequence[int]],
                     config: Mapping[str, str]) -> None:
        self.created = assignment
        self.topic = ObservedTopic(name, "id-new", {p: tuple(r) for p, r in assignment.items()},
                                   config=dict(config))

    async def alter_configs(self, name: str, set_: Mapping[str, str],
                            delete: Sequence[str]) -> None:
        assert self.topic is not None
        config = {k: v for k, v in {**self.topic.config, **set_}.items() if k not in delete}
        self.topic = ObservedTopic(name, self.topic.topic_id, self.topic.assignment,
                                   config=config)

    async def add_partitions(self, name: str, total: int,
                             assignments: Sequence[Sequence[int]]) -> None:
        assert self.topic is not None
        added = {p: tuple(r) for p, r in enumerate(assignments, start=self.topic.partitions)}
        self.topic = ObservedTopic(name, self.topic.topic_id,
                                   {**self.topic.assignment, **added}, config=self.topic.config)

    async def reassign(self, name: str, targets: Mapping[int, Sequence[int]]) -> None:
        assert self.topic is not None
        self.topic = ObservedTopic(
            name, self.topic.topic_id,
            {**self.topic.assignment, **{p: tuple(r) for p, r in targets.items()}},
            config=self.topic.config, reassigning=frozenset(targets))

    async def delete(self, name: str) -> bool:
        existed, self.topic = self.topic is not None, None
        return existed

    def close(self) -> None:
        pass


def _existing(flags: int, name: str) -> ObservedTopic | None:
    state = (flags & _EXISTING) >> 1
    if state == 0:
        return None
    return ObservedTopic(name, "id-1", {0: (1, 2), 1: (2, 3), 2: (3, 4)},
                         leaders={0: 1, 1: 2, 2: None}, config={"retention.ms": "60000"},
                         reassigning=frozenset({1}) if state == 2 else frozenset())


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON the API server sends")


def test_one_input(data: bytes) -> None:
    if not data:
        return
    try:
        resource = json.loads(data[1:], parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return  # not JSON: the API server never sends it
    if not isinstance(resource, dict):
        return
    metadata = resource.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    name, namespace = metadata.get("name"), metadata.get("namespace", "default")
    annotations = metadata.get("annotations") or {}
    if not (isinstance(name, str) and name and isinstance(namespace, str)
            and isinstance(annotations, dict)
            and all(isinstance(v, str) for v in annotations.values())):
        return  # the API server guarantees these
    spec = resource.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    if data[0] & STRAND_USER:
        _user(name, spec)
    else:
        status = resource.get("status")
        generation = metadata.get("generation")
        _topic(TopicResource(namespace, name, spec, annotations,
                             status if isinstance(status, dict) else {},
                             generation if isinstance(generation, int) else None), data[0])


def _run(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Drive a coroutine that never really waits (the fake cluster answers at once)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise AssertionError("the reconciliation waited on something the fake does not do")


def _topic(resource: TopicResource, flags: int) -> None:
    cluster = FakeCluster(_existing(flags, resource.topic))
    claims = [Claim("2024-01-01T00:00:00Z", resource.namespace, resource.name,
                    resource.topic)]
    try:
        desired: DesiredTopic | None = desired_topic(resource.name, resource.spec)
    except InvalidTopicSpec:
        desired = None
    outcome: Outcome = _run(reconcile(resource, cluster, claims))
    _check_status(outcome)
    if desired is not None and cluster.created is not None:
        check(len(cluster.created) == desired.partitions,
              f"created {len(cluster.created)} partitions, the spec asks {desired.partitions}")
        live = {b.id for b in _BROKERS}
        for partition, replicas in cluster.created.items():
            check(len(replicas) == desired.replicas and len(set(replicas)) == len(replicas)
                  and set(replicas) <= live, f"partition {partition} placed on {replicas}")
    for event in _run(delete_topic(resource, cluster, claims)):
        check(isinstance(event.message, str), "an event without a message")


def _check_status(outcome: Outcome) -> None:
    try:
        json.dumps(outcome.status, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise AssertionError(f"a status the API server cannot take: {exc}") from exc
    conditions = outcome.status.get("conditions")
    check(isinstance(conditions, list) and len(conditions) == 1
          and conditions[0].get("type") == "Ready", "no Ready condition")
    for event in outcome.events:
        check(event.type in ("Normal", "Warning") and isinstance(event.reason, str)
              and isinstance(event.message, str), f"a malformed event {event}")


def _user(name: str, spec: dict[str, Any]) -> None:
    try:
        user = desired_user(name, spec)
    except InvalidUserSpec:
        return
    for binding in user.acls:
        binding.validate()  # InvalidAclError here: the operator would write a bad ACL
        check(binding.entry.principal == user.principal, "an ACL of another principal")
    for key, value in user.quotas.items():
        check(math.isfinite(value) and value > 0, f"quota {key}={value}")
