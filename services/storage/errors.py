"""The storage service's errors (all defined in :mod:`strand.errors`) and the wire
code that answers any exception."""

from __future__ import annotations

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
    "wire_code",
]


def wire_code(exc: BaseException) -> int:
    """The Kafka error code that answers ``exc`` (UNKNOWN_SERVER_ERROR for a bug)."""
    if isinstance(exc, StrandError):
        return int(exc.code)
    return int(ErrorCode.UNKNOWN_SERVER_ERROR)
