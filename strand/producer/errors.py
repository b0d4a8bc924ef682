"""Errors raised by the producer's client-side machinery (not by a broker)."""

from __future__ import annotations

from strand.errors import ErrorCode, RequestTimedOutError, StrandError

__all__ = ["BufferExhaustedError", "OutcomeUnknownError", "ProducerClosedError",
           "TransactionAbortableError"]


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


class TransactionAbortableError(StrandError):
    """The open transaction cannot commit any more (a send of it failed, a partition
    or the offsets could not be added): call ``abort_transaction()``, then begin a new
    one. The producer itself stays usable (unlike ProducerFencedError). ``cause`` is
    the failure; the error's code is the cause's (Kafka's TransactionAbortableException
    wraps it the same way)."""

    retriable = False

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause
        if isinstance(cause, StrandError):
            self.code = cause.code


class OutcomeUnknownError(RequestTimedOutError):
    """An idempotent producer gave up on a batch whose earlier attempt may have been
    written (its answer was lost: a timeout, a dropped connection), so the records
    may or may not be in the log; read the partition to find out.

    Not retriable: sending the records again may write them twice. The producer does
    not resend such a batch under a new epoch either (KIP-360: that would be a
    duplicate storage cannot recognise); Kafka's client fails it with a timeout too.
    """

    retriable = False
