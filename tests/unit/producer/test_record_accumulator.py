"""RecordAccumulator: batching, linger, drain fairness, retries, flush, futures, codec."""

from __future__ import annotations

import random
import threading
import time

import pytest

from strand.errors import InvalidTimestampError, RecordTooLargeError
from strand.producer import (
    ProducerBatch,
    ProducerClosedError,
    RecordAccumulator,
    RecordFuture,
    RecordMetadata,
)
from strand.records import HEADER_SIZE, BatchBuilder, Compression, RecordBatch, record_size
from tests.support.clock import FakeClock
from tests.unit.producer.producer_helpers import leaders

TP0 = ("t", 0)
TP1 = ("t", 1)
TP2 = ("t", 2)
TP3 = ("t", 3)
VALUE = b"x" * 100
# One 100-byte value without key or headers, at small deltas, in a batch:
RECORD = record_size(0, 0, None, VALUE)  # 109 bytes


def make(clock: FakeClock, **kwargs: object) -> RecordAccumulator:
    options: dict[str, object] = {"batch_size": 1000, "linger_ms": 10, "retry_backoff_ms": 100}
    options.update(kwargs)
    return RecordAccumulator(clock=clock, **options)  # type: ignore[arg-type]


def fill(acc: RecordAccumulator, tp: tuple[str, int], count: int) -> list[RecordFuture]:
    futures = []
    for _ in range(count):
        result = acc.append(tp[0], tp[1], None, VALUE, timestamp=5)
        assert result.future is not None
        futures.append(result.future)
    return futures


# ---------------------------------------------------------------- record size


def test_record_size_is_exactly_what_the_builder_writes() -> None:
    rng = random.Random(1)
    builder = BatchBuilder()
    base_ts = 1_700_000_000_000
    for offset_delta in range(2000):
        key = None if rng.random() < 0.2 else rng.randbytes(rng.choice([0, 3, 70, 9000]))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 5, 63, 64, 20000]))
        headers = [
            (rng.choice(["h", "trace-id", "ключ"]), rng.choice([None, b"", rng.randbytes(9)]))
            for _ in range(rng.choice([0, 0, 1, 3]))
        ]
        ts = base_ts + rng.choice([0, -5, 63, 64, -65, 10**6, -(10**12), 2**40])
        before = builder.uncompressed_size
        builder.append(value, key, headers, ts if offset_delta else base_ts)
        delta = (ts - base_ts) if offset_delta else 0
        assert builder.uncompressed_size - before == record_size(
            offset_delta, delta, key, value, headers
        )


# ----------------------------------------------------------------- batching


def test_records_fill_a_batch_up_to_batch_size(clock: FakeClock) -> None:
    acc = make(clock)
    per_batch = (1000 - HEADER_SIZE) // RECORD  # 8
    results = [acc.append("t", 0, None, VALUE, timestamp=5) for _ in range(per_batch * 3 + 1)]
    created = [r.new_batch_created for r in results]
    assert created == ([True] + [False] * (per_batch - 1)) * 3 + [True]
    batches = acc.queued_batches(TP0)
    assert [b.record_count for b in batches] == [per_batch] * 3 + [1]
    assert all(b.estimated_size <= 1000 for b in batches)
    assert all(b.is_closed for b in batches[:-1]) and not batches[-1].is_closed
    # A partition with a batch behind the first reports "full": the sender should go.
    assert not results[per_batch - 1].batch_is_full
    assert results[per_batch].batch_is_full
    assert all(r.appended_bytes > 0 for r in results)
    assert acc.used_memory == sum(b.estimated_size for b in batches)


def test_a_record_bigger_than_batch_size_gets_a_batch_of_its_own(clock: FakeClock) -> None:
    acc = make(clock)
    acc.append("t", 0, None, b"small", timestamp=1)
    big = acc.append("t", 0, b"k", b"B" * 5000, timestamp=1)
    assert big.new_batch_created and big.batch_is_full
    after = acc.append("t", 0, None, b"small", timestamp=1)
    assert after.new_batch_created
    assert [b.record_count for b in acc.queued_batches(TP0)] == [1, 1, 1]
    assert acc.queued_batches(TP0)[1].estimated_size > 5000


