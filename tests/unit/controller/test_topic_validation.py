"""Topic admin refuses nonsense with an error that names the rule (issue 11, points
13 and 14): a replication factor below one, unparsable or out-of-range configs, and a
``min.insync.replicas`` that no replica list of the topic could ever satisfy."""

from __future__ import annotations

import pytest

from services.controller import reassignment
from services.controller.admin import (
    ConfigOp,
    CreateTopicSpec,
    plan_alter_config,
    plan_create_topic,
)
from strand.cluster.cache import MetadataCache
from strand.cluster.keys import KeySpace
from strand.cluster.model import BrokerRegistration, PartitionRecord, TopicRecord
from strand.errors import InvalidConfigError, InvalidReplicationFactorError

KEYS = KeySpace("test")


@pytest.fixture
def cache() -> MetadataCache:
    metadata = MetadataCache(KEYS)
    for node in (1, 2, 3):
        metadata.apply(KEYS.broker(node),
                       BrokerRegistration(node, "127.0.0.1", 9000 + node).to_json())
    return metadata


def _put(cache: MetadataCache, spec: CreateTopicSpec) -> None:
    plan = plan_create_topic(spec, cache)
    assert plan.topic is not None
    for record in plan.partitions:
        cache.apply(KEYS.partition(record.topic, record.partition), record.to_json())
    cache.apply(KEYS.topic(plan.topic.name), plan.topic.to_json())


@pytest.mark.parametrize("factor", [0, -1])
def test_a_replication_factor_below_one_says_so(cache: MetadataCache, factor: int) -> None:
    with pytest.raises(InvalidReplicationFactorError) as refused:
        plan_create_topic(CreateTopicSpec("t", 1, factor), cache)
    assert str(refused.value) == f"replication factor must be at least 1, got {factor}"


def test_an_unparsable_config_names_key_value_and_expectation(cache: MetadataCache) -> None:
    with pytest.raises(InvalidConfigError) as refused:
        plan_create_topic(CreateTopicSpec("t", 1, 1, {"retention.ms": "abc"}), cache)
    message = str(refused.value)
    assert "'abc'" in message and "retention.ms" in message and "integer (long)" in message
    assert "literal" not in message


def test_max_message_bytes_zero_is_refused(cache: MetadataCache) -> None:
    with pytest.raises(InvalidConfigError, match=r"max\.message\.bytes: must be .* >= 68"):
        plan_create_topic(CreateTopicSpec("t", 1, 1, {"max.message.bytes": "0"}), cache)


@pytest.mark.parametrize("assign", [False, True])
def test_min_insync_above_the_replication_factor_is_refused(cache: MetadataCache,
                                                             assign: bool) -> None:
    spec = CreateTopicSpec("t", 2, 1, {"min.insync.replicas": "5"},
                           assignment={0: [1], 1: [2]} if assign else None)
    with pytest.raises(InvalidConfigError) as refused:
        plan_create_topic(spec, cache)
    assert "min.insync.replicas=5 is more than the 1 replica(s) of topic 't'" in str(
        refused.value)
    plan_create_topic(CreateTopicSpec("t", 2, 3, {"min.insync.replicas": "3"}), cache)


def test_min_insync_cannot_be_raised_above_the_replicas(cache: MetadataCache) -> None:
    _put(cache, CreateTopicSpec("t", 2, 2))
    with pytest.raises(InvalidConfigError, match="more than the 2 replica"):
        plan_alter_config("t", [ConfigOp("min.insync.replicas", "3")], cache)
    plan_alter_config("t", [ConfigOp("min.insync.replicas", "2")], cache)


def test_min_insync_counts_the_smallest_reassigned_partition(cache: MetadataCache) -> None:
    _put(cache, CreateTopicSpec("t", 2, 3))
    record = cache.partitions[("t", 1)]
    shrunk = PartitionRecord("t", 1, (1,), 1, 1, (1,), record.partition_epoch + 1)
    cache.apply(KEYS.partition("t", 1), shrunk.to_json())
    cache.apply(KEYS.topic("t"), TopicRecord("t", cache.topics["t"].topic_id, 2, 3).to_json())
    with pytest.raises(InvalidConfigError, match="more than the 1 replica"):
        plan_alter_config("t", [ConfigOp("min.insync.replicas", "2")], cache)


def test_reassigning_below_min_insync_is_refused() -> None:
    record = PartitionRecord("t", 0, (1, 2, 3), 1, 0, (1, 2, 3))
    with pytest.raises(InvalidReplicationFactorError) as refused:
        reassignment.start(record, [1], {1, 2, 3}, min_insync_replicas=2)
    assert "t-0 cannot move to 1 replica(s): its topic has min.insync.replicas=2" in str(
        refused.value)
    moved = reassignment.start(record, [1, 2], {1, 2, 3}, min_insync_replicas=2)
    assert moved.target_replicas == (1, 2)
