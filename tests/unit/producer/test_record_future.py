"""RecordFuture / BatchResult: the per-record futures sharing one latch per batch."""

from __future__ import annotations

import threading
import time

import pytest

from strand.producer import ProducerBatch, RecordFuture, RecordMetadata
from strand.producer.future import BatchResult


def batch_of(count: int, *, callbacks: list[object] | None = None) -> tuple[
        ProducerBatch, list[RecordFuture]]:
    batch = ProducerBatch("t", 3, batch_size=1 << 20, created_ms=0)
    futures = []
    for i in range(count):
        callback = None
        if callbacks is not None:
            def callback(md: RecordMetadata | None, err: BaseException | None,
                         i: int = i) -> None:
                callbacks.append((i, md, err))
        futures.append(batch.append(b"k%d" % i if i % 2 else None, b"v" * i, [], 1000 + i,
                                    callback))
    return batch, futures


def test_each_record_gets_its_offset_and_sizes() -> None:
    batch, futures = batch_of(4)
    assert not any(f.done() for f in futures) and all(f.running() for f in futures)
    assert batch.complete(70)
    assert [f.result(timeout=0) for f in futures] == [
        RecordMetadata("t", 3, 70, 1000, -1, 0),
        RecordMetadata("t", 3, 71, 1001, 2, 1),
        RecordMetadata("t", 3, 72, 1002, -1, 2),
        RecordMetadata("t", 3, 73, 1003, 2, 3),
    ]
    assert all(f.done() and f.exception(timeout=0) is None for f in futures)


def test_an_unknown_offset_stays_unknown_for_every_record() -> None:
    batch, futures = batch_of(3)  # acks=0: the sender completes batches at -1
    batch.complete(-1)
    assert [f.result().offset for f in futures] == [-1, -1, -1]


def test_log_append_time_replaces_each_create_time() -> None:
    batch, futures = batch_of(2)
    batch.complete(0, log_append_time=5555)
    assert [f.result().timestamp for f in futures] == [5555, 5555]


def test_a_failed_batch_raises_its_error_from_every_future() -> None:
    seen: list[object] = []
    batch, futures = batch_of(3, callbacks=seen)
    error = RuntimeError("broker gone")
    assert batch.fail(error)
    assert not batch.complete(1)  # the first outcome wins
    for future in futures:
        assert future.exception() is error
        with pytest.raises(RuntimeError, match="broker gone"):
            future.result()
    assert seen == [(0, None, error), (1, None, error), (2, None, error)]


def test_result_times_out_while_pending() -> None:
    _, futures = batch_of(1)
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        futures[0].result(timeout=0.05)
    with pytest.raises(TimeoutError):
        futures[0].exception(timeout=0)
    assert time.monotonic() - start >= 0.05


def test_result_wakes_up_when_another_thread_completes_the_batch() -> None:
    batch, futures = batch_of(2)
    threading.Timer(0.02, batch.complete, args=(9,)).start()
    assert futures[1].result(timeout=5).offset == 10


def test_done_callbacks_run_once_pending_or_at_once_when_done() -> None:
    batch, futures = batch_of(2)
    calls: list[tuple[str, int]] = []
    futures[0].add_done_callback(lambda f: calls.append(("early", f.result().offset)))
    futures[1].add_done_callback(lambda f: 1 / 0)  # logged, does not stop the others
    futures[1].add_done_callback(lambda f: calls.append(("early", f.result().offset)))
    assert calls == []
    batch.complete(20)
    futures[1].add_done_callback(lambda f: calls.append(("late", f.result().offset)))
    assert calls == [("early", 20), ("early", 21), ("late", 21)]


def test_delivery_callbacks_run_in_order_before_waiters_wake() -> None:
    seen: list[object] = []
    batch, futures = batch_of(3, callbacks=seen)

    observed: list[int] = []

    def wait() -> None:
        futures[0].result()
        observed.append(len(seen))

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.01)
    batch.complete(0)
    waiter.join(5)
    assert [entry[0] for entry in seen] == [0, 1, 2]  # type: ignore[index]
    assert observed == [3]


def test_a_result_is_set_once() -> None:
    result = BatchResult("t", 0)
    result.set(1, -1, None)
    with pytest.raises(RuntimeError, match="already set"):
        result.set(2, -1, None)
