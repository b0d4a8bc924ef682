"""Errors of the storage service, and the wire code that answers any exception."""

from __future__ import annotations

from strand.errors import ErrorCode, StrandError


class NotLeaderOrFollowerError(StrandError):
    """The partition exists but this node does not lead it (or not yet, or no more)."""

    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    retriable = True


class InvalidFetchSizeError(StrandError):
    code = ErrorCode.INVALID_FETCH_SIZE


class FencedLeaderEpochError(StrandError):
    """The client's leader epoch is older than the partition's: its metadata is stale."""

    code = ErrorCode.FENCED_LEADER_EPOCH
    retriable = True


class UnknownLeaderEpochError(StrandError):
    """The client's leader epoch is newer than this node knows: this node lags behind."""

    code = ErrorCode.UNKNOWN_LEADER_EPOCH
    retriable = True


class InvalidRequiredAcksError(StrandError):
    code = ErrorCode.INVALID_REQUIRED_ACKS


def wire_code(exc: BaseException) -> int:
    """The Kafka error code that answers ``exc`` (UNKNOWN_SERVER_ERROR for a bug)."""
    if isinstance(exc, StrandError):
        return int(exc.code)
    return int(ErrorCode.UNKNOWN_SERVER_ERROR)
