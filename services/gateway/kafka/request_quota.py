"""The request-time quota (``request_percentage``) for Kafka clients, as the gRPC
API's interceptor applies it (:mod:`services.gateway.request_time`): the CPU time the
gateway spends on a client's request is metered, and a client over its share has its
answer delayed, the throttle time in the answer (the larger of this one and a byte
rate's, as Kafka reports). Only clients a request quota applies to are timed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from services.gateway.access import CALLER
from services.gateway.kafka.call import Handler, KafkaCall
from services.gateway.kafka.messages import milliseconds, timedelta_ms
from services.gateway.request_time import run_timed
from services.gateway.throttling import Throttling

__all__ = ["served"]


async def served(throttling: Throttling, handler: Handler, request: Any,
                 call: KafkaCall) -> Any:
    """``handler``'s answer to ``request``, metered against the caller's quota."""
    caller = CALLER.get(None)
    if not throttling.has_request_quota(caller):
        return await handler(request, call)

    async def handled() -> Any:
        return await handler(request, call)

    await throttling.wait_turn(throttling.requests, caller)
    response, cpu_s = await run_timed(handled())
    throttle_time = getattr(response, "throttle_time", None)
    held_ms = milliseconds(throttle_time) if throttle_time is not None else 0
    throttle_ms = await throttling.throttle(throttling.requests, caller, cpu_s * 1000,
                                            already_held_ms=held_ms)
    if throttle_ms > held_ms and throttle_time is not None:
        response = dataclasses.replace(response, throttle_time=timedelta_ms(throttle_ms))
    return response
