"""The controller's Kafka-named gauges (services/controller/controller_metrics.py):
the active controller reports the cluster, a standby reports 0 for everything."""

from __future__ import annotations

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from services.controller.controller_metrics import ControllerMetrics, offline_partitions
from strand.cluster.cache import MetadataCache
from strand.cluster.keys import KeySpace
from strand.cluster.model import BrokerRegistration, PartitionRecord, TopicRecord
from tests.unit.storage.test_broker_telemetry import points, value


def cache_with(leaders: dict[int, int], live: set[int]) -> MetadataCache:
    """Topic ``t``: partition p led by ``leaders[p]`` (-1: none); ``live`` registered."""
    cache = MetadataCache(KeySpace("test"))
    cache.topics["t"] = TopicRecord("t", "id-t", len(leaders), 3)
    for partition, leader in leaders.items():
        cache.partitions[("t", partition)] = PartitionRecord(
            "t", partition, (1, 2, 3), leader, 1, (1, 2, 3))
    for node in live:
        cache.brokers[node] = BrokerRegistration(node, "127.0.0.1", 9000 + node)
    return cache


def test_a_partition_is_offline_without_a_live_leader() -> None:
    assert offline_partitions(cache_with({0: 1, 1: 2, 2: 3}, {1, 2, 3})) == 0
    assert offline_partitions(cache_with({0: 1, 1: -1, 2: 3}, {1, 2, 3})) == 1
    assert offline_partitions(cache_with({0: 1, 1: 2, 2: 3}, {1, 2})) == 1  # 3 is gone


def test_only_the_active_controller_reports() -> None:
    cache = cache_with({0: 1, 1: -1}, {1, 2})
    active = {"now": True}
    reader = InMemoryMetricReader()
    ControllerMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"), cache,
                      lambda: active["now"])
    found = points(reader)
    assert value(found, "strand.controller.active_controller_count") == 1
    assert value(found, "strand.controller.offline_partitions_count") == 1
    assert value(found, "strand.controller.global_partition_count") == 2
    assert value(found, "strand.controller.global_topic_count") == 1
    assert value(found, "strand.controller.active_broker_count") == 2
    active["now"] = False
    found = points(reader)
    assert all(value(found, f"strand.controller.{name}") == 0 for name in (
        "active_controller_count", "offline_partitions_count", "global_partition_count",
        "global_topic_count", "active_broker_count"))
