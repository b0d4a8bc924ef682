"""Telemetry of a live cluster: the metrics the chart's dashboard and alert rules
use all exist in a scrape of real services (and move with what happens: traffic,
a storage node's death), and one produce is one trace from the SDK through the
gateway to the partition leader and its followers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from strand import Admin, Consumer, NewTopic, Producer
from strand.launcher import Cluster, Launch, pinned_env
from tests.support.cluster import sdk_spec
from tests.support.otlp import OtlpCollector
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "helm" / "strand" / "files" / "monitoring"

# -- the metric names in PromQL --------------------------------------------------------------


def metric_names(expression: str) -> set[str]:
    """Every metric a PromQL expression selects (parsed, not pattern-matched)."""
    names: set[str] = set()

    def walk(node: Any) -> None:
        if type(node).__name__ == "VectorSelector" and node.name:
            names.add(node.name)
        for attribute in ("expr", "lhs", "rhs", "param", "vector_selector", "args"):
            child = getattr(node, attribute, None)
            if isinstance(child, list):
                for item in child:
                    walk(item)
            elif child is not None and type(child).__module__.startswith("promql_parser"):
                walk(child)

    walk(promql_parser.parse(expression))
    return names


def dashboard_expressions() -> list[str]:
    dashboard = json.loads((MONITORING / "strand-dashboard.json").read_text())
    expressions = [target["expr"] for panel in dashboard["panels"]
                   for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query", "")
        if isinstance(query, str) and query.startswith("label_values("):
            expressions.append(query.removeprefix("label_values(").split(",")[0])
    # Grafana's own variables are not PromQL: give them values Prometheus would see.
    return [e.replace("$__rate_interval", "1m").replace("$namespace", ".*")
            for e in expressions]


def alert_expressions() -> list[str]:
    rules = yaml.safe_load((MONITORING / "strand-alerts.yaml").read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def test_the_expressions_are_parsed_into_the_metric_names() -> None:
    """The name extraction the scrape check relies on (a check that finds no names
    would pass anything)."""
    assert metric_names('histogram_quantile(0.99, sum by (le) (rate(a_bucket{x="y"}[5m])))'
                        ' > 1 and on() sum(b) / max_over_time(sum(c)[1h:1m])') == {
        "a_bucket", "b", "c"}
    used = set().union(*map(metric_names, dashboard_expressions() + alert_expressions()))
    assert len(used) >= 12, used


# -- a live cluster's scrape ----------------------------------------------------------------


@pytest.fixture(scope="module")
def monitored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("monitored")
    spec = replace(sdk_spec(directory, nodes=3, name="monitored", coordinators=1),
                   metrics=True,
                   storage_args=("--replica-lag-time-max-ms", "2000"),
                   coordinator_args=("--shards", "4", "--initial-rebalance-delay-ms", "300",
                                     "--lag-interval-s", "1"))
    cluster = Cluster(spec).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def scrape(cluster: Cluster) -> dict[str, float]:
    """Every sample of every live service, summed per (name, labels) across services."""
    samples: dict[str, float] = {}
    for process_id, port in cluster.metrics_ports.items():
        if not cluster.process(process_id).running():
            continue
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
        for family in text_string_to_metric_families(text.decode()):
            for sample in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items())
                                  if not k.startswith("otel_scope"))
                key = f"{sample.name}{{{labels}}}"
                samples[key] = samples.get(key, 0.0) + sample.value
    return samples


def total(samples: dict[str, float], name: str, **labels: str) -> float:
    wanted = [f"{k}={v}" for k, v in labels.items()]
    return sum(value for key, value in samples.items()
               if key.split("{", 1)[0] == name and all(w in key for w in wanted))


def names(samples: dict[str, float]) -> set[str]:
    return {key.split("{", 1)[0] for key in samples}


def test_every_metric_of_the_dashboard_and_alerts_is_scraped(monitored: Cluster) -> None:
    with Admin(monitored.bootstrap) as admin:
        admin.create_topics([NewTopic("watched", 2, 3)])
    with Producer(monitored.bootstrap, acks="all") as producer:
        for i in range(200):
            producer.send("watched", f"record-{i}".encode())
        producer.flush(30)
    # The group reads part of the topic, so that it lags by what it left.
    with Consumer(monitored.bootstrap, group_id="watchers", auto_offset_reset="earliest",
                  enable_auto_commit=False, max_poll_records=30) as consumer:
        consumer.subscribe(["watched"])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 60 and time.monotonic() < deadline:
            seen += sum(len(records) for records in consumer.poll(timeout_ms=500).values())
        consumer.commit()
    wait_until(lambda: any(key.startswith("strand_consumergroup_lag{") and "group=watchers" in key
                           for key in scrape(monitored)), 20, "the group's lag in the scrape")
    samples = scrape(monitored)
    used = set().union(*map(metric_names, dashboard_expressions() + alert_expressions()))
    missing = sorted(used - names(samples))
    assert not missing, f"the dashboard or the alerts use metrics no service exports: {missing}"
    # The numbers are the cluster's: its traffic, one controller, every partition led.
    assert total(samples, "strand_broker_topic_messages_in_total", topic="watched") == 200
    assert total(samples, "strand_broker_topic_messages_out_total", topic="watched") >= seen
    assert total(samples, "strand_broker_topic_bytes_in_total", topic="watched") > 200 * 8
    assert total(samples, "strand_consumergroup_lag", group="watchers") == 200 - seen
    assert total(samples, "strand_controller_active_controller_count") == 1
    assert total(samples, "strand_controller_offline_partitions_count") == 0
    assert total(samples, "strand_replica_manager_under_replicated_partitions") == 0
    assert total(samples, "strand_requests_total", request="Produce",
                 service="strand.v1.Gateway", status="OK") >= 1


def test_a_dead_storage_node_shows_as_under_replicated_and_shrunk(monitored: Cluster) -> None:
    with Admin(monitored.bootstrap) as admin:
        admin.create_topics([NewTopic("shrinking", 3, 3)])
    before = total(scrape(monitored), "strand_replica_manager_isr_shrinks_total")
    monitored.storage[2].kill()
    wait_until(lambda: total(scrape(monitored),
                             "strand_replica_manager_under_replicated_partitions") > 0,
               30, "under-replicated partitions after a storage node's death")
    wait_until(lambda: total(scrape(monitored), "strand_controller_active_broker_count") == 2,
               30, "the controller to count the storage node gone (its lease expired)")
    assert total(scrape(monitored), "strand_replica_manager_isr_shrinks_total") > before


# -- one trace ----------------------------------------------------------------------------

TRACED_PRODUCE = """
import sys
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

