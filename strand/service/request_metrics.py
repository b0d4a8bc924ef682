"""Every request a service serves, counted and timed under the names operators know
from Kafka's ``RequestMetrics``: ``strand_requests_total`` (``RequestsPerSec``) and
the ``strand_request_total_time_seconds`` histogram (``TotalTimeMs``), both by
``request`` (the API: ``Produce``, ``Fetch``, ``JoinGroup``…), ``service`` (which
gRPC service served it; ``kafka`` for the gateway's Kafka listener, whose ``request``
is Kafka's API name) and ``status`` (OK or the gRPC status code's name; CLOSED for a
Kafka request that closed its connection instead of being answered)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from opentelemetry import metrics

__all__ = ["REQUEST_LATENCY_BUCKETS_S", "RequestMeters", "RequestMetricsInterceptor",
           "api_of"]

# Seconds: a fetch's long poll (500 ms), an acks=all produce (a few ms) and a
# metadata call (well under 1 ms) all land in a bucket of their own.
REQUEST_LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                             0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
REQUESTS = "strand.requests"
REQUEST_TOTAL_TIME = "strand.request.total_time"


def api_of(method: str) -> tuple[str, str]:
    """("Produce", "strand.v1.Gateway") of "/strand.v1.Gateway/Produce"."""
    service, _, api = method.lstrip("/").rpartition("/")
    return api or method, service


class RequestMeters:
    """The two instruments; :meth:`record` one request served (by any server)."""

    def __init__(self, source: metrics.Meter) -> None:
        self.requests = source.create_counter(
            REQUESTS, unit="{request}", description="requests served, by API and status")
        self.total_time = source.create_histogram(
            REQUEST_TOTAL_TIME, unit="s",
            description="time from a request's arrival to its answer, by API")

    def record(self, api: str, service: str, status: str, seconds: float) -> None:
        attributes = {"request": api, "service": service, "status": status}
        self.requests.add(1, attributes)
        self.total_time.record(seconds, attributes)


class RequestMetricsInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Counts and times every unary request by API, service and status."""

    def __init__(self, source: metrics.Meter) -> None:
        self.meters = RequestMeters(source)

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        inner = handler.unary_unary
        api, service = api_of(handler_call_details.method)
        meters = self.meters

        async def timed(request: Any, context: grpc.aio.ServicerContext) -> Any:
            start = time.perf_counter()
            status = "OK"
            try:
                return await inner(request, context)
            except BaseException:
                code = context.code()
                status = code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
                raise
            finally:
                meters.record(api, service, status, time.perf_counter() - start)

        return grpc.unary_unary_rpc_method_handler(
            timed, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)