def test_a_record_bigger_than_buffer_memory_fails_at_once(clock: FakeClock) -> None:
    acc = make(clock, buffer_memory=4096, max_block_ms=10_000)
    started = time.monotonic()
    with pytest.raises(RecordTooLargeError, match="buffer_memory"):
        acc.append("t", 0, None, b"x" * 4096, timestamp=1)
    assert time.monotonic() - started < 1
    assert acc.used_memory == 0 and not acc.has_undrained()


def test_bad_input_changes_nothing(clock: FakeClock) -> None:
    acc = make(clock)
    with pytest.raises(InvalidTimestampError):
        acc.append("t", 0, None, b"v", timestamp=-2)
    with pytest.raises(TypeError):
        acc.append("t", 0, None, 42, timestamp=1)  # type: ignore[arg-type]
    assert acc.used_memory == 0 and not acc.has_incomplete()


def test_partitions_batch_separately(clock: FakeClock) -> None:
    acc = make(clock)
    acc.append("t", 0, None, b"a", timestamp=1)
    acc.append("t", 1, None, b"b", timestamp=1)
    acc.append("u", 0, None, b"c", timestamp=1)
    assert [len(acc.queued_batches(tp)) for tp in (TP0, TP1, ("u", 0))] == [1, 1, 1]


def test_abort_on_new_batch_appends_only_to_an_open_batch(clock: FakeClock) -> None:
    acc = make(clock)
    aborted = acc.append("t", 0, None, VALUE, timestamp=1, abort_on_new_batch=True)
    assert aborted.abort_for_new_batch and aborted.future is None
    assert not acc.has_undrained() and acc.used_memory == 0
    acc.append("t", 0, None, VALUE, timestamp=1)
    joined = acc.append("t", 0, None, VALUE, timestamp=1, abort_on_new_batch=True)
    assert not joined.abort_for_new_batch and joined.future is not None


# ------------------------------------------------------------- ready / linger


def test_a_batch_is_sendable_after_linger(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=10)
    leader_of = leaders({TP0: 1})
    start = clock.now_ms
    acc.append("t", 0, None, b"v", timestamp=1)
    clock.advance(3)
    acc.append("t", 0, None, b"v", timestamp=1)  # linger counts from the batch's creation
    nodes, delay, unknown = acc.ready(clock.now_ms, leader_of)
    assert nodes == set() and delay == 7 and unknown == set()
    assert acc.ready(start + 9.5, leader_of).next_ready_check_delay_ms == 0.5
    assert acc.ready(start + 10, leader_of).ready_nodes == {1}


def test_nothing_to_send_means_no_timer(clock: FakeClock) -> None:
    acc = make(clock)
    result = acc.ready(clock.now_ms, leaders({}))
    assert result.ready_nodes == set() and result.next_ready_check_delay_ms == float("inf")


def test_a_full_batch_is_sendable_before_linger(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=10_000)
    fill(acc, TP0, 9)  # 8 fill the first batch, the 9th opens another
    assert acc.ready(clock.now_ms, leaders({TP0: 1})).ready_nodes == {1}


def test_a_record_of_batch_size_is_sendable_at_once(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=10_000, batch_size=100)
    acc.append("t", 0, None, b"v" * 200, timestamp=1)
    assert acc.ready(clock.now_ms, leaders({TP0: 1})).ready_nodes == {1}


def test_partitions_without_leader_are_reported(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=0)
    acc.append("t", 0, None, b"v", timestamp=1)
    acc.append("t", 1, None, b"v", timestamp=1)
    acc.append("t", 2, None, b"v", timestamp=1)
    result = acc.ready(clock.now_ms, leaders({TP0: 3, TP2: -1}))
    assert result.ready_nodes == {3}
    assert result.unknown_leader_partitions == {TP1, TP2}


def test_ready_groups_partitions_by_leader(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=0)
    for p in range(4):
        acc.append("t", p, None, b"v", timestamp=1)
    leader_of = leaders({TP0: 1, TP1: 2, TP2: 1, TP3: 2})
    assert acc.ready(clock.now_ms, leader_of).ready_nodes == {1, 2}


