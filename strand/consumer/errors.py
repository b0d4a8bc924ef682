"""Errors raised by the consumer's own logic (not answered by a broker)."""

from __future__ import annotations

from strand.errors import ErrorCode, StrandError

__all__ = ["NoOffsetForPartitionError", "WakeupError"]


class NoOffsetForPartitionError(StrandError):
    """A partition has no position and ``auto_offset_reset='none'`` forbids choosing one:
    ``seek()`` it first (Kafka's NoOffsetForPartitionException)."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE


class WakeupError(Exception):
    """A blocking consumer call was ended by ``wakeup()`` from another thread (Kafka's
    WakeupException): not a failure, the usual way to stop a consumer loop."""
