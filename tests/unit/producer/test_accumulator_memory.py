"""buffer_memory: appends block while it is full, resume when batches complete, time out."""

from __future__ import annotations

import threading
import time

import pytest

from strand.errors import ErrorCode, StrandError
from strand.producer import (
    BufferExhaustedError,
    ProducerBatch,
    ProducerClosedError,
    RecordAccumulator,
    RecordAppendResult,
)
from strand.records import HEADER_SIZE, record_size
from tests.support.clock import FakeClock
from tests.support.waiting import wait_until
from tests.unit.producer.producer_helpers import leaders

TP0 = ("t", 0)
VALUE = b"x" * 100
RECORD_ALONE = HEADER_SIZE + record_size(0, 0, None, VALUE)  # one value in a batch of its own


def small_pool(clock: FakeClock, **kwargs: object) -> RecordAccumulator:
    """Room for exactly three one-record batches (batch_size forces one record each)."""
    options: dict[str, object] = {
        "batch_size": 1,
        "linger_ms": 10_000,
        "buffer_memory": 3 * RECORD_ALONE,
        "max_block_ms": 50,
    }
    options.update(kwargs)
    return RecordAccumulator(clock=clock, **options)  # type: ignore[arg-type]


def wait_blocked(acc: RecordAccumulator, appends: int) -> None:
    """Until ``appends`` appends (other threads) wait for memory; looked at every
    millisecond, as some give up after 50 ms."""
    wait_until(lambda: acc.waiting_for_memory == appends, 5,
               f"{appends} appends to wait for memory", interval=0.001)


class Appender(threading.Thread):
    """Runs one append in a thread and keeps its result or error."""

    def __init__(self, acc: RecordAccumulator, partition: int, value: bytes = VALUE) -> None:
        super().__init__(daemon=True)
        self.acc, self.partition, self.value = acc, partition, value
        self.result: RecordAppendResult | None = None
        self.error: BaseException | None = None
        self.granted_at = 0.0

    def run(self) -> None:
        try:
            self.result = self.acc.append("t", self.partition, None, self.value, timestamp=1)
            self.granted_at = time.monotonic()
        except BaseException as exc:
            self.error = exc


def test_memory_is_counted_per_batch_and_returned_on_completion(clock: FakeClock) -> None:
    acc = small_pool(clock)
    for _ in range(3):
        acc.append("t", 0, None, VALUE, timestamp=1)
    assert acc.used_memory == 3 * RECORD_ALONE and acc.available_memory == 0
    first = acc.queued_batches(TP0)[0]
    first.complete(0)
    assert acc.used_memory == 2 * RECORD_ALONE
    acc.queued_batches(TP0)[0].fail(RuntimeError("x"))
    assert acc.used_memory == RECORD_ALONE


def test_append_times_out_with_buffer_exhausted(clock: FakeClock) -> None:
    acc = small_pool(clock, max_block_ms=50)
    for _ in range(3):
        acc.append("t", 0, None, VALUE, timestamp=1)
    started = time.monotonic()
    with pytest.raises(BufferExhaustedError) as info:
        acc.append("t", 0, None, VALUE, timestamp=1)
    waited = time.monotonic() - started
    assert 0.045 <= waited < 1.0
    error = info.value
    assert isinstance(error, StrandError) and not error.retriable
    assert error.code == ErrorCode.REQUEST_TIMED_OUT
    assert "max_block_ms=50" in str(error) and "buffer_memory" in str(error)
    # Nothing was added, nobody is left waiting.
    assert acc.used_memory == 3 * RECORD_ALONE and acc.waiting_for_memory == 0
    assert len(acc.queued_batches(TP0)) == 3


def test_a_per_call_max_block_ms_overrides_the_default(clock: FakeClock) -> None:
    acc = small_pool(clock, max_block_ms=60_000)
    for _ in range(3):
        acc.append("t", 0, None, VALUE, timestamp=1)
    with pytest.raises(BufferExhaustedError):
        acc.append("t", 0, None, VALUE, timestamp=1, max_block_ms=0)


