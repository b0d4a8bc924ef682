"""A test OTLP collector: a real gRPC TraceService that keeps every span exported to
it, with the resource (which service, which process) each came from."""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import (
    trace_service_pb2,
    trace_service_pb2_grpc,
)

__all__ = ["CollectedSpan", "OtlpCollector"]


@dataclass(frozen=True, slots=True)
class CollectedSpan:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    service: str  # the resource's service.name
    instance: str  # the resource's service.instance.id
    attributes: dict[str, Any]


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, spans: list[CollectedSpan], lock: threading.Lock) -> None:
        self.spans = spans
        self.lock = lock

    def Export(self, request: Any, context: Any) -> Any:
        collected = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    collected.append(CollectedSpan(
                        span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(),
                        span.name, str(resource.get("service.name", "")),
                        str(resource.get("service.instance.id", "")),
                        {a.key: _value(a.value) for a in span.attributes}))
        with self.lock:
            self.spans.extend(collected)
        return trace_service_pb2.ExportTraceServiceResponse()


class OtlpCollector:
    """Listens on 127.0.0.1 (``endpoint``: what OTEL_EXPORTER_OTLP_ENDPOINT takes)."""

    def __init__(self) -> None:
        self._spans: list[CollectedSpan] = []
        self._lock = threading.Lock()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(  # type: ignore[no-untyped-call]
            _TraceService(self._spans, self._lock), self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> OtlpCollector:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(None)

    def spans(self, trace_id: str | None = None) -> list[CollectedSpan]:
        with self._lock:
            return [s for s in self._spans if trace_id is None or s.trace_id == trace_id]
