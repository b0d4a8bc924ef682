"""W3C trace context on the SDK's and the services' gRPC calls.

When tracing is on, every call a channel makes is a client span whose context goes
in the call's metadata (``traceparent``/``tracestate``), so that the server's span
(and what it calls in turn) joins the caller's trace: one produce is followed from
the application through the gateway to the partition leader and its followers.

On means: a service set up with a span exporter (:func:`set_call_tracing`, from
``strand.service.telemetry``), or, in an application, an OpenTelemetry SDK tracer
provider installed before the client is created. Otherwise the channels carry no
interceptor at all: an untraced call costs nothing.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["aio_tracing_interceptors", "call_tracing_on", "set_call_tracing",
           "traced_channel"]

_forced: bool | None = None


def set_call_tracing(on: bool | None) -> None:
    """Force call tracing on or off for this process (None: decide from the tracer
    provider, as an application's clients do)."""
    global _forced
    _forced = on


def call_tracing_on() -> bool:
    if _forced is not None:
        return _forced
    # No OpenTelemetry imported, no provider installed: nothing to import then (the
    # CLI's start-up time).
    if "opentelemetry.trace" not in sys.modules:
        return False
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    return not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def aio_tracing_interceptors() -> list[Any]:
    """The interceptors an asyncio channel takes (empty when tracing is off)."""
    if not call_tracing_on():
        return []
    from opentelemetry.instrumentation.grpc import aio_client_interceptors

    return list(aio_client_interceptors())


def traced_channel(channel: Any) -> Any:
    """``channel`` (a blocking-API one) with a span per call when tracing is on."""
    if not call_tracing_on():
        return channel
    # OpenTelemetry's own intercept_channel: its interceptor is not a grpc one.
    from opentelemetry.instrumentation.grpc import client_interceptor
    from opentelemetry.instrumentation.grpc.grpcext import intercept_channel

    return intercept_channel(channel, client_interceptor())
