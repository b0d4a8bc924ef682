"""The futures ``Producer.send()`` returns, and the per-batch latch behind them.

Modelled on Kafka's ``ProduceRequestResult`` / ``FutureRecordMetadata``: a batch
has one ``BatchResult`` (a latch plus the batch's outcome) and each record gets a
small ``RecordFuture`` pointing at it with the record's place in the batch.
Creating a ``concurrent.futures.Future`` per record (a Condition, an RLock and a
few containers each) cost a fifth of the producer's time; a record future here is
one slotted object, and its ``RecordMetadata`` is only made when someone asks.

``RecordFuture`` offers the part of ``concurrent.futures.Future``'s API that a
producer's future needs: ``result()``, ``exception()``, ``done()``,
``add_done_callback()``, and ``cancel()`` (always False: an appended record is on
its way). It is not a ``concurrent.futures.Future`` subclass, so
``concurrent.futures.wait`` and ``asyncio.wrap_future`` do not take it; in asyncio
use ``await loop.run_in_executor(None, future.result)`` or ``on_delivery``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["BatchResult", "RecordFuture", "RecordMetadata"]

log = logging.getLogger(__name__)

NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where a record landed (Kafka's RecordMetadata).

    ``offset`` is -1 when it is unknown (``acks=0``). ``timestamp`` is the record's
    create time, or the broker's append time when the topic uses LogAppendTime.
    The sizes are -1 for a null key or value.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int


class BatchResult:
    """The outcome of one batch, shared by the futures of its records: set once."""

    __slots__ = ("_callbacks", "_event", "_lock", "base_offset", "error", "log_append_time",
                 "partition", "topic")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.base_offset = -1
        self.log_append_time = NO_TIMESTAMP
        self.error: BaseException | None = None
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[tuple[RecordFuture, Callable[[RecordFuture], object]]] = []

    @property
    def done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None) -> bool:
        return self._event.wait(timeout)

    def set(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        """Record the outcome, wake every waiter, then run the done callbacks."""
        with self._lock:
            if self._event.is_set():
                raise RuntimeError(f"the result of {self.topic}-{self.partition} is already set")
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.error = error
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for future, fn in callbacks:
            _run_done_callback(future, fn)

    def add_done_callback(self, future: RecordFuture,
                          fn: Callable[[RecordFuture], object]) -> None:
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append((future, fn))
                return
        _run_done_callback(future, fn)


def _run_done_callback(future: RecordFuture, fn: Callable[[RecordFuture], object]) -> None:
    try:
        fn(future)
    except Exception:  # as concurrent.futures does: log, do not break the others
        log.exception("a done callback of %r raised", future)


class RecordFuture:
    """The future of one record's delivery; see the module docstring."""

    __slots__ = ("_relative_offset", "_result", "key_size", "timestamp", "value_size")

    def __init__(self, result: BatchResult, relative_offset: int, timestamp: int,
                 key_size: int, value_size: int) -> None:
        self._result = result
        self._relative_offset = relative_offset
        self.timestamp = timestamp
        self.key_size = key_size
        self.value_size = value_size

    def __repr__(self) -> str:
        result = self._result
        state = "pending" if not result.done else ("failed" if result.error else "done")
        return (f"RecordFuture({result.topic}-{result.partition}, "
                f"record {self._relative_offset} of its batch, {state})")

    def cancel(self) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return not self._result.done

    def done(self) -> bool:
        return self._result.done

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata; raises its delivery error, or TimeoutError if
        ``timeout`` seconds pass first."""
        result = self._result
        if not result.wait(timeout):
            raise TimeoutError(f"{self!r} not done within {timeout} s")
        if result.error is not None:
            raise result.error
        return self.metadata()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The delivery error, or None once delivered; TimeoutError if ``timeout`` passes."""
        result = self._result
        if not result.wait(timeout):
            raise TimeoutError(f"{self!r} not done within {timeout} s")
        return result.error

    def add_done_callback(self, fn: Callable[[RecordFuture], object]) -> None:
        """Call ``fn(future)`` once the record is delivered or failed (at once if it is)."""
        self._result.add_done_callback(self, fn)

    def metadata(self) -> RecordMetadata:
        """The metadata of a delivered record (its batch must have completed)."""
        result = self._result
        base = result.base_offset
        append_time = result.log_append_time
        return RecordMetadata(
            result.topic,
            result.partition,
            -1 if base < 0 else base + self._relative_offset,
            self.timestamp if append_time == NO_TIMESTAMP else append_time,
            self.key_size,
            self.value_size,
        )
