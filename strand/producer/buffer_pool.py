"""The producer's ``buffer_memory``: a fair, bounded count of the bytes its batches hold.

Modelled on Kafka's ``BufferPool``, less the recycling of byte buffers: Python
allocates the batches' bytes, what the pool bounds is how many of them exist.
``buffer_memory`` bytes in all; ``allocate(size, max_block_ms)`` takes ``size`` of
them, waiting while they are not free; ``deallocate(size)`` gives them back.

Fairness: waiters are served first come, first served, each on a
``threading.Condition`` of its own in a FIFO queue (Kafka's ``waiters`` deque).
Only the waiter at the head may take memory, and an allocation that has not
waited yet also goes behind anyone waiting, so a big request is not starved by a
stream of small ones. ``deallocate`` wakes the head; a waiter leaving the queue
(served, timed out or closed out) wakes the next one, which may fit in what is
left. After ``max_block_ms`` a waiter gives up with BufferExhaustedError;
``close()`` makes waiters (and later allocations) raise ProducerClosedError.

``queued`` (how many wait) is what makes every batch of the accumulator sendable
while anyone waits, as Kafka's ``RecordAccumulator.ready`` does with
``free.queued()``: memory only comes back when batches complete.

Locking: the pool guards its state with the lock its owner gives it, or with a
lock of its own when it is used alone. The accumulator gives it the accumulator's
lock, so that its deques and the memory count change together under one lock and
the waiters' conditions are built on it: there is no second lock, and so no lock
order that could deadlock. ``allocate``, ``deallocate`` and ``close`` take the
lock. The methods marked *lock held* are the steps of ``allocate``, for an owner
that decides under the same lock how much to allocate: the accumulator's size
depends on the partition's open batch, which may change while it waits, so it
runs its own loop of ``try_allocate`` / ``queue_up`` / ``MemoryWaiter.wait`` /
``leave_queue``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from strand.producer.errors import BufferExhaustedError, ProducerClosedError

__all__ = ["BufferPool", "MemoryWaiter"]


@dataclass(slots=True, eq=False)  # identity: the queue finds a waiter by ``is``
class MemoryWaiter:
    """One allocation waiting its turn for memory."""

    condition: threading.Condition  # on the pool's lock; notified when its turn may have come
    deadline: float  # time.monotonic() after which it gives up

    def wait(self) -> bool:
        """*Lock held.* Sleep until woken or the deadline; False if the deadline has
        passed (without sleeping). Waking up does not mean the memory is there: try
        again, and wait again if it is not."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            return False
        self.condition.wait(remaining)
        return True


class BufferPool:
    """``total_memory`` bytes handed out first come, first served; see the module docstring."""

    __slots__ = ("_closed", "_lock", "_on_wait", "_used", "_waiters", "total_memory")

    def __init__(
        self,
        total_memory: int,
        *,
        lock: threading.Lock | None = None,
        on_wait: Callable[[], None] | None = None,
    ) -> None:
        """``lock``: the owner's lock, if the pool's state is to change under it.
        ``on_wait`` is called, lock held, when an allocation starts waiting (the
        producer wakes its sender so that batches go out and memory comes back); it
        must not block nor call into the pool."""
        if total_memory <= 0:
            raise ValueError(f"buffer_memory must be positive, got {total_memory}")
        self.total_memory = total_memory
        self._lock = threading.Lock() if lock is None else lock
        self._used = 0
        self._waiters: deque[MemoryWaiter] = deque()
        self._on_wait = on_wait
        self._closed = False

    def __repr__(self) -> str:
        return (
            f"BufferPool(used={self._used}, total={self.total_memory}, "
            f"waiters={len(self._waiters)}, closed={self._closed})"
        )

    # --------------------------------------------------------------- the pool

    def allocate(self, size: int, max_block_ms: float) -> None:
        """Take ``size`` bytes, waiting first come, first served while they are not free.

        Raises BufferExhaustedError if they are not granted within ``max_block_ms``,
        ProducerClosedError if the pool is (or gets) closed, and ValueError at once
        for more than ``total_memory``, which no wait would grant.
        """
        if size > self.total_memory:
            raise ValueError(
                f"cannot allocate {size} bytes: buffer_memory is {self.total_memory} bytes"
            )
        with self._lock:
            waiter: MemoryWaiter | None = None
            try:
                while True:
                    if self._closed:
                        raise ProducerClosedError("the producer is closed: no buffer memory")
                    if self.try_allocate(size, waiter):
                        return
                    if waiter is None:
                        waiter = self.queue_up(max_block_ms)
                    if not waiter.wait():
                        raise self.exhausted_error(size, max_block_ms)
            finally:
                if waiter is not None:
                    self.leave_queue(waiter)

    def deallocate(self, size: int) -> None:
        """Give ``size`` bytes back and wake the first waiter."""
        with self._lock:
            self.release(size)

    def close(self) -> None:
        """Refuse allocations from now on, and wake every waiter so that it gives up
        (with ProducerClosedError, or whatever its owner's loop decides). Memory can
        still be given back."""
        with self._lock:
            self._closed = True
            for waiter in self._waiters:
                waiter.condition.notify()

    # ------------------------------------------------- steps, with the lock held

    def try_allocate(self, size: int, waiter: MemoryWaiter | None = None) -> bool:
        """*Lock held.* Take ``size`` bytes if they are free and it is the caller's turn:
        nobody waits, or ``waiter`` (the caller's own) is at the head of the queue."""
        waiters = self._waiters
        if waiters and waiters[0] is not waiter:
            return False  # first come, first served: a big request is not starved
        if self._used + size > self.total_memory:
            return False
        self._used += size
        return True

    def queue_up(self, max_block_ms: float) -> MemoryWaiter:
        """*Lock held.* Join the end of the queue, to give up ``max_block_ms`` from now."""
        waiter = MemoryWaiter(
            threading.Condition(self._lock), time.monotonic() + max_block_ms / 1000.0
        )
        self._waiters.append(waiter)
        if self._on_wait is not None:
            self._on_wait()
        return waiter

    def leave_queue(self, waiter: MemoryWaiter) -> None:
        """*Lock held.* Leave the queue (served or not) and pass the turn on: the next
        waiter may fit in what is left."""
        waiters = self._waiters
        waiters.remove(waiter)
        if waiters:
            waiters[0].condition.notify()

    def release(self, size: int) -> None:
        """*Lock held.* ``deallocate`` for an owner already holding the lock."""
        self._used -= size
        if self._waiters:
            self._waiters[0].condition.notify()

    def exhausted_error(
        self, size: int, max_block_ms: float, holders: str | None = None
    ) -> BufferExhaustedError:
        """The error for an allocation of ``size`` that waited ``max_block_ms`` in vain;
        ``holders`` says who holds the memory (e.g. "3 batches awaiting delivery")."""
        held_by = "" if holders is None else f", {holders}"
        return BufferExhaustedError(
            f"could not get {size} bytes of buffer_memory within "
            f"max_block_ms={max_block_ms:g}: {self.total_memory - self._used} of "
            f"{self.total_memory} bytes free{held_by}. Records are produced faster than "
            "they are delivered; raise buffer_memory or max_block_ms, or slow down"
        )

    # ----------------------------------------------------------------- counters

    @property
    def used(self) -> int:
        """Bytes allocated and not yet given back."""
        return self._used

    @property
    def available(self) -> int:
        return self.total_memory - self._used

    @property
    def queued(self) -> int:
        """How many allocations are waiting for memory (Kafka's ``queued()``)."""
        return len(self._waiters)

    @property
    def closed(self) -> bool:
        return self._closed
