"""Errors raised by the consumer's own logic (not answered by a broker)."""

from __future__ import annotations

from strand.errors import ErrorCode, StrandError

__all__ = ["NoOffsetForPartitionError"]


class NoOffsetForPartitionError(StrandError):
    """A partition has no position and ``auto_offset_reset='none'`` forbids choosing one:
    ``seek()`` it first (Kafka's NoOffsetForPartitionException)."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE
