"""BufferPool: bounded buffer_memory handed out first come, first served, with timeouts."""

from __future__ import annotations

import threading
import time

import pytest

from strand.errors import ErrorCode, StrandError
from strand.producer import BufferExhaustedError, BufferPool, ProducerClosedError
from tests.support.waiting import wait_until


class Allocation(threading.Thread):
    """Runs one ``allocate`` in a thread; appends its name to ``granted`` once served."""

    def __init__(
        self, pool: BufferPool, name: str, size: int, granted: list[str], max_block_ms: float = 5000
    ) -> None:
        super().__init__(name=f"allocate-{name}", daemon=True)
        self.pool, self.label, self.size, self.max_block_ms = pool, name, size, max_block_ms
        self.granted = granted
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.pool.allocate(self.size, self.max_block_ms)
            self.granted.append(self.label)
        except BaseException as exc:
            self.error = exc


def queue(pool: BufferPool, granted: list[str], *requests: tuple[str, int]) -> list[Allocation]:
    """Start one allocation per (name, size), each queued before the next starts."""
    started: list[Allocation] = []
    for name, size in requests:
        allocation = Allocation(pool, name, size, granted)
        allocation.start()
        wait_until(lambda: pool.queued == len(started) + 1, 5, "the allocation to queue",
                   interval=0.001)
        started.append(allocation)
    return started


def test_allocate_and_deallocate_count_the_bytes() -> None:
    pool = BufferPool(100)
    assert (pool.used, pool.available, pool.queued) == (0, 100, 0)
    pool.allocate(60, max_block_ms=0)
    pool.allocate(40, max_block_ms=0)
    assert (pool.used, pool.available) == (100, 0)
    pool.deallocate(70)
    assert (pool.used, pool.available) == (30, 70)


def test_a_request_larger_than_the_pool_fails_at_once() -> None:
    pool = BufferPool(100)
    with pytest.raises(ValueError, match="101 bytes"):
        pool.allocate(101, max_block_ms=60_000)
    assert pool.used == 0 and pool.queued == 0


def test_total_memory_must_be_positive() -> None:
    with pytest.raises(ValueError, match="buffer_memory must be positive"):
        BufferPool(0)


def test_timeout_raises_buffer_exhausted_with_a_clear_message() -> None:
    pool = BufferPool(100)
    pool.allocate(95, max_block_ms=0)
    started = time.monotonic()
    with pytest.raises(BufferExhaustedError) as info:
        pool.allocate(10, max_block_ms=50)
    assert 0.045 <= time.monotonic() - started < 1.0
    error = info.value
    assert isinstance(error, StrandError) and not error.retriable
    assert error.code == ErrorCode.REQUEST_TIMED_OUT
    assert str(error).startswith(
        "could not get 10 bytes of buffer_memory within max_block_ms=50: 5 of 100 bytes free."
    )
    assert "raise buffer_memory or max_block_ms" in str(error)
    # Nothing was taken and nobody is left in the queue.
    assert pool.used == 95 and pool.queued == 0


def test_max_block_ms_zero_fails_without_waiting() -> None:
    pool = BufferPool(100)
    pool.allocate(100, max_block_ms=0)
    started = time.monotonic()
    with pytest.raises(BufferExhaustedError):
        pool.allocate(1, max_block_ms=0)
    assert time.monotonic() - started < 0.5


def test_the_error_names_who_holds_the_memory() -> None:
    pool = BufferPool(100)
    message = str(pool.exhausted_error(7, 1500, "3 batches awaiting delivery"))
    assert message.startswith(
        "could not get 7 bytes of buffer_memory within max_block_ms=1500: 100 of 100 bytes "
        "free, 3 batches awaiting delivery. Records are produced faster"
    )


def test_deallocate_wakes_the_first_waiter_only() -> None:
    pool = BufferPool(100)
    pool.allocate(100, max_block_ms=0)
    granted: list[str] = []
    first, second = queue(pool, granted, ("first", 50), ("second", 50))
    pool.deallocate(50)
    first.join(timeout=5)
    assert granted == ["first"] and first.error is None
    time.sleep(0.02)
    assert second.is_alive() and pool.queued == 1  # nothing left for it yet
    pool.deallocate(50)
    second.join(timeout=5)
    assert granted == ["first", "second"] and pool.used == 100 and pool.queued == 0