def test_flush_and_close_make_batches_sendable(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=10_000)
    leader_of = leaders({TP0: 1})
    acc.append("t", 0, None, b"v", timestamp=1)
    assert acc.ready(clock.now_ms, leader_of).ready_nodes == set()
    acc.flush_begin()
    assert acc.flush_in_progress
    assert acc.ready(clock.now_ms, leader_of).ready_nodes == {1}
    acc.await_flush_completion(timeout=0)
    assert not acc.flush_in_progress
    assert acc.ready(clock.now_ms, leader_of).ready_nodes == set()
    acc.close()
    assert acc.ready(clock.now_ms, leader_of).ready_nodes == {1}


def test_muted_partitions_are_held_back(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=0)
    acc.append("t", 0, None, b"v", timestamp=1)
    leader_of = leaders({TP0: 1})
    acc.mute(TP0)
    assert acc.ready(clock.now_ms, leader_of).ready_nodes == set()
    assert acc.drain([1], 10_000, leader_of=leader_of) == {1: []}
    acc.unmute(TP0)
    assert len(acc.drain([1], 10_000, leader_of=leader_of)[1]) == 1


# ------------------------------------------------------------------- drain


def test_drain_takes_one_batch_per_partition_per_call(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=0)
    fill(acc, TP0, 8 * 3)  # three full batches
    fill(acc, TP1, 1)
    leader_of = leaders({TP0: 1, TP1: 1})
    acc.ready(clock.now_ms, leader_of)
    first = acc.drain([1], 1_000_000)[1]  # leader_of remembered from ready()
    assert sorted(b.topic_partition for b in first) == [TP0, TP1]
    second = acc.drain([1], 1_000_000)[1]
    assert [b.topic_partition for b in second] == [TP0]
    assert len(acc.drain([1], 1_000_000)[1]) == 1
    assert acc.drain([1], 1_000_000) == {1: []}
    assert not acc.has_undrained() and acc.has_incomplete()


def test_drain_is_round_robin_fair_under_a_request_size_limit(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=0)
    tps = [("t", p) for p in range(5)]
    for tp in tps:
        fill(acc, tp, 8 * 4)  # four full batches each
    leader_of = leaders(dict.fromkeys(tps, 7))
    batch_bytes = acc.queued_batches(tps[0])[0].estimated_size
    rounds = []
    for _ in range(10):
        drained = acc.drain([7], 2 * batch_bytes, leader_of=leader_of)[7]
        rounds.append([b.partition for b in drained])
    assert rounds == [[0, 1], [2, 3], [4, 0], [1, 2], [3, 4]] * 2
    assert not acc.has_undrained()


def test_drain_only_takes_partitions_led_by_the_requested_nodes(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=0)
    for p in range(4):
        acc.append("t", p, None, b"v", timestamp=1)
    leader_of = leaders({TP0: 1, TP1: 2, TP2: 1})  # TP3: no leader
    drained = acc.drain([1, 5], 1_000_000, leader_of=leader_of)
    assert sorted(b.partition for b in drained[1]) == [0, 2]
    assert drained[5] == []
    assert [len(acc.queued_batches(tp)) for tp in (TP1, TP3)] == [1, 1]


def test_drain_takes_a_first_batch_bigger_than_the_request_limit(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=0)
    acc.append("t", 0, None, b"B" * 3000, timestamp=1)
    acc.append("t", 1, None, b"v", timestamp=1)
    leader_of = leaders({TP0: 1, TP1: 1})
    drained = acc.drain([1], 100, leader_of=leader_of)[1]
    assert [b.partition for b in drained] == [0]
    assert [b.partition for b in acc.drain([1], 100, leader_of=leader_of)[1]] == [1]


def test_drain_needs_leaders(clock: FakeClock) -> None:
    acc = make(clock)
    with pytest.raises(ValueError, match="leader_of"):
        acc.drain([1], 100)


def test_a_drained_batch_takes_no_more_records(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=0)
    acc.append("t", 0, None, b"a", timestamp=1)
    (batch,) = acc.drain([1], 10_000, leader_of=leaders({TP0: 1}))[1]
    assert batch.is_closed and batch.drained_ms == clock.now_ms
    result = acc.append("t", 0, None, b"b", timestamp=1)
    assert result.new_batch_created
    assert batch.record_count == 1


# ---------------------------------------------------------------- retries


