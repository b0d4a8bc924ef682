"""Every RPC of a service is counted, timed and traced (a real grpc.aio server)."""

from __future__ import annotations

import asyncio

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from strand.service.telemetry import setup_telemetry


def test_rpcs_are_counted_timed_and_traced() -> None:
    reader = InMemoryMetricReader()
    spans = InMemorySpanExporter()

    async def scenario() -> None:
        interceptors = setup_telemetry("test", metric_readers=[reader], span_exporter=spans)
        server = grpc.aio.server(interceptors=interceptors)
        servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            for _ in range(3):
                await stub.Check(health_pb2.HealthCheckRequest())
            try:
                await stub.Check(health_pb2.HealthCheckRequest(service="nope"))
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.NOT_FOUND
        await server.stop(None)

    asyncio.run(scenario())
    data = reader.get_metrics_data()
    assert data is not None
    points: dict[str, list[object]] = {}
    for resource_metrics in data.resource_metrics:
        assert resource_metrics.resource.attributes["service.name"] == "strand-test"
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                points.setdefault(metric.name, []).extend(metric.data.data_points)
    calls = {(p.attributes["request"], p.attributes["service"],  # type: ignore[attr-defined]
              p.attributes["status"]): p.value  # type: ignore[attr-defined]
             for p in points["strand.requests"]}
    assert calls == {("Check", "grpc.health.v1.Health", "OK"): 3,
                     ("Check", "grpc.health.v1.Health", "NOT_FOUND"): 1}
    durations = points["strand.request.total_time"]
    assert sum(p.count for p in durations) == 4  # type: ignore[attr-defined]
    # Seconds, in buckets made for them (not OpenTelemetry's millisecond defaults).
    assert durations[0].explicit_bounds[0] == 0.0005  # type: ignore[attr-defined]
    from opentelemetry import trace

    trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
    names = [span.name for span in spans.get_finished_spans()]
    assert names.count("/grpc.health.v1.Health/Check") == 4


def test_without_an_exporter_rpcs_are_counted_but_not_traced() -> None:
    """No span exporter (no OTEL_EXPORTER_OTLP_ENDPOINT): nobody would see the spans,
    so no tracing interceptor records one per call; the metrics stay."""
    interceptors = setup_telemetry("test", metric_readers=[InMemoryMetricReader()])
    assert [type(i).__name__ for i in interceptors] == ["RequestMetricsInterceptor"]
    with_spans = setup_telemetry("test", metric_readers=[InMemoryMetricReader()],
                                 span_exporter=InMemorySpanExporter())
    assert len(with_spans) == 2 and type(with_spans[1]).__name__ == "RequestMetricsInterceptor"
