"""When the SDK's and the services' channels trace their calls (strand/client/tracing.py)
and what the producer counts (strand/producer/producer_metrics.py)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from strand.client import tracing
from strand.producer.producer_metrics import ProducerMetrics
from tests.unit.storage.test_broker_telemetry import points, value


@pytest.fixture(autouse=True)
def undecided() -> object:
    yield
    tracing.set_call_tracing(None)


def test_a_service_decides_for_its_channels() -> None:
    tracing.set_call_tracing(False)
    assert tracing.aio_tracing_interceptors() == []
    sentinel = object()
    assert tracing.traced_channel(sentinel) is sentinel
    tracing.set_call_tracing(True)
    assert tracing.aio_tracing_interceptors()  # OpenTelemetry's client interceptors


def test_an_application_traces_once_it_installs_a_tracer_provider() -> None:
    """In a fresh interpreter: no OpenTelemetry imported, nothing traced (and nothing
    imported for it); with a provider installed, the calls are traced."""
    script = (
        "import sys\n"
        "from strand.client import tracing\n"
        "assert not tracing.call_tracing_on()\n"
        "assert 'opentelemetry.trace' not in sys.modules\n"
        "from opentelemetry import trace\n"
        "assert not tracing.call_tracing_on()  # imported, but no provider\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "trace.set_tracer_provider(TracerProvider())\n"
        "assert tracing.call_tracing_on()\n")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


@dataclass
class FakeBatch:
    topic: str
    record_count: int
    error: BaseException | None = None


def test_the_producer_counts_records_sent_failed_and_retried() -> None:
    reader = InMemoryMetricReader()
    metrics = ProducerMetrics("app-1", MeterProvider(metric_readers=[reader]).get_meter("t"))
    metrics.batch_done(FakeBatch("t", 5))  # type: ignore[arg-type]
    metrics.batch_retried(FakeBatch("t", 3))  # type: ignore[arg-type]
    metrics.batch_done(FakeBatch("t", 3, TimeoutError()))  # type: ignore[arg-type]
    found = points(reader)
    assert value(found, "strand.producer.record_send", client_id="app-1", topic="t") == 5
    assert value(found, "strand.producer.record_retry", client_id="app-1") == 3
    assert value(found, "strand.producer.record_error", client_id="app-1") == 3