def test_reenqueue_goes_to_the_front_and_respects_backoff(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=0, retry_backoff_ms=100)
    leader_of = leaders({TP0: 1})
    fill(acc, TP0, 8)
    (first,) = acc.drain([1], 10**6, leader_of=leader_of)[1]
    fill(acc, TP0, 1)  # a newer batch, sendable at once (linger 0)
    acc.reenqueue(first, now=clock.now_ms)
    assert first.attempts == 1
    assert acc.queued_batches(TP0)[0] is first
    clock.advance(99)
    result = acc.ready(clock.now_ms, leader_of)
    assert result.ready_nodes == set() and result.next_ready_check_delay_ms == 1
    # During backoff the partition is skipped: the newer batch must not overtake it.
    assert acc.drain([1], 10**6, leader_of=leader_of) == {1: []}
    clock.advance(1)
    assert acc.ready(clock.now_ms, leader_of).ready_nodes == {1}
    assert acc.drain([1], 10**6, leader_of=leader_of)[1] == [first]


def test_retries_go_back_in_their_original_order(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=0, retry_backoff_ms=0)
    leader_of = leaders({TP0: 1})
    fill(acc, TP0, 8 * 3 + 1)
    b1 = acc.drain([1], 10**6, leader_of=leader_of)[1][0]
    b2 = acc.drain([1], 10**6, leader_of=leader_of)[1][0]
    # Responses come back in reverse: b2 fails first, then b1.
    acc.reenqueue(b2)
    acc.reenqueue(b1)
    queue = acc.queued_batches(TP0)
    assert queue[:2] == [b1, b2] and len(queue) == 4


def test_a_retried_batch_resends_the_same_bytes(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=0, retry_backoff_ms=0, compression="gzip")
    leader_of = leaders({TP0: 1})
    fill(acc, TP0, 3)
    (batch,) = acc.drain([1], 10**6, leader_of=leader_of)[1]
    data = batch.build()
    acc.reenqueue(batch)
    (again,) = acc.drain([1], 10**6, leader_of=leader_of)[1]
    assert again is batch and again.build() is data
    assert again.attempts == 1


def test_reenqueue_refuses_done_or_queued_batches(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=0)
    fill(acc, TP0, 1)
    queued = acc.queued_batches(TP0)[0]
    with pytest.raises(ValueError, match="queued"):
        acc.reenqueue(queued)
    (batch,) = acc.drain([1], 10**6, leader_of=leaders({TP0: 1}))[1]
    batch.complete(0)
    with pytest.raises(ValueError, match="done"):
        acc.reenqueue(batch)


# ------------------------------------------------------ futures / callbacks


def test_futures_get_offsets_and_metadata_when_the_batch_completes(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=0)
    r1 = acc.append("t", 0, b"key", b"value-1", timestamp=111)
    r2 = acc.append("t", 0, None, b"value-22", timestamp=222)
    r3 = acc.append("t", 0, b"k3", None, timestamp=333)
    futures = [r.future for r in (r1, r2, r3)]
    assert all(f is not None and not f.done() for f in futures)
    (batch,) = acc.drain([1], 10**6, leader_of=leaders({TP0: 1}))[1]
    assert batch.complete(1000) is True
    assert [f.result(timeout=0) for f in futures if f is not None] == [
        RecordMetadata("t", 0, 1000, 111, 3, 7),
        RecordMetadata("t", 0, 1001, 222, -1, 8),
        RecordMetadata("t", 0, 1002, 333, 2, -1),
    ]
    assert batch.complete(5) is False and batch.fail(RuntimeError()) is False
    assert acc.used_memory == 0 and not acc.has_incomplete()


def test_log_append_time_replaces_the_create_time(clock: FakeClock) -> None:
    acc = make(clock)
    result = acc.append("t", 0, None, b"v", timestamp=111)
    acc.queued_batches(TP0)[0].complete(7, log_append_time=999)
    assert result.future is not None
    assert result.future.result(timeout=0).timestamp == 999


def test_a_failure_reaches_every_future_and_callback(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=0)
    seen: list[tuple[RecordMetadata | None, BaseException | None]] = []
    futures = [
        acc.append("t", 0, None, b"v", timestamp=1, callback=lambda m, e: seen.append((m, e)))
        .future
        for _ in range(3)
    ]
    (batch,) = acc.drain([1], 10**6, leader_of=leaders({TP0: 1}))[1]
    error = ConnectionError("broker went away")
    assert batch.fail(error) is True
    for future in futures:
        assert future is not None
        assert future.exception(timeout=0) is error
    assert seen == [(None, error)] * 3
    assert acc.used_memory == 0 and not acc.has_incomplete()