def test_a_blocked_append_resumes_when_a_batch_completes(clock: FakeClock) -> None:
    woken = threading.Event()
    # Batches that are not full, one per partition: only linger would send them.
    acc = small_pool(clock, batch_size=10_000, max_block_ms=5000, wakeup=woken.set)
    leader_of = leaders({("t", p): 1 for p in range(4)})
    for p in range(3):
        acc.append("t", p, None, VALUE, timestamp=1)
    assert acc.ready(clock.now_ms, leader_of).ready_nodes == set()  # lingering
    assert not woken.is_set()
    appender = Appender(acc, 3)
    appender.start()
    wait_blocked(acc, 1)
    assert woken.is_set()  # the sender was told
    # Someone waits for memory: everything is sendable now, linger or not.
    assert acc.ready(clock.now_ms, leader_of).ready_nodes == {1}
    (batch,) = acc.drain([1], RECORD_ALONE, leader_of=leader_of)[1]
    assert appender.is_alive()  # draining frees nothing; completion does
    released_at = time.monotonic()
    batch.complete(0)
    appender.join(timeout=5)
    assert appender.error is None and appender.result is not None
    assert appender.result.new_batch_created
    assert appender.granted_at - released_at < 1.0
    assert acc.used_memory == 3 * RECORD_ALONE and acc.waiting_for_memory == 0


def test_a_failed_batch_also_frees_memory_for_waiters(clock: FakeClock) -> None:
    acc = small_pool(clock, max_block_ms=5000)
    for _ in range(3):
        acc.append("t", 0, None, VALUE, timestamp=1)
    appender = Appender(acc, 0)
    appender.start()
    wait_blocked(acc, 1)
    acc.queued_batches(TP0)[0].fail(TimeoutError("delivery timeout"))
    appender.join(timeout=5)
    assert appender.error is None and appender.result is not None


def test_waiters_are_served_first_come_first_served(clock: FakeClock) -> None:
    acc = small_pool(clock, max_block_ms=5000)
    for _ in range(3):
        acc.append("t", 0, None, VALUE, timestamp=1)
    batches = acc.queued_batches(TP0)
    big = Appender(acc, 1, b"B" * 150)  # needs more than one batch frees
    big.start()
    wait_blocked(acc, 1)
    batches[0].complete(0)  # room for a small record, not for the big one
    time.sleep(0.02)
    assert big.is_alive()
    small = Appender(acc, 2)
    small.start()
    # The small record would fit, but it queues behind the big one instead of starving it.
    wait_blocked(acc, 2)
    time.sleep(0.02)
    assert small.is_alive()
    batches[1].complete(1)
    big.join(timeout=5)
    assert big.result is not None and big.error is None
    batches[2].complete(2)
    small.join(timeout=5)
    assert small.result is not None and small.error is None
    big_batch: ProducerBatch = acc.queued_batches(("t", 1))[0]
    small_batch: ProducerBatch = acc.queued_batches(("t", 2))[0]
    assert big_batch.sequence < small_batch.sequence
    assert acc.waiting_for_memory == 0


def test_a_timed_out_waiter_lets_the_next_one_through(clock: FakeClock) -> None:
    acc = small_pool(clock, max_block_ms=5000)
    for _ in range(3):
        acc.append("t", 0, None, VALUE, timestamp=1)
    acc.queued_batches(TP0)[0].complete(0)
    acc.append("t", 0, None, VALUE, timestamp=1)  # full again
    # A waiter with a short deadline at the head, a patient one behind it.
    impatient_error: list[BaseException] = []

    def impatient() -> None:
        try:
            acc.append("t", 1, None, b"B" * 300, timestamp=1, max_block_ms=50)
        except BaseException as exc:
            impatient_error.append(exc)

    first = threading.Thread(target=impatient, daemon=True)
    first.start()
    wait_blocked(acc, 1)
    patient = Appender(acc, 2)
    patient.start()
    wait_blocked(acc, 2)
    acc.queued_batches(TP0)[0].complete(1)  # enough for the patient one only
    first.join(timeout=5)
    patient.join(timeout=5)
    assert isinstance(impatient_error[0], BufferExhaustedError)
    assert patient.error is None and patient.result is not None


def test_close_wakes_blocked_appends(clock: FakeClock) -> None:
    acc = small_pool(clock, max_block_ms=5000)
    for _ in range(3):
        acc.append("t", 0, None, VALUE, timestamp=1)
    appender = Appender(acc, 1)
    appender.start()
    wait_blocked(acc, 1)
    acc.close()
    appender.join(timeout=5)
    assert isinstance(appender.error, ProducerClosedError)
    assert acc.waiting_for_memory == 0
