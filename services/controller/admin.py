"""Topic administration as pure decisions: validate a request against the current
metadata and say which records to write. No etcd and no gRPC here; the writer
applies a plan in one fenced etcd transaction.

Internal topics (``__consumer_offsets`` and its kind) hold the cluster's own state:
they cannot be deleted (every committed offset would go), their partition count
cannot change (a group's shard is its id's hash modulo that count: every group would
move to a shard that does not hold its offsets), and they stay compacted (with
``delete`` retention would drop the offsets of idle groups). Their replicas may be
moved and their other configs changed.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from services.controller.topic_rules import (
    reject_collisions,
    validate_partitions,
    validate_topic_name,
)
from strand.cluster.cache import MetadataCache
from strand.cluster.model import NO_LEADER, PartitionRecord, TopicRecord
from strand.cluster.placement import Broker, assign_replicas, start_index_for
from strand.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from strand.log.config import TOPIC_CONFIG, validate_topic_config


@dataclass(frozen=True, slots=True)
class CreateTopicSpec:
    name: str
    partitions: int
    replication_factor: int
    config: Mapping[str, str] = field(default_factory=dict)
    # partition -> ordered replicas; when given it decides placement (and counts)
    assignment: Mapping[int, Sequence[int]] | None = None


@dataclass(frozen=True, slots=True)
class ConfigOp:
    key: str
    value: str | None  # None: back to the default


@dataclass(slots=True)
class Plan:
    """Records to create or replace, and records that must not exist yet."""

    topic: TopicRecord | None = None
    partitions: list[PartitionRecord] = field(default_factory=list)
    create_only: bool = False  # the topic key must be absent (create)
    delete_topic: str | None = None


def live_brokers(cache: MetadataCache) -> list[Broker]:
    return [Broker(b.node_id, b.rack) for b in sorted(cache.brokers.values(),
                                                       key=lambda b: b.node_id)]


def _new_partition(topic: str, partition: int, replicas: Sequence[int]) -> PartitionRecord:
    replicas = tuple(replicas)
    return PartitionRecord(topic=topic, partition=partition, replicas=replicas,
                           leader=replicas[0] if replicas else NO_LEADER, leader_epoch=0,
                           isr=replicas, partition_epoch=0)


def _validated_config(config: Mapping[str, str]) -> dict[str, str]:
    validate_topic_config(config)  # raises InvalidConfigError naming the key
    return {str(k): str(v) for k, v in config.items()}


def min_insync_replicas(config: Mapping[str, str]) -> int:
    """The topic's ``min.insync.replicas`` (its default when not set)."""
    key = TOPIC_CONFIG["min.insync.replicas"]
    raw = config.get(key.name)
    return int(key.default if raw is None else key.parse(raw))


def check_min_insync(topic: str, config: Mapping[str, str], replicas: int) -> None:
    """Refuse a ``min.insync.replicas`` above the replica count: no acks=all write
    could ever succeed. (Kafka accepts it and fails every such write later.)"""
    wanted = min_insync_replicas(config)
    if wanted > replicas:
        raise InvalidConfigError(
            f"min.insync.replicas={wanted} is more than the {replicas} replica(s) of topic "
            f"{topic!r}: no acks=all write could succeed; set min.insync.replicas to at "
            f"most {replicas} or use more replicas")


def _check_assignment(
    assignment: Mapping[int, Sequence[int]], brokers: set[int]
) -> tuple[int, int]:
    """Validate an explicit placement; returns (partitions, replication factor)."""
    if sorted(assignment) != list(range(len(assignment))):
        raise InvalidReplicaAssignmentError(
            "an explicit assignment must cover partitions 0..n-1 without gaps")
    factors = {len(replicas) for replicas in assignment.values()}
    if len(factors) != 1 or 0 in factors:
        raise InvalidReplicaAssignmentError("every partition needs the same, non-zero number "
                                            "of replicas")
    for partition, replicas in assignment.items():
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(f"partition {partition} repeats a broker")
        unknown = sorted(set(replicas) - brokers)
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"partition {partition} names brokers that are not live: {unknown}")
    return len(assignment), factors.pop()


def plan_create_topic(spec: CreateTopicSpec, cache: MetadataCache, *,
                      allow_internal: bool = False) -> Plan:
    validate_topic_name(spec.name, allow_internal=allow_internal)
    if spec.name in cache.topics:
        raise TopicAlreadyExistsError(f"topic {spec.name!r} already exists")
    reject_collisions(spec.name, cache.topics)
    config = _validated_config(spec.config)
    brokers = live_brokers(cache)
    if spec.assignment:
        partitions, factor = _check_assignment(spec.assignment, {b.id for b in brokers})
    else:
        partitions, factor = spec.partitions, spec.replication_factor
        validate_partitions(partitions)
        if factor < 1:
            raise InvalidReplicationFactorError(
                f"replication factor must be at least 1, got {factor}")
        if factor > len(brokers):
            raise InvalidReplicationFactorError(
                f"replication factor {factor} needs {factor} live brokers; "
                f"{len(brokers)} are live")
    check_min_insync(spec.name, config, factor)
    assignment = ({p: list(r) for p, r in spec.assignment.items()} if spec.assignment
                  else assign_replicas(brokers, partitions, factor,
                                       start_index=start_index_for(spec.name)))
    topic = TopicRecord(name=spec.name, topic_id=str(uuid.uuid4()), partitions=partitions,
                        replication_factor=factor, config=config,
                        internal=spec.name.startswith("__"))
    return Plan(topic=topic, create_only=True, partitions=[
        _new_partition(spec.name, p, assignment[p]) for p in range(partitions)])


