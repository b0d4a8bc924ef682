"""The request-time quota (Kafka's ``request_percentage``, ClientRequestQuotaManager):
the share of the gateway's time a client's requests may take.

Kafka meters the time its network and I/O threads spend on a request, not the time
the request waits (in purgatory, for replicas). The gateway's equivalent is the CPU
time its event loop spends running the request's handler — decoding, checks, routing,
merging answers — without the time it awaits storage nodes and coordinators: each
step of the handler's coroutine is timed with the thread's CPU clock
(:func:`run_timed`). A client over its quota is throttled like for byte rates: the
answer is delayed (by at most one quota window, as Kafka bounds it) and carries the
throttle time where the answer has a ``throttle_time_ms``; its next request waits for
the throttle to end. Only clients a request quota applies to are timed.
"""

from __future__ import annotations

import time
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, TypeVar

import grpc

from services.gateway.access import CALLER
from services.gateway.throttling import Throttling

__all__ = ["RequestTimeInterceptor", "run_timed"]

T = TypeVar("T")


@types.coroutine
def _drive(coroutine: Coroutine[Any, Any, T], spent: list[float]) -> Generator[Any, Any, T]:
    """Run ``coroutine`` step by step, adding the CPU time of each step to spent[0]."""
    sent: Any = None
    thrown: BaseException | None = None
    while True:
        start = time.thread_time()
        try:
            yielded = coroutine.send(sent) if thrown is None else coroutine.throw(thrown)
        except StopIteration as done:
            spent[0] += time.thread_time() - start
            return done.value  # type: ignore[no-any-return]
        except BaseException:
            spent[0] += time.thread_time() - start
            raise
        spent[0] += time.thread_time() - start
        try:
            sent, thrown = (yield yielded), None
        except BaseException as exc:  # cancellation, passed on to the coroutine
            sent, thrown = None, exc


async def run_timed(coroutine: Coroutine[Any, Any, T]) -> tuple[T, float]:
    """``coroutine``'s result and the CPU seconds this thread spent running it (the
    time it awaited other things not counted)."""
    spent = [0.0]
    result = await _drive(coroutine, spent)
    return result, spent[0]


class RequestTimeInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Times the requests of clients with a request quota and throttles them. Runs
    inside the principal's check (it reads the caller that check sets)."""

    def __init__(self, throttling: Throttling) -> None:
        self.throttling = throttling

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        inner = handler.unary_unary
        throttling = self.throttling

        async def timed(request: Any, context: grpc.aio.ServicerContext) -> Any:
            caller = CALLER.get(None)
            if not throttling.has_request_quota(caller):
                return await inner(request, context)
            await throttling.wait_turn(throttling.requests, caller)
            response, cpu_s = await run_timed(inner(request, context))
            held_ms = getattr(response, "throttle_time_ms", 0)
            throttle_ms = await throttling.throttle(
                throttling.requests, caller, cpu_s * 1000, already_held_ms=held_ms)
            if throttle_ms > held_ms and hasattr(response, "throttle_time_ms"):
                response.throttle_time_ms = throttle_ms  # Kafka: the larger of the two
            return response

        return grpc.unary_unary_rpc_method_handler(
            timed, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)
