"""The storage service's errors (all defined in :mod:`strand.errors`) and the wire
code that answers any exception."""

from __future__ import annotations

import logging
from typing import Protocol

from strand.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    InvalidFetchSizeError,
    InvalidRequiredAcksError,
    NotLeaderOrFollowerError,
    StrandError,
    UnknownLeaderEpochError,
)

__all__ = [
    "FencedLeaderEpochError",
    "InvalidFetchSizeError",
    "InvalidRequiredAcksError",
    "NotLeaderOrFollowerError",
    "UnknownLeaderEpochError",
    "fail_partition",
    "wire_code",
]

log = logging.getLogger("services.storage")


class PartitionOutcome(Protocol):
    topic: str
    partition: int
    error_code: int
    error_message: str


def wire_code(exc: BaseException) -> int:
    """The Kafka error code that answers ``exc`` (UNKNOWN_SERVER_ERROR for a bug)."""
    if isinstance(exc, StrandError):
        return int(exc.code)
    return int(ErrorCode.UNKNOWN_SERVER_ERROR)


def fail_partition(result: PartitionOutcome, exc: BaseException, what: str) -> None:
    """Answer one partition of a request with ``exc``'s typed error; an unexpected
    exception (a bug) is logged with its traceback."""
    result.error_code = wire_code(exc)
    result.error_message = str(exc) or type(exc).__name__
    if result.error_code < 0:
        log.error("%s failed", what, exc_info=exc,
                  extra={"topic": result.topic, "partition": result.partition})