def test_callbacks_run_in_order_before_futures_resolve(clock: FakeClock) -> None:
    acc = make(clock)
    calls: list[tuple[int, bool]] = []
    futures: list[RecordFuture] = []

    def callback(i: int) -> object:
        def run(metadata: RecordMetadata | None, exc: BaseException | None) -> None:
            assert metadata is not None and exc is None
            # Kafka's order: every callback of the batch before any future is done.
            calls.append((metadata.offset, any(f.done() for f in futures)))
            if i == 1:
                raise RuntimeError("a broken callback does not stop the others")

        return run

    for i in range(4):
        result = acc.append("t", 0, None, b"v", timestamp=1, callback=callback(i))  # type: ignore[arg-type]
        assert result.future is not None
        futures.append(result.future)
    acc.queued_batches(TP0)[0].complete(50)
    assert calls == [(50, False), (51, False), (52, False), (53, False)]
    assert [f.result(timeout=0).offset for f in futures] == [50, 51, 52, 53]


def test_record_futures_cannot_be_cancelled(clock: FakeClock) -> None:
    acc = make(clock)
    future = acc.append("t", 0, None, b"v", timestamp=1).future
    assert future is not None
    assert future.cancel() is False
    acc.queued_batches(TP0)[0].complete(0)
    assert future.result(timeout=0).offset == 0


def test_a_callback_may_send_again(clock: FakeClock) -> None:
    acc = make(clock)
    follow_ups = []

    def resend(metadata: RecordMetadata | None, exc: BaseException | None) -> None:
        follow_ups.append(acc.append("t", 1, None, b"follow-up", timestamp=1))

    acc.append("t", 0, None, b"v", timestamp=1, callback=resend)
    acc.queued_batches(TP0)[0].complete(0)  # no deadlock: callbacks run outside the lock
    assert len(follow_ups) == 1 and acc.queued_batches(TP1)


def test_futures_work_with_asyncio(clock: FakeClock) -> None:
    import asyncio

    acc = make(clock)

    async def main() -> int:
        result = acc.append("t", 0, None, b"v", timestamp=1)
        assert result.future is not None
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, acc.queued_batches(TP0)[0].complete, 41)
        metadata = await loop.run_in_executor(None, result.future.result)
        return metadata.offset

    assert asyncio.run(main()) == 41


# ------------------------------------------------------------------- codec


@pytest.mark.parametrize("compression", list(Compression))
def test_built_batches_decode_to_the_appended_records(
    clock: FakeClock, compression: Compression
) -> None:
    acc = make(clock, linger_ms=0, batch_size=64 * 1024, compression=compression)
    rng = random.Random(int(compression))
    appended = []
    for i in range(300):
        key = None if i % 7 == 0 else b"key-%d" % (i % 13)
        value = None if i % 11 == 0 else rng.randbytes(rng.randrange(0, 300))
        headers = [("trace", b"t-%d" % i), ("empty", None)] if i % 5 == 0 else []
        ts = 1_700_000_000_000 + rng.randrange(-1000, 1000)
        acc.append("t", 0, key, value, headers, ts)
        appended.append((key, value, headers, ts))
    (batch,) = acc.drain([1], 10**7, leader_of=leaders({TP0: 1}))[1]
    decoded = RecordBatch(batch.build())
    assert decoded.header.compression == compression
    assert decoded.header.record_count == 300
    records = decoded.records()
    assert [(r.key, r.value, r.headers, r.timestamp) for r in records] == appended
    assert [r.offset for r in records] == list(range(300))
    if compression == Compression.NONE:
        assert len(batch.build()) == batch.estimated_size


