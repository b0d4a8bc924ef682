"""Errors raised by the producer's client-side machinery (not by a broker)."""

from __future__ import annotations

from strand.errors import ErrorCode, StrandError

__all__ = ["BufferExhaustedError", "ProducerClosedError"]


class BufferExhaustedError(StrandError):
    """``send()`` waited ``max_block_ms`` for room in ``buffer_memory`` and got none.

    Records are produced faster than they are delivered (or the brokers are
    unreachable). Kafka's BufferExhaustedException, a TimeoutException, hence the
    REQUEST_TIMED_OUT code. Not retried by the producer: the caller decides whether to
    slow down, retry or drop the record.
    """

    code = ErrorCode.REQUEST_TIMED_OUT
    retriable = False


class ProducerClosedError(StrandError):
    """A record was sent, or was waiting for buffer memory, after the producer was closed."""

    retriable = False
