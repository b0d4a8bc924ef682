"""OpenTelemetry for every service: metrics for Prometheus to scrape, traces over OTLP.

- Metrics: ``--metrics-port N`` (``STRAND_METRICS_PORT``) serves ``/metrics`` in the
  Prometheus format; 0, the default, serves nothing (a laptop runs many services on
  one host). Every request is counted and timed per API and outcome
  (:mod:`strand.service.request_metrics`); the services add their own instruments
  with :func:`meter` under Kafka's metric names (docs/operations.md lists them).
- Traces: a span per RPC served and per RPC made (OpenTelemetry's gRPC
  instrumentation, the W3C trace context in the calls' metadata), exported over OTLP
  when the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set; without an exporter no
  span is recorded (the sampler, ``OTEL_TRACES_SAMPLER``, applies as usual).
"""

from __future__ import annotations

import os
from typing import Any

import grpc
from opentelemetry import metrics, trace
from opentelemetry.instrumentation.grpc import aio_server_interceptor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from strand.client.tracing import set_call_tracing
from strand.service.request_metrics import (
    REQUEST_LATENCY_BUCKETS_S,
    REQUEST_TOTAL_TIME,
    RequestMetricsInterceptor,
)
from strand.version import VERSION

_METER_NAME = "strand"
_interceptors: list[grpc.aio.ServerInterceptor] = []


def meter() -> metrics.Meter:
    return metrics.get_meter(_METER_NAME, VERSION)


def setup_telemetry(
    service: str,
    *,
    metrics_port: int = 0,
    metric_readers: list[MetricReader] | None = None,
    span_exporter: SpanExporter | None = None,
) -> list[grpc.aio.ServerInterceptor]:
    """Install the global meter and tracer providers; returns the server interceptors.

    ``metric_readers`` and ``span_exporter`` replace the defaults (tests pass
    in-memory ones).
    """
    resource = Resource.create({"service.name": f"strand-{service}",
                                "service.version": VERSION,
                                "service.instance.id": f"{os.uname().nodename}-{os.getpid()}"})
    readers = list(metric_readers or [])
    if metrics_port:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import start_http_server

        start_http_server(metrics_port)
        readers.append(PrometheusMetricReader())
    # OpenTelemetry's default buckets are for milliseconds; ours are seconds.
    seconds = View(instrument_name=REQUEST_TOTAL_TIME,
                   aggregation=ExplicitBucketHistogramAggregation(REQUEST_LATENCY_BUCKETS_S))
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers,
                                             views=[seconds]))
    tracer_provider = TracerProvider(resource=resource)
    if span_exporter is None and os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        span_exporter = OTLPSpanExporter()
    trace.set_tracer_provider(tracer_provider)
    _interceptors[:] = [RequestMetricsInterceptor(meter())]
    # The calls this service makes carry its spans' context (strand.client.tracing).
    set_call_tracing(span_exporter is not None)
    if span_exporter is not None:
        tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
        # Spans only where they go somewhere: recording a span per RPC for nobody
        # costs the replication path (a ReplicaFetch per append) measurable latency.
        _interceptors.insert(0, aio_server_interceptor(tracer_provider=tracer_provider))
    return list(_interceptors)


def server_interceptors() -> list[grpc.aio.ServerInterceptor]:
    """What a service passes to ``grpc.aio.server``: empty until :func:`setup_telemetry`."""
    return list(_interceptors)


def add_metrics_port_argument(parser: Any) -> None:
    parser.add_argument("--metrics-port", type=int,
                        default=int(os.environ.get("STRAND_METRICS_PORT", "0")),
                        help="serve Prometheus metrics on this port (0: off)")
