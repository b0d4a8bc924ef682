"""Internal topics refuse what would destroy the state they hold: deletion, a new
partition count, and a cleanup policy other than compaction. Their other configs
may change; ordinary topics are not affected."""

from __future__ import annotations

import pytest

from services.controller.admin import (
    ConfigOp,
    plan_alter_config,
    plan_create_partitions,
    plan_delete_topic,
    plan_internal_topic,
)
from strand.cluster.cache import MetadataCache
from strand.cluster.model import TopicRecord
from strand.coordination.shards import GROUP_TOPIC
from strand.errors import InvalidConfigError, InvalidRequestError
from tests.support.metadata import cache_with_brokers


@pytest.fixture
def cache() -> MetadataCache:
    metadata = cache_with_brokers(1, 2, 3)
    keys = metadata.keys
    internal = plan_internal_topic(GROUP_TOPIC, 4, metadata).topic
    assert internal is not None and internal.internal
    metadata.apply(keys.topic(GROUP_TOPIC), internal.to_json())
    metadata.apply(keys.topic("orders"), TopicRecord("orders", "id", 4, 3).to_json())
    return metadata


def test_an_internal_topic_cannot_be_deleted(cache: MetadataCache) -> None:
    with pytest.raises(InvalidRequestError, match="internal and cannot be deleted"):
        plan_delete_topic(GROUP_TOPIC, cache)
    assert plan_delete_topic("orders", cache).delete_topic == "orders"


def test_an_internal_topic_keeps_its_partition_count(cache: MetadataCache) -> None:
    with pytest.raises(InvalidRequestError, match="partition count cannot change"):
        plan_create_partitions(GROUP_TOPIC, 8, cache)
    assert len(plan_create_partitions("orders", 8, cache).partitions) == 4


@pytest.mark.parametrize("op", [ConfigOp("cleanup.policy", "delete"),
                                ConfigOp("cleanup.policy", "compact,delete"),
                                ConfigOp("cleanup.policy", None)])  # None: the default, delete
def test_an_internal_topic_stays_compacted(cache: MetadataCache, op: ConfigOp) -> None:
    with pytest.raises(InvalidConfigError, match="must stay 'compact'"):
        plan_alter_config(GROUP_TOPIC, [op], cache)
    assert plan_alter_config("orders", [op], cache).topic is not None


def test_other_configs_of_an_internal_topic_may_change(cache: MetadataCache) -> None:
    plan = plan_alter_config(GROUP_TOPIC, [ConfigOp("segment.bytes", "1048576")], cache)
    assert plan.topic is not None
    assert plan.topic.config["segment.bytes"] == "1048576"
    assert plan.topic.config["cleanup.policy"] == "compact"