INTERNAL_REPLICATION_FACTOR = 3  # Kafka's offsets.topic.replication.factor


def plan_internal_topic(name: str, partitions: int, cache: MetadataCache) -> Plan:
    """``__consumer_offsets`` and its kind: compacted, replicated over up to three live
    brokers, acks=all needing two of them when there are three."""
    factor = min(INTERNAL_REPLICATION_FACTOR, len(cache.brokers))
    if factor < 1:
        raise InvalidReplicationFactorError(f"no live broker to host {name!r} yet")
    config = {"cleanup.policy": "compact", "min.insync.replicas": str(min(2, factor)),
              "segment.bytes": str(100 * 1024 * 1024)}
    return plan_create_topic(CreateTopicSpec(name, partitions, factor, config), cache,
                             allow_internal=True)


def _existing(name: str, cache: MetadataCache) -> TopicRecord:
    topic = cache.topics.get(name)
    if topic is None:
        raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
    return topic


def _check_new_assignments(name: str, assignments: Sequence[Sequence[int]], first: int,
                           count: int, factor: int, brokers: set[int]) -> None:
    """Validate an explicit placement of new partitions as Kafka does: one replica list
    per new partition, each of the topic's replication factor, on distinct live brokers."""
    if len(assignments) != count - first:
        raise InvalidReplicaAssignmentError(
            f"topic {name!r} grows from {first} to {count} partitions, so it needs "
            f"{count - first} replica lists, one per new partition; {len(assignments)} "
            "were given")
    for partition, replicas in enumerate(assignments, start=first):
        if len(replicas) != factor:
            raise InvalidReplicaAssignmentError(
                f"new partition {name}-{partition} has {len(replicas)} replica(s); the "
                f"topic's replication factor is {factor}: give {factor} brokers")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(
                f"new partition {name}-{partition} repeats a broker: {list(replicas)}")
        unknown = sorted(set(replicas) - brokers)
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"new partition {name}-{partition} names brokers that are not live: "
                f"{unknown}; live brokers are {sorted(brokers)}")


def plan_create_partitions(name: str, count: int, cache: MetadataCache,
                           assignments: Sequence[Sequence[int]] = ()) -> Plan:
    """Grow ``name`` to ``count`` partitions; ``assignments`` (one replica list per new
    partition) places them explicitly, otherwise rack-aware placement decides."""
    topic = _existing(name, cache)
    if topic.internal:
        raise InvalidRequestError(
            f"topic {name!r} is internal: its partition count cannot change (every group "
            "would move to a shard that does not hold its offsets)")
    validate_partitions(count)
    if count < topic.partitions:
        raise InvalidPartitionsError(
            f"topic {name!r} has {topic.partitions} partitions; partitions cannot be removed")
    if count == topic.partitions:
        raise InvalidPartitionsError(f"topic {name!r} already has {count} partitions")
    brokers = live_brokers(cache)
    # The factor the partitions have now (a reassignment may have changed it since the
    # topic was created), as Kafka takes it from the existing assignment; the topic's
    # record takes it too.
    current = cache.partitions_of(name)
    factor = len(current[0].target_replicas) if current else topic.replication_factor
    if assignments:
        _check_new_assignments(name, assignments, topic.partitions, count, factor,
                               {b.id for b in brokers})
        new = [_new_partition(name, p, replicas)
               for p, replicas in enumerate(assignments, start=topic.partitions)]
    else:
        if factor > len(brokers):
            raise InvalidReplicationFactorError(
                f"topic {name!r} has replication factor {factor}; "
                f"{len(brokers)} brokers are live")
        existing = {r.partition: list(r.replicas) for r in current}
        wanted = assign_replicas(brokers, count, factor, existing,
                                 start_index=start_index_for(name))
        new = [_new_partition(name, p, wanted[p]) for p in range(topic.partitions, count)]
    updated = TopicRecord(topic.name, topic.topic_id, count, factor,
                          dict(topic.config), topic.internal)
    return Plan(topic=updated, partitions=new)


def plan_alter_config(name: str, ops: Sequence[ConfigOp], cache: MetadataCache) -> Plan:
    topic = _existing(name, cache)
    config = dict(topic.config)
    for op in ops:
        if op.key not in TOPIC_CONFIG:
            raise InvalidConfigError(f"unknown topic config {op.key!r}")
        if op.value is None:
            config.pop(op.key, None)
        else:
            config[op.key] = op.value
    config = _validated_config(config)
    replicas = [len(r.target_replicas) for r in cache.partitions_of(name)]
    check_min_insync(name, config, min(replicas, default=topic.replication_factor))
    if topic.internal and config.get("cleanup.policy") != "compact":
        raise InvalidConfigError(
            f"topic {name!r} is internal: cleanup.policy must stay 'compact' (retention "
            "would delete the state it holds)")
    updated = TopicRecord(topic.name, topic.topic_id, topic.partitions,
                          topic.replication_factor, config, topic.internal)
    return Plan(topic=updated)


def plan_delete_topic(name: str, cache: MetadataCache) -> Plan:
    if _existing(name, cache).internal:
        raise InvalidRequestError(
            f"topic {name!r} is internal and cannot be deleted (it holds the cluster's "
            "own state, such as every committed offset)")
    return Plan(delete_topic=name)
