"""Asking the gateway servicer for a Kafka call, and the pieces of every answer.

The servicer refuses a whole call (an ACL, a limit) by aborting it; for a Kafka client
that refusal is the error code of every entry of the response. :func:`ask` turns it
into the protobuf answer the servicer would have given with that code, so a handler
translates refusals and answers alike.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any, TypeVar

from services.gateway.kafka.call import CallRefused, KafkaCall
from services.gateway.kafka.messages import response_module
from strand.errors import ErrorCode
from strand.v1 import common_pb2

__all__ = ["NO_THROTTLE", "ask", "module_of", "pb_code", "strand_code"]

# The servicer's throttling already held the call back; nothing more to ask of the client.
NO_THROTTLE = datetime.timedelta(0)

Answer = TypeVar("Answer")


def module_of(request: Any) -> ModuleType:
    """kio's module of the responses to ``request`` (its API, its version)."""
    return response_module(request.__api_key__, request.__version__)


def pb_code(code: ErrorCode) -> Any:
    """The protobuf enum value of a Strand error code (a ``*_pb2`` message's field)."""
    return common_pb2.ErrorCode.Value(code.name)


def strand_code(code: int) -> ErrorCode:
    return ErrorCode(code)


async def ask(method: Callable[[Any, Any], Awaitable[Answer]], request: Any,
              call: KafkaCall, refused: Callable[[CallRefused], Answer]) -> Answer:
    """Call a servicer method for this Kafka call; a refusal of the whole call becomes
    ``refused(exc)``, the protobuf answer carrying its error code."""
    try:
        return await method(request, call.context)
    except CallRefused as exc:
        return refused(exc)
