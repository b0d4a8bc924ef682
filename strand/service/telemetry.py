"""OpenTelemetry for every service: metrics for Prometheus to scrape, traces over OTLP.

- Metrics: ``--metrics-port N`` (``STRAND_METRICS_PORT``) serves ``/metrics`` in the
  Prometheus format; 0, the default, serves nothing (a laptop runs many services on
  one host). Each RPC is counted and timed per method and outcome.
- Traces: a span per RPC (OpenTelemetry's gRPC instrumentation), exported over OTLP
  when the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set; without an exporter no
  span is recorded (the sampler, ``OTEL_TRACES_SAMPLER``, applies as usual).

Services add their own instruments with :func:`meter`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from opentelemetry import metrics, trace
from opentelemetry.instrumentation.grpc import aio_server_interceptor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from strand.version import VERSION

_METER_NAME = "strand"
_interceptors: list[grpc.aio.ServerInterceptor] = []


def meter() -> metrics.Meter:
    return metrics.get_meter(_METER_NAME, VERSION)


class RpcMetricsInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Counts and times every unary RPC: ``strand.rpc.server.calls`` and
    ``strand.rpc.server.duration`` (seconds), by method and status."""

    def __init__(self, source: metrics.Meter | None = None) -> None:
        source = source or meter()
        self.calls = source.create_counter("strand.rpc.server.calls", unit="{call}",
                                           description="RPCs handled, by method and status")
        self.duration = source.create_histogram("strand.rpc.server.duration", unit="s",
                                                description="time to handle an RPC")

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        inner = handler.unary_unary
        method = handler_call_details.method
        calls, duration = self.calls, self.duration

        async def timed(request: Any, context: grpc.aio.ServicerContext) -> Any:
            start = time.perf_counter()
            status = "OK"
            try:
                return await inner(request, context)
            except BaseException:
                status = "ERROR"
                raise
            finally:
                attributes = {"rpc.method": method, "rpc.status": status}
                calls.add(1, attributes)
                duration.record(time.perf_counter() - start, attributes)

        return grpc.unary_unary_rpc_method_handler(
            timed, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)


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
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))
    tracer_provider = TracerProvider(resource=resource)
    if span_exporter is None and os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        span_exporter = OTLPSpanExporter()
    trace.set_tracer_provider(tracer_provider)
    _interceptors[:] = [RpcMetricsInterceptor()]
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
