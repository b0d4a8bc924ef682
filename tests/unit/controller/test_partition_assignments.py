"""CreatePartitions with explicit assignments (Kafka's CreatePartitionsAssignment):
the controller takes the given replica lists for the new partitions, and refuses,
with INVALID_REPLICA_ASSIGNMENT, a wrong number of lists, a list of the wrong length,
a repeated broker or a broker that is not live."""

from __future__ import annotations

import dataclasses

import pytest

from services.controller.admin import plan_create_partitions
from strand.cluster.cache import MetadataCache
from strand.cluster.model import PartitionRecord, TopicRecord
from strand.errors import ErrorCode, InvalidPartitionsError, InvalidReplicaAssignmentError
from tests.support.metadata import cache_with_brokers


@pytest.fixture
def cache() -> MetadataCache:
    metadata = cache_with_brokers(1, 2, 3)
    keys = metadata.keys
    metadata.apply(keys.topic("orders"), TopicRecord("orders", "id", 2, 2).to_json())
    for partition, replicas in ((0, (1, 2)), (1, (2, 3))):
        metadata.apply(keys.partition("orders", partition), PartitionRecord(
            "orders", partition, replicas, replicas[0], 0, replicas, 0).to_json())
    return metadata


def test_the_given_replica_lists_place_the_new_partitions(cache: MetadataCache) -> None:
    plan = plan_create_partitions("orders", 4, cache, assignments=[[3, 1], [1, 3]])
    assert [(p.partition, p.replicas, p.leader) for p in plan.partitions] == [
        (2, (3, 1), 3), (3, (1, 3), 1)]
    assert plan.topic is not None and plan.topic.partitions == 4


def test_without_assignments_placement_decides(cache: MetadataCache) -> None:
    plan = plan_create_partitions("orders", 3, cache)
    assert len(plan.partitions) == 1 and len(plan.partitions[0].replicas) == 2


@pytest.mark.parametrize(("assignments", "message"), [
    ([[3, 1]], "needs 2 replica lists, one per new partition; 1 were given"),
    ([[3, 1], [1, 2], [2, 3]], "needs 2 replica lists"),
    ([[3, 1], [1]], "orders-3 has 1 replica\\(s\\); the topic's replication factor is 2"),
    ([[3, 1], [1, 2, 3]], "orders-3 has 3 replica"),
    ([[3, 3], [1, 2]], "orders-2 repeats a broker"),
    ([[3, 1], [1, 9]], "orders-3 names brokers that are not live: \\[9\\]"),
])
def test_bad_assignments_are_refused(cache: MetadataCache, assignments: list[list[int]],
                                     message: str) -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match=message) as refused:
        plan_create_partitions("orders", 4, cache, assignments=assignments)
    assert refused.value.code is ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_the_factor_is_the_partitions_current_one(cache: MetadataCache) -> None:
    """After a reassignment to three replicas the new partitions need three too, as
    Kafka takes the factor from the existing assignment, with or without assignments;
    the topic's record takes the factor the partitions have."""
    keys = cache.keys
    for partition in (0, 1):
        record = cache.partitions[("orders", partition)]
        cache.apply(keys.partition("orders", partition), dataclasses.replace(
            record, replicas=(1, 2, 3), isr=(1, 2, 3)).to_json())
    with pytest.raises(InvalidReplicaAssignmentError, match="replication factor is 3"):
        plan_create_partitions("orders", 3, cache, assignments=[[1, 2]])
    plan = plan_create_partitions("orders", 3, cache, assignments=[[2, 3, 1]])
    assert plan.partitions[0].replicas == (2, 3, 1)
    assert plan.topic is not None and plan.topic.replication_factor == 3
    # and so does placement when no assignments are given (the topic's record still
    # says 2: the reassignment changed the partitions, not the record)
    assert cache.topics["orders"].replication_factor == 2
    plan = plan_create_partitions("orders", 3, cache)
    assert len(plan.partitions[0].replicas) == 3
    assert plan.topic is not None and plan.topic.replication_factor == 3


def test_a_decrease_is_still_refused_first(cache: MetadataCache) -> None:
    with pytest.raises(InvalidPartitionsError, match="cannot be removed"):
        plan_create_partitions("orders", 1, cache, assignments=[[1, 2]])
