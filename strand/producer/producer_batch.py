"""One batch of the producer: the records of one partition sent (and retried) together.

Modelled on Kafka's ``ProducerBatch``: it wraps a ``BatchBuilder`` and keeps, per
record, its ``RecordFuture`` and delivery callback. The accumulator appends to it
under the accumulator's lock (``has_room_for`` / ``size_in_batch`` say whether a
record fits in ``batch_size``); once full or drained it is closed for appends and
``build()`` makes its bytes once, so that a retry resends the same bytes.

Completion (``complete`` / ``fail``) happens exactly once: a small lock of the
batch's own decides which call wins; the winner records the outcome, runs the
callbacks in record order, resolves the futures, then calls ``on_done`` (the
accumulator forgets the batch and returns its memory). None of it runs under the
accumulator's lock, so a callback may append again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from strand.producer.future import BatchResult, RecordFuture, RecordMetadata
from strand.records import BatchBuilder, Compression, Header
from strand.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from strand.records.sizes import record_fields_size, record_size_from_fields

__all__ = ["NO_TIMESTAMP", "Callback", "ProducerBatch", "TopicPartition"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

NO_TIMESTAMP = -1

Callback = Callable[[RecordMetadata | None, BaseException | None], None]


class ProducerBatch:
    """Records for one partition, sent (and retried) together as one RecordBatch v2.

    Wraps a ``BatchBuilder`` and keeps, per record, its future and callback. Appends
    are made by the accumulator under its lock; once the batch is drained (or full)
    it is closed for appends and ``build()`` makes its bytes, once: a retry resends
    the same bytes.
    """

    __slots__ = (
        "_base_timestamp",
        "_batch_size",
        "_builder",
        "_built",
        "_callbacks",
        "_closed",
        "_done_lock",
        "_on_done",
        "_outcome",
        "_result",
        "attempts",
        "base_sequence",
        "created_ms",
        "drained_ms",
        "last_attempt_ms",
        "maybe_written",
        "memory",
        "partition",
        "producer_epoch",
        "producer_id",
        "queued",
        "sequence",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        *,
        batch_size: int,
        created_ms: float,
        compression: Compression = Compression.NONE,
        sequence: int = 0,
        on_done: Callable[[ProducerBatch], None] | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self._builder = BatchBuilder(compression=compression)
        self._batch_size = batch_size
        self.created_ms = created_ms
        self.last_attempt_ms = created_ms
        self.drained_ms: float | None = None
        self.attempts = 0
        self.sequence = sequence  # creation order: retries go back in this order
        self.memory = 0  # bytes counted against buffer_memory, returned on completion
        self.queued = False  # in its partition's deque (maintained by the accumulator)
        self._result = BatchResult(topic, partition)
        self._callbacks: list[tuple[RecordFuture, Callback]] = []  # in record order
        self._base_timestamp: int | None = None
        self._closed = False
        self._built: bytes | None = None
        self._done_lock = threading.Lock()
        self._outcome: str | None = None  # None, "completed" or "failed"
        self._on_done = on_done
        # Set by the idempotent producer when the batch is first sent (see
        # strand.producer.transaction_manager); kept across retries.
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = NO_SEQUENCE
        # The idempotent producer's view of its attempts so far: True while one of them
        # may have been written (its answer was lost or ambiguous); False once storage
        # refused the batch by its sequence, or before it was ever sent.
        self.maybe_written = False

    def __repr__(self) -> str:
        return (
            f"ProducerBatch({self.topic}-{self.partition}, records={self.record_count}, "
            f"bytes={self.estimated_size}, attempts={self.attempts}, "
            f"state={self._outcome or ('closed' if self._closed else 'open')})"
        )

    @property
    def topic_partition(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def record_count(self) -> int:
        return self._builder.record_count

    @property
    def estimated_size(self) -> int:
        """Bytes on the wire: exact once built, else the uncompressed size (an upper bound
        unless compression expands the data)."""
        if self._built is not None:
            return len(self._built)
        return self._builder.uncompressed_size

    @property
    def is_full(self) -> bool:
        return self._closed or self._builder.uncompressed_size >= self._batch_size

    @property
    def is_closed(self) -> bool:
        """Closed for appends (full, drained or aborted)."""
        return self._closed

    @property
    def is_done(self) -> bool:
        return self._outcome is not None

    @property
    def succeeded(self) -> bool:
        return self._outcome == "completed"

    @property
    def error(self) -> BaseException | None:
        """Why the batch failed (None unless it did)."""
        return self._result.error

    @property
    def has_sequence(self) -> bool:
        return self.base_sequence != NO_SEQUENCE

    def set_producer_state(self, producer_id: int, epoch: int, base_sequence: int,
                           transactional: bool = False) -> None:
        """Stamp the batch for the idempotent (and transactional) producer; its bytes
        are built again."""
        self.producer_id = producer_id
        self.producer_epoch = epoch
        self.base_sequence = base_sequence
        self._builder.set_producer_state(producer_id, epoch, base_sequence, transactional)
        self._built = None

    def reset_producer_state(self) -> None:
        """Forget the sequence (an epoch bump): the next send assigns a new one."""
        self.set_producer_state(NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE)
        self.maybe_written = False

    def waited_ms(self, now: float) -> float:
        """Time since creation, or since the last attempt for a retried batch."""
        return max(0.0, now - self.last_attempt_ms)

    def size_of(
        self, key: bytes | None, value: bytes | None, headers: Sequence[Header], timestamp: int
    ) -> int:
        """Bytes the record would add to this batch (with this batch's offset and time deltas)."""
        return self.size_in_batch(record_fields_size(key, value, headers), timestamp)

    def size_in_batch(self, fields_size: int, timestamp: int) -> int:
        """``size_of`` from the record's ``record_fields_size`` (computed once per record)."""
        base = self._base_timestamp
        return record_size_from_fields(
            fields_size, self._builder.record_count, 0 if base is None else timestamp - base
        )

    def has_room_for(self, size: int) -> bool:
        if self._closed:
            return False
        if self._builder.record_count == 0:
            return True  # a record always fits in an empty batch, whatever its size
        return self._builder.uncompressed_size + size <= self._batch_size

    def append(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        timestamp: int,
        callback: Callback | None = None,
    ) -> RecordFuture:
        """Add a record (no room check: see ``has_room_for``); returns its future."""
        if self._closed:
            raise RuntimeError(f"{self!r} is closed for appends")
        relative_offset = self._builder.append(value, key, headers, timestamp)
        if self._base_timestamp is None:
            self._base_timestamp = timestamp
        future = RecordFuture(
            self._result,
            relative_offset,
            timestamp,
            -1 if key is None else len(key),
            -1 if value is None else len(value),
        )
        if callback is not None:
            self._callbacks.append((future, callback))
        return future

    def close_for_appends(self) -> None:
        self._closed = True

    def build(self) -> bytes:
        """The batch's bytes (base offset 0; the broker assigns offsets). Built once."""
        self._closed = True
        built = self._built
        if built is None:
            built = self._built = self._builder.build()
        return built

    def complete(self, base_offset: int, log_append_time: int = NO_TIMESTAMP) -> bool:
        """The broker appended the batch at ``base_offset``: record i got base_offset + i.

        ``log_append_time`` (not -1) replaces the records' timestamps (LogAppendTime
        topics). Returns False if the batch had already been completed or failed.
        """
        return self._finish(base_offset, log_append_time, None)

    def fail(self, exc: BaseException) -> bool:
        """Fail every record of the batch with ``exc``. False if it was already done."""
        return self._finish(-1, NO_TIMESTAMP, exc)

    def _finish(self, base_offset: int, log_append_time: int, exc: BaseException | None) -> bool:
        with self._done_lock:
            if self._outcome is not None:
                return False
            self._outcome = "completed" if exc is None else "failed"
            self._closed = True
        result = self._result
        # As in Kafka: the outcome is recorded first, then the callbacks run in record
        # order, then the futures' waiters wake up, so that a caller woken by
        # future.result() sees every callback of the batch already run.
        result.base_offset = base_offset
        result.log_append_time = log_append_time
        result.error = exc
        for future, callback in self._callbacks:
            try:
                callback(future.metadata() if exc is None else None, exc)
            except Exception:
                log.exception("producer callback for %s-%d raised", self.topic, self.partition)
        self._callbacks = []
        result.set(base_offset, log_append_time, exc)
        if self._on_done is not None:
            self._on_done(self)
        return True
