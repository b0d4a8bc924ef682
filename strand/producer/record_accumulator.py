"""The producer's record accumulator: per-partition batches waiting to be sent.

Modelled on Kafka's ``RecordAccumulator``; the batches are ``ProducerBatch``
(``producer_batch.py``) and ``buffer_memory`` is a ``BufferPool``
(``buffer_pool.py``). The accumulator picks or opens the batch a record goes to,
asks the pool for the record's bytes, and hands batches to the sender:

* ``append()`` (application threads) adds a record to the open batch of its
  partition, opening a new batch when the record would take the open one past
  ``batch_size`` bytes; a record bigger than ``batch_size`` gets a batch of its own.
* ``ready()`` (the I/O thread) says which leaders have a batch worth sending: full,
  lingered ``linger_ms``, or pushed out by a flush, a close or memory pressure.
* ``drain()`` takes batches for those leaders, at most one per partition per call,
  starting where the previous call for the same leader stopped, so that every
  partition gets its turn when ``max_request_bytes`` cannot hold them all.
* The sender completes a batch (``ProducerBatch.complete`` / ``fail``) or puts it
  back for a retry (``reenqueue``); completion resolves every record's future, runs
  the callbacks in record order and returns the batch's bytes to ``buffer_memory``.

Memory: ``buffer_memory`` bounds the bytes of all batches not yet completed
(counted as their uncompressed size, record by record, as ``strand.records.sizes``
computes it). An append that does not fit waits in the pool's queue, first come
first served, up to ``max_block_ms`` for completions to make room, then raises
BufferExhaustedError. While anyone waits, every batch is sendable, as in Kafka.

Locking: one ``threading.Lock`` per accumulator guards the deques, the batches'
append state, the counters and, since the pool is given this same lock, the
memory count and its waiters. Memory waiters and flush waiters wait on
``threading.Condition`` objects built on that lock; there is no other lock for
them to deadlock with. Nothing slow runs under it: compression
(``ProducerBatch.build``), the ``leader_of`` look-ups, user callbacks and futures
all run outside it, so a callback may call ``append()`` again. Each
``ProducerBatch`` also has a small lock of its own so that exactly one of
complete / fail wins; it is never held while taking the accumulator's. Times
given to ``ready``/``drain``/``reenqueue`` and read from ``clock`` are
milliseconds of one monotonic clock; ``max_block_ms`` is measured with
``time.monotonic``.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from strand.errors import InvalidTimestampError, RecordTooLargeError
from strand.producer.buffer_pool import BufferPool, MemoryWaiter
from strand.producer.errors import ProducerClosedError
from strand.producer.future import RecordFuture
from strand.producer.producer_batch import NO_TIMESTAMP, Callback, ProducerBatch, TopicPartition
from strand.producer.producer_metrics import ProducerMetrics
from strand.producer.transaction_manager import TransactionManager
from strand.records import HEADER_SIZE, Compression, Header
from strand.records.builder import now_ms
from strand.records.sizes import record_fields_size, record_size_from_fields

__all__ = [
    "LeaderOf",
    "ReadyCheckResult",
    "RecordAccumulator",
    "RecordAppendResult",
]

LeaderOf = Callable[[TopicPartition], int | None]

_INT64_MAX = (1 << 63) - 1


class RecordAppendResult(NamedTuple):
    """What ``append()`` did. ``future`` is None only when ``abort_for_new_batch``."""

    future: RecordFuture | None
    batch_is_full: bool  # a batch of the partition is ready to go: wake the sender
    new_batch_created: bool
    abort_for_new_batch: bool = False  # sticky partitioning: choose again, then append
    appended_bytes: int = 0


class ReadyCheckResult(NamedTuple):
    ready_nodes: set[int]
    next_ready_check_delay_ms: float  # math.inf when no batch is waiting on a timer
    unknown_leader_partitions: set[TopicPartition]


def _monotonic_ms() -> float:
    return time.monotonic() * 1000.0


class RecordAccumulator:
    """Batches records per partition for the sender; see the module docstring."""

    def __init__(
        self,
        *,
        batch_size: int = 16384,
        linger_ms: float = 5,
        buffer_memory: int = 32 * 1024 * 1024,
        max_block_ms: float = 60_000,
        retry_backoff_ms: float = 100,
        compression: Compression | str = Compression.NONE,
        clock: Callable[[], float] = _monotonic_ms,
        wakeup: Callable[[], None] | None = None,
    ) -> None:
        """``wakeup`` (optional) is called, under the accumulator's lock, when an append
        starts waiting for memory, so the sender can send at once; it must not block
        nor call into the accumulator (e.g. ``Event.set``, ``loop.call_soon_threadsafe``)."""
        if batch_size < 0:
            raise ValueError(f"batch_size must be >= 0, got {batch_size}")
        if linger_ms < 0:
            raise ValueError(f"linger_ms must be >= 0, got {linger_ms}")
        if buffer_memory <= 0:
            raise ValueError(f"buffer_memory must be positive, got {buffer_memory}")
        if max_block_ms < 0:
            raise ValueError(f"max_block_ms must be >= 0, got {max_block_ms}")
        if retry_backoff_ms < 0:
            raise ValueError(f"retry_backoff_ms must be >= 0, got {retry_backoff_ms}")
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.buffer_memory = buffer_memory
        self.max_block_ms = max_block_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.compression = Compression.parse(compression)
        self._clock = clock

        self._lock = threading.Lock()
        self._pool = BufferPool(buffer_memory, lock=self._lock, on_wait=wakeup)
        self._batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._partitions: list[TopicPartition] = []  # keys of _batches, sorted (drain order)
        self._incomplete: set[ProducerBatch] = set()
        self._muted: set[TopicPartition] = set()
        self._drain_from: dict[int, TopicPartition] = {}  # per node: where the next drain starts
        self._flush_done = threading.Condition(self._lock)
        self._flushes = 0
        self._sequence = 0
        self._closed = False
        self._leader_of: LeaderOf | None = None
        # Set by an idempotent producer: sequences are assigned when batches are drained.
        self.transaction_manager: TransactionManager | None = None
        self.metrics: ProducerMetrics | None = None  # set by the Producer

    # ------------------------------------------------------------------ append

    def append(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
        timestamp: int | None = None,
        *,
        callback: Callback | None = None,
        abort_on_new_batch: bool = False,
        max_block_ms: float | None = None,
    ) -> RecordAppendResult:
        """Add a record to the partition's open batch, or to a new one.

        Blocks up to ``max_block_ms`` (default: the accumulator's) while
        ``buffer_memory`` is full, then raises BufferExhaustedError. A record that
        cannot fit in ``buffer_memory`` even alone raises RecordTooLargeError at
        once. With ``abort_on_new_batch`` (sticky partitioning, KIP-480) an append
        that would open a new batch does nothing and returns
        ``abort_for_new_batch=True``: the caller switches partition and appends again.
        ``callback(metadata, exception)`` runs when the batch completes, before the
        future resolves, in record order within the partition.
        """
        if timestamp is None:
            timestamp = now_ms()
        elif not NO_TIMESTAMP <= timestamp <= _INT64_MAX:
            raise InvalidTimestampError(f"timestamp {timestamp} is not in [-1, 2^63-1]")
        if not isinstance(headers, list | tuple):
            headers = list(headers)
        # The size of the record in a batch of its own; also checks the types up front,
        # before any state changes.
        fields = record_fields_size(key, value, headers)
        alone = HEADER_SIZE + record_size_from_fields(fields, 0, 0)
        if alone > self.buffer_memory:
            raise RecordTooLargeError(
                f"the record takes {alone} bytes in a batch, more than the whole "
                f"buffer_memory ({self.buffer_memory} bytes)"
            )
        block_ms = self.max_block_ms if max_block_ms is None else max_block_ms
        tp = (topic, partition)
        pool = self._pool
        waiter: MemoryWaiter | None = None
        with self._lock:
            try:
                while True:
                    if self._closed:
                        raise ProducerClosedError("the producer is closed: cannot send")
                    dq = self._batches.get(tp)
                    if dq is None:
                        dq = self._batches[tp] = deque()
                        bisect.insort(self._partitions, tp)
                    last = dq[-1] if dq else None
                    if last is not None and not last.is_closed:
                        size = needed = last.size_in_batch(fields, timestamp)
                        if not last.has_room_for(size):
                            last.close_for_appends()
                            continue  # now it needs a new batch
                        if pool.try_allocate(size, waiter):
                            try:
                                future = last.append(key, value, headers, timestamp, callback)
                            except BaseException:
                                pool.release(size)
                                raise
                            last.memory += size
                            return RecordAppendResult(
                                future, len(dq) > 1 or last.is_full, False, False, size
                            )
                    else:
                        if abort_on_new_batch:
                            return RecordAppendResult(None, False, False, True, 0)
                        needed = alone
                        if pool.try_allocate(alone, waiter):
                            try:
                                batch = self._new_batch(tp)
                                future = batch.append(key, value, headers, timestamp, callback)
                            except BaseException:
                                pool.release(alone)
                                raise
                            batch.memory = alone
                            batch.queued = True
                            dq.append(batch)
                            self._incomplete.add(batch)
                            return RecordAppendResult(
                                future, len(dq) > 1 or batch.is_full, True, False, alone
                            )
                    # No room in buffer_memory (or others were waiting first): queue up,
                    # then look again, as the open batch may have changed meanwhile.
                    if waiter is None:
                        waiter = pool.queue_up(block_ms)
                    if not waiter.wait():
                        raise pool.exhausted_error(
                            needed, block_ms, f"{len(self._incomplete)} batches awaiting delivery"
                        )
            finally:
                if waiter is not None:
                    pool.leave_queue(waiter)

    def _new_batch(self, tp: TopicPartition) -> ProducerBatch:
        self._sequence += 1
        return ProducerBatch(
            tp[0],
            tp[1],
            batch_size=self.batch_size,
            created_ms=self._clock(),
            compression=self.compression,
            sequence=self._sequence,
            on_done=self._on_batch_done,
        )

    def _on_batch_done(self, batch: ProducerBatch) -> None:
        """A batch completed or failed: forget it and return its memory."""
        if self.metrics is not None:
            self.metrics.batch_done(batch)
        with self._lock:
            self._incomplete.discard(batch)
            if batch.queued:
                self._batches[batch.topic_partition].remove(batch)
                batch.queued = False
            self._pool.release(batch.memory)  # wakes the first memory waiter
            batch.memory = 0
            self._flush_done.notify_all()
        if self.transaction_manager is not None:
            self.transaction_manager.batch_done(batch)

    # ------------------------------------------------------------ ready / drain

    def ready(self, now: float, leader_of: LeaderOf) -> ReadyCheckResult:
        """Leaders with a sendable batch, when to check again, partitions without a leader.

        A partition's first batch is sendable when it is full (or another batch
        follows it), has waited ``linger_ms``, a flush is in progress, the
        accumulator is closing, or an append is waiting for memory — unless it is a
        retry still within ``retry_backoff_ms``. ``leader_of`` returns the leader's
        node id, or None (or a negative id) when the leader is unknown; it is called
        outside the lock and remembered for ``drain()``.
        """
        self._leader_of = leader_of
        linger = self.linger_ms
        backoff = self.retry_backoff_ms
        tm = self.transaction_manager
        with self._lock:
            exhausted = self._pool.queued > 0
            forced = self._closed or self._flushes > 0 or exhausted
            heads = []
            for tp, dq in self._batches.items():
                if not dq or tp in self._muted:
                    continue
                first = dq[0]
                if tm is not None and tm.should_stop_drain(tp, first):
                    continue  # the sender wakes up when that changes (an answer, an id)
                waited = first.waited_ms(now)
                backing_off = first.attempts > 0 and waited < backoff
                heads.append((tp, waited, backing_off, len(dq) > 1 or first.is_full))
        ready: set[int] = set()
        unknown: set[TopicPartition] = set()
        delay = math.inf
        for tp, waited, backing_off, full in heads:
            leader = leader_of(tp)
            if leader is None or leader < 0:
                unknown.add(tp)
                continue
            if leader in ready:
                continue
            time_to_wait = backoff if backing_off else linger
            if not backing_off and (full or forced or waited >= time_to_wait):
                ready.add(leader)
            else:
                delay = min(delay, max(time_to_wait - waited, 0.0))
        return ReadyCheckResult(ready, delay, unknown)

    def drain(
        self,
        nodes: Iterable[int],
        max_request_bytes: int,
        *,
        leader_of: LeaderOf | None = None,
        now: float | None = None,
        to_send: bool = True,
    ) -> dict[int, list[ProducerBatch]]:
        """Take batches to send to each node, at most ``max_request_bytes`` per node.

        At most one batch per partition per call; each node's partitions are visited
        round robin from where its previous drain stopped. The first batch for a node
        is taken even if it alone exceeds ``max_request_bytes``. Retries within their
        backoff and muted partitions are skipped. Drained batches are closed for
        appends and built (compressed) here, outside the lock. ``leader_of`` defaults
        to the one given to the last ``ready()``. ``to_send=False`` takes batches to fail
        (expiry): the idempotent producer's ordering rules and sequences do not apply.
        """
        if leader_of is None:
            leader_of = self._leader_of
            if leader_of is None:
                raise ValueError("drain() needs leader_of (or a ready() call before it)")
        if now is None:
            now = self._clock()
        wanted = set(nodes)
        result: dict[int, list[ProducerBatch]] = {node: [] for node in wanted}
        if not wanted:
            return result
        with self._lock:
            candidates = [tp for tp in self._partitions if self._batches[tp]]
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in candidates:  # sorted, so each node's list is sorted too
            leader = leader_of(tp)
            if leader is not None and leader in wanted:
                by_node.setdefault(leader, []).append(tp)
        for node, partitions in by_node.items():
            result[node] = self._drain_node(node, partitions, max_request_bytes, now,
                                            to_send)
        return result

    def _drain_node(
        self, node: int, partitions: list[TopicPartition], max_bytes: int, now: float,
        to_send: bool = True,
    ) -> list[ProducerBatch]:
        count = len(partitions)
        start_tp = self._drain_from.get(node)
        start = 0 if start_tp is None else bisect.bisect_left(partitions, start_tp) % count
        backoff = self.retry_backoff_ms
        tm = self.transaction_manager if to_send else None
        drained: list[ProducerBatch] = []
        size = 0
        stopped_at: TopicPartition | None = None
        for i in range(count):
            tp = partitions[(start + i) % count]
            with self._lock:
                dq = self._batches[tp]
                if not dq or tp in self._muted:
                    continue
                first = dq[0]
                if first.attempts > 0 and first.waited_ms(now) < backoff:
                    continue
                if tm is not None and tm.should_stop_drain(tp, first):
                    continue
                if drained and size + first.estimated_size > max_bytes:
                    stopped_at = tp  # this partition goes first next time
                    break
                dq.popleft()
                if tm is not None:
                    tm.assign(tp, first)  # a retry keeps the sequence it has
                first.queued = False
                first.close_for_appends()
                first.drained_ms = now
            try:
                size += len(first.build())  # compression, outside the lock
            except Exception as exc:  # cannot happen with a valid codec; never lose a batch
                first.fail(exc)
                continue
            drained.append(first)
        with self._lock:
            # After a full round, start one partition further on next time.
            self._drain_from[node] = (
                stopped_at if stopped_at is not None else partitions[(start + 1) % count]
            )
        return drained

    # ---------------------------------------------------------------- retries

    def reenqueue(self, batch: ProducerBatch, now: float | None = None) -> None:
        """Put a batch back for a retry, ahead of every batch created after it.

        It is not sendable again before ``retry_backoff_ms`` has passed since ``now``.
        Batches retried out of order go back in their original order.
        """
        if now is None:
            now = self._clock()
        with self._lock:
            if batch.is_done:
                raise ValueError(f"{batch!r} is already done and cannot be retried")
            if batch.queued:
                raise ValueError(f"{batch!r} is already queued")
            batch.attempts += 1
            batch.last_attempt_ms = max(batch.last_attempt_ms, now)
            batch.close_for_appends()
            tp = batch.topic_partition
            dq = self._batches.get(tp)
            if dq is None:
                dq = self._batches[tp] = deque()
                bisect.insort(self._partitions, tp)
            index = 0
            for queued in dq:
                if queued.sequence > batch.sequence:
                    break
                index += 1
            dq.insert(index, batch)
            batch.queued = True
            self._incomplete.add(batch)

    def mute(self, tp: TopicPartition) -> None:
        """Hold a partition's batches back (one request in flight per partition)."""
        with self._lock:
            self._muted.add(tp)

    def unmute(self, tp: TopicPartition) -> None:
        with self._lock:
            self._muted.discard(tp)

    # ------------------------------------------------------------ flush / close

    def flush_begin(self) -> None:
        """Make every batch sendable now, until the matching ``await_flush_completion``."""
        with self._lock:
            self._flushes += 1

    def await_flush_completion(self, timeout: float | None = None) -> bool:
        """Wait until every batch not completed when this is called has completed.

        ``timeout`` in seconds; returns False if it passed first. Ends the flush
        started by ``flush_begin`` either way.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            try:
                for batch in list(self._incomplete):
                    while batch in self._incomplete:
                        if deadline is None:
                            self._flush_done.wait()
                        else:
                            remaining = deadline - time.monotonic()
                            if remaining <= 0:
                                return False
                            self._flush_done.wait(remaining)
                return True
            finally:
                if self._flushes > 0:
                    self._flushes -= 1

    @property
    def flush_in_progress(self) -> bool:
        return self._flushes > 0

    def abort_incomplete_batches(self, exc: BaseException) -> int:
        """Fail every batch not yet completed, sent or not, with ``exc``; returns how many.

        For a forced close: ``close()`` first, so that no new batch appears meanwhile.
        """
        with self._lock:
            batches = list(self._incomplete)
            for batch in batches:
                batch.close_for_appends()
        count = 0
        for batch in batches:
            if batch.fail(exc):  # removes it from its deque and frees its memory
                count += 1
        return count

    def close(self) -> None:
        """No more appends (they raise ProducerClosedError, as do appends waiting for
        memory); every queued batch becomes sendable at once."""
        with self._lock:
            self._closed = True
        # Wakes the appends waiting for memory: they see ``_closed`` set and raise.
        self._pool.close()

    # ------------------------------------------------------------------- state

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def used_memory(self) -> int:
        return self._pool.used

    @property
    def available_memory(self) -> int:
        return self._pool.available

    @property
    def waiting_for_memory(self) -> int:
        return self._pool.queued

    def has_undrained(self) -> bool:
        with self._lock:
            return any(self._batches.values())

    def has_incomplete(self) -> bool:
        with self._lock:
            return bool(self._incomplete)

    def queued_batches(self, tp: TopicPartition) -> list[ProducerBatch]:
        """A copy of a partition's queue, first to be sent first."""
        with self._lock:
            return list(self._batches.get(tp, ()))