def test_waiters_are_served_in_arrival_order_even_when_a_later_one_would_fit() -> None:
    pool = BufferPool(100)
    pool.allocate(100, max_block_ms=0)
    granted: list[str] = []
    big, medium, small = queue(pool, granted, ("big", 60), ("medium", 30), ("small", 10))
    pool.deallocate(30)  # room for "medium" or "small", not for "big" at the head
    time.sleep(0.02)
    assert granted == [] and pool.queued == 3 and pool.used == 70
    pool.deallocate(30)  # now "big" fits; it takes everything there is
    big.join(timeout=5)
    assert granted == ["big"] and medium.is_alive() and small.is_alive()
    pool.deallocate(40)  # both fit now: they go in their order
    medium.join(timeout=5)
    small.join(timeout=5)
    assert granted == ["big", "medium", "small"]
    assert pool.used == 100 and pool.queued == 0


def test_a_new_allocation_goes_behind_the_waiters() -> None:
    pool = BufferPool(100)
    pool.allocate(90, max_block_ms=0)
    granted: list[str] = []
    (waiting,) = queue(pool, granted, ("waiting", 50))
    # 10 bytes are free and 5 would fit, but someone came first: no jumping the queue.
    with pytest.raises(BufferExhaustedError):
        pool.allocate(5, max_block_ms=0)
    assert pool.used == 90 and pool.queued == 1
    pool.deallocate(45)
    waiting.join(timeout=5)
    assert granted == ["waiting"] and pool.used == 95
    pool.allocate(5, max_block_ms=0)  # nobody waits any more
    assert pool.used == 100


def test_a_head_that_times_out_passes_the_turn_on() -> None:
    pool = BufferPool(100)
    pool.allocate(100, max_block_ms=0)
    granted: list[str] = []
    impatient = Allocation(pool, "impatient", 80, granted, max_block_ms=100)
    impatient.start()
    wait_until(lambda: pool.queued == 1, 5, "the allocation to queue", interval=0.001)
    (patient,) = queue(pool, granted, ("patient", 20))
    pool.deallocate(20)  # enough for the patient one only, who is second
    impatient.join(timeout=5)
    patient.join(timeout=5)
    assert isinstance(impatient.error, BufferExhaustedError)
    assert granted == ["patient"] and pool.used == 100 and pool.queued == 0


def test_close_wakes_every_waiter_and_refuses_new_allocations() -> None:
    pool = BufferPool(100)
    pool.allocate(100, max_block_ms=0)
    waiters = queue(pool, [], ("a", 10), ("b", 10))
    pool.close()
    for waiter in waiters:
        waiter.join(timeout=5)
        assert isinstance(waiter.error, ProducerClosedError)
    assert pool.closed and pool.queued == 0
    with pytest.raises(ProducerClosedError):
        pool.allocate(1, max_block_ms=0)
    pool.deallocate(100)  # memory can still come back
    assert pool.used == 0


def test_on_wait_is_called_when_an_allocation_starts_waiting() -> None:
    calls: list[int] = []
    pool = BufferPool(100, on_wait=lambda: calls.append(1))
    pool.allocate(100, max_block_ms=0)
    assert calls == []
    with pytest.raises(BufferExhaustedError):
        pool.allocate(1, max_block_ms=10)
    assert calls == [1]


def test_an_owner_lock_is_released_while_waiting_and_guards_the_steps() -> None:
    lock = threading.Lock()
    pool = BufferPool(100, lock=lock)
    with lock:
        assert pool.try_allocate(100)
    granted: list[str] = []
    (waiting,) = queue(pool, granted, ("waiting", 30))
    # The waiter sleeps on a condition of the owner's lock, so the owner can take it.
    assert lock.acquire(timeout=1)
    try:
        assert not pool.try_allocate(1)  # not our turn: someone waits
        pool.release(30)  # the owner's deallocate, lock held: wakes the waiter...
        time.sleep(0.02)
        assert waiting.is_alive()  # ...which needs the lock to go on
    finally:
        lock.release()
    waiting.join(timeout=5)
    assert granted == ["waiting"] and pool.used == 100