def test_a_producer_batch_alone(clock: FakeClock) -> None:
    batch = ProducerBatch("t", 4, batch_size=200, created_ms=clock.now_ms)
    assert batch.has_room_for(10_000)  # empty: anything fits
    size = batch.size_of(b"k", b"v" * 50, [], 10)
    future = batch.append(b"k", b"v" * 50, [], 10)
    assert batch.estimated_size == HEADER_SIZE + size
    assert not batch.has_room_for(200)
    records = RecordBatch(batch.build()).records()
    assert batch.is_closed and [r.value for r in records] == [b"v" * 50]
    with pytest.raises(RuntimeError, match="closed"):
        batch.append(None, b"late", [], 11)
    batch.complete(3)
    assert future.result(timeout=0).offset == 3 and batch.is_done
    assert "t-4" in repr(batch)


# ------------------------------------------------------------- flush / abort


def test_flush_waits_for_every_incomplete_batch(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=10_000)
    fill(acc, TP0, 1)
    fill(acc, TP1, 1)
    acc.flush_begin()
    drained = acc.drain([1], 10**6, leader_of=leaders({TP0: 1, TP1: 1}))[1]
    assert len(drained) == 2
    assert acc.await_flush_completion(timeout=0.02) is False  # nothing completed yet
    acc.flush_begin()
    completer = threading.Timer(0.02, lambda: [b.complete(0) for b in drained])
    completer.start()
    try:
        assert acc.await_flush_completion(timeout=5) is True
    finally:
        completer.join()
    assert not acc.flush_in_progress and not acc.has_incomplete()


def test_abort_fails_queued_and_in_flight_batches(clock: FakeClock) -> None:
    acc = make(clock, linger_ms=0)
    in_flight = fill(acc, TP0, 8)
    acc.drain([1], 10**6, leader_of=leaders({TP0: 1}))
    queued = fill(acc, TP0, 9) + fill(acc, TP1, 1)
    acc.close()
    error = ProducerClosedError("closed forcefully")
    assert acc.abort_incomplete_batches(error) == 4
    for future in in_flight + queued:
        assert future.exception(timeout=0) is error
    assert acc.used_memory == 0 and not acc.has_undrained() and not acc.has_incomplete()
    with pytest.raises(ProducerClosedError):
        acc.append("t", 0, None, b"v", timestamp=1)


def test_invalid_configuration_is_rejected() -> None:
    for bad in (
        {"batch_size": -1},
        {"linger_ms": -1},
        {"buffer_memory": 0},
        {"max_block_ms": -1},
        {"retry_backoff_ms": -1},
    ):
        with pytest.raises(ValueError):
            RecordAccumulator(**bad)  # type: ignore[arg-type]


# ------------------------------------------------------ concurrency smoke


def test_concurrent_appends_drains_and_completions() -> None:
    acc = RecordAccumulator(batch_size=2000, linger_ms=0, buffer_memory=20_000, max_block_ms=5000)
    partitions = [("t", p) for p in range(3)]
    leader_of = leaders({tp: p % 2 for p, tp in enumerate(partitions)})
    next_offset = dict.fromkeys(partitions, 0)
    futures: list[RecordFuture] = []
    futures_lock = threading.Lock()
    stop = threading.Event()

    def producer(seed: int) -> None:
        rng = random.Random(seed)
        for i in range(300):
            tp = partitions[rng.randrange(3)]
            result = acc.append(tp[0], tp[1], None, b"%d-%d" % (seed, i) + b"." * 50, timestamp=1)
            assert result.future is not None
            with futures_lock:
                futures.append(result.future)

    def sender() -> None:
        while not stop.is_set() or acc.has_incomplete():
            nodes = acc.ready(time.monotonic() * 1000, leader_of).ready_nodes
            for batches in acc.drain(nodes, 5000).values():
                for batch in batches:
                    batch.build()
                    tp = batch.topic_partition
                    batch.complete(next_offset[tp])
                    next_offset[tp] += batch.record_count
            time.sleep(0.0005)

    sender_thread = threading.Thread(target=sender)
    sender_thread.start()
    threads = [threading.Thread(target=producer, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    sender_thread.join(timeout=10)
    assert not sender_thread.is_alive()
    assert len(futures) == 1200
    by_partition: dict[int, list[int]] = {}
    for future in futures:
        metadata = future.result(timeout=0)
        by_partition.setdefault(metadata.partition, []).append(metadata.offset)
    for p, offsets in by_partition.items():
        assert sorted(offsets) == list(range(next_offset[("t", p)]))
    assert acc.used_memory == 0
