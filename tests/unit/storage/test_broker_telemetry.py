"""A storage node's telemetry (services/storage/broker_metrics.py, append_traces.py):
the Kafka-named counters and gauges read the node's real replicas, and a leader's
traced appends reach the followers that fetch those records, and only those."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from services.storage.append_traces import AppendTraces, TracedAppend
from services.storage.broker_metrics import BrokerMetrics, records_in, replica_counts
from strand.log.config import LogConfig
from tests.unit.storage.test_fetch_path import (
    FOLLOWER,
    LEADER,
    TOPIC,
    Leadership,
    batch,
    with_leadership,
)

CONTEXT = (("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),)


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    found: dict[str, list[Any]] = {}
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def value(found: dict[str, list[Any]], name: str, **attributes: object) -> float:
    return float(sum(p.value for p in found.get(name, [])
                     if all(p.attributes.get(k) == v for k, v in attributes.items())))


def test_records_are_counted_from_the_batch_headers() -> None:
    data = batch(b"a", b"b") + batch(b"c")
    assert records_in(data) == 3
    assert records_in(data[:-5]) == 2 + 1  # a cut last batch: its header still counts
    assert records_in(data[:20]) == 0  # not even a header
    assert records_in(b"") == 0


def test_the_gauges_count_the_leaders_replicas_as_kafka_does(tmp_path: Path) -> None:
    async def body(leadership: Leadership) -> None:
        replica = leadership.replica
        assert replica_counts([replica]) == {
            "partitions": 1, "leaders": 1, "under_replicated_partitions": 0,
            "under_min_isr_partitions": 0}
        state = replica.leader_state
        assert state is not None
        state.isr = (LEADER,)  # the follower dropped out
        assert replica_counts([replica])["under_replicated_partitions"] == 1
        replica.log.config = LogConfig(min_insync_replicas=2)
        assert replica_counts([replica])["under_min_isr_partitions"] == 1
        replica.leader_state = None  # a follower's replica: counted, not judged
        assert replica_counts([replica]) == {
            "partitions": 1, "leaders": 0, "under_replicated_partitions": 0,
            "under_min_isr_partitions": 0}

    with_leadership(tmp_path, body)


def test_traffic_and_isr_changes_are_counted_per_topic(tmp_path: Path) -> None:
    async def body(leadership: Leadership) -> None:
        reader = InMemoryMetricReader()
        source = MeterProvider(metric_readers=[reader]).get_meter("test")
        metrics = BrokerMetrics(source, leadership.manager.replicas)
        found = points(reader)
        # Present before anything happened, as Kafka's meters are.
        assert value(found, "strand.replica_manager.isr_shrinks") == 0
        assert value(found, "strand.replica_manager.leaders") == 1
        metrics.appended(TOPIC, 3, 200)
        metrics.fetched(TOPIC, batch(b"a", b"b"))
        metrics.fetched(TOPIC, b"")  # an empty answer sends nothing
        metrics.isr_changed((1, 2, 3), (1, 2))
        metrics.isr_changed((1, 2), (1, 2, 3))
        metrics.isr_changed((1, 2), (1, 3))  # a swap is neither
        found = points(reader)
        assert value(found, "strand.broker.topic.bytes_in", topic=TOPIC) == 200
        assert value(found, "strand.broker.topic.messages_in", topic=TOPIC) == 3
        assert value(found, "strand.broker.topic.bytes_out", topic=TOPIC) == len(
            batch(b"a", b"b"))
        assert value(found, "strand.broker.topic.messages_out", topic=TOPIC) == 2
        assert value(found, "strand.replica_manager.isr_shrinks") == 1
        assert value(found, "strand.replica_manager.isr_expands") == 1

    with_leadership(tmp_path, body)


def test_traced_appends_are_kept_until_replicated_and_bounded() -> None:
    traces = AppendTraces(limit=3)
    assert not traces
    traces.record(0, 4, CONTEXT, high_watermark=0)
    traces.record(5, 9, (), high_watermark=0)  # untraced: nothing kept
    traces.record(10, 14, CONTEXT, high_watermark=0)
    assert traces.covering(0, 5) == [TracedAppend(0, 4, CONTEXT)]
    assert traces.covering(3, 11) == [TracedAppend(0, 4, CONTEXT),
                                      TracedAppend(10, 14, CONTEXT)]
    assert traces.covering(5, 10) == []
    traces.prune(high_watermark=5)  # every in-sync replica has 0..4
    assert traces.covering(0, 20) == [TracedAppend(10, 14, CONTEXT)]
    for first in range(20, 60, 10):
        traces.record(first, first + 1, CONTEXT, high_watermark=5)
    assert [t.first_offset for t in traces.covering(0, 100)] == [30, 40, 50]


def test_a_follower_gets_the_traces_of_the_records_it_fetches(tmp_path: Path) -> None:
    async def body(leadership: Leadership) -> None:
        leadership.append(b"first")  # offset 0, untraced
        leadership.append(b"second")  # offset 1, traced
        leadership.replica.append_traces.record(1, 1, CONTEXT, high_watermark=0)
        fetched = await leadership.replicate(0)
        assert list(fetched.traces) == [TracedAppend(1, 1, CONTEXT)]
        assert list((await leadership.replicate(2, broker=FOLLOWER)).traces) == []
        # Consumers never see them.
        leadership.commit(2)
        assert list((await leadership.consume(0)).traces) == []

    with_leadership(tmp_path, body)