provider = TracerProvider(resource=Resource.create({"service.name": "traced-app"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=sys.argv[2],
                                                                 insecure=True)))
trace.set_tracer_provider(provider)  # before the producer: its calls are traced
reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
from strand import Producer
with Producer(sys.argv[1], acks="all", client_id="traced-app") as producer:
    producer.send("traced", b"one traced record").result(30)
provider.shutdown()
for resource in reader.get_metrics_data().resource_metrics:
    for scope in resource.scope_metrics:
        for metric in scope.metrics:
            for point in metric.data.data_points:
                print(metric.name, dict(point.attributes), point.value)
"""


def test_one_produce_is_one_trace_from_the_sdk_to_the_followers(tmp_path: Path) -> None:
    with OtlpCollector() as collector:
        env = {**pinned_env(), "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
               "OTEL_EXPORTER_OTLP_INSECURE": "true", "OTEL_BSP_SCHEDULE_DELAY": "100"}
        spec = replace(sdk_spec(tmp_path, nodes=3, name="traced"), launch=Launch(env=env))
        cluster = Cluster(spec).start()
        try:
            with Admin(cluster.bootstrap) as admin:
                admin.create_topics([NewTopic("traced", 1, 3)])
            done = subprocess.run(
                [sys.executable, "-c", TRACED_PRODUCE, cluster.bootstrap, collector.endpoint],
                cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
                env={**os.environ, "PYTHONPATH": str(REPO)})
            assert done.returncode == 0, done.stderr[-3000:]
            # The SDK's own metrics (Kafka's record-send-total) went to the app's provider.
            assert ("strand.producer.record_send {'client_id': 'traced-app', "
                    "'topic': 'traced'} 1") in done.stdout, done.stdout
            sdk = [s for s in collector.spans() if s.service == "traced-app"
                   and s.name == "/strand.v1.Gateway/Produce"]
            assert len(sdk) == 1, collector.spans()
            trace_id = sdk[0].trace_id

            def whole() -> bool:
                return any(s.name == "ReplicaAppend" for s in collector.spans(trace_id))

            wait_until(whole, 20, "the followers' spans of the traced produce")
            time.sleep(0.5)  # the second follower's batch
            spans = collector.spans(trace_id)
        finally:
            cluster.stop()
    by_id = {s.span_id: s for s in spans}
    gateway = [s for s in spans if s.service == "strand-gateway"
               and s.name == "/strand.v1.Gateway/Produce"]
    leader = [s for s in spans if s.service == "strand-storage"
              and s.name == "/strand.v1.Storage/Produce"]
    followers = [s for s in spans if s.name == "ReplicaAppend"]
    assert len(gateway) == 1 and len(leader) == 1, spans
    # SDK → gateway → leader, each the parent of the next (through the client spans
    # each side makes of its call).
    assert by_id[gateway[0].parent_span_id].span_id == sdk[0].span_id
    gateway_call = by_id[leader[0].parent_span_id]
    assert gateway_call.service == "strand-gateway"
    assert by_id[gateway_call.parent_span_id].span_id == gateway[0].span_id
    # The followers' appends are children of the leader's produce, in other processes.
    assert followers and all(f.parent_span_id == leader[0].span_id for f in followers)
    assert all(f.service == "strand-storage" and f.instance != leader[0].instance
               for f in followers)
    assert len({f.attributes["strand.replica"] for f in followers}) >= 1
