"""Records without a key stick to one partition until its batch is complete (KIP-480)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from strand.producer import RecordAccumulator, StickyPartitioner


def test_sticks_to_one_partition_until_a_new_batch() -> None:
    sticky = StickyPartitioner(random.Random(1))
    first = sticky.partition("t", 8)
    assert all(sticky.partition("t", 8) == first for _ in range(100))
    second = sticky.on_new_batch("t", first, 8)
    assert second != first
    assert sticky.partition("t", 8) == second


def test_topics_are_independent() -> None:
    sticky = StickyPartitioner(random.Random(2))
    a = sticky.partition("a", 50)
    b = sticky.partition("b", 50)
    sticky.on_new_batch("a", a, 50)
    assert sticky.partition("b", 50) == b


def test_a_stale_new_batch_notice_does_not_switch_again() -> None:
    # Two senders saw the same full batch: only the first switches the topic.
    sticky = StickyPartitioner(random.Random(3))
    first = sticky.partition("t", 10)
    second = sticky.on_new_batch("t", first, 10)
    assert sticky.on_new_batch("t", first, 10) == second
    assert sticky.partition("t", 10) == second


def test_prefers_available_partitions() -> None:
    sticky = StickyPartitioner(random.Random(4))
    assert sticky.partition("t", 6, available=[4]) == 4
    seen = set()
    current = 4
    for _ in range(200):
        current = sticky.on_new_batch("t", current, 6, available=[1, 3, 5])
        seen.add(current)
    assert seen == {1, 3, 5}


def test_a_single_available_partition_is_chosen_even_if_it_was_the_previous() -> None:
    sticky = StickyPartitioner(random.Random(5))
    p = sticky.partition("t", 6, available=[2])
    assert p == 2
    assert sticky.on_new_batch("t", 2, 6, available=[2]) == 2


def test_switches_to_a_different_partition_when_none_is_available() -> None:
    sticky = StickyPartitioner(random.Random(6))
    current = sticky.partition("t", 3, available=[])
    for _ in range(100):
        nxt = sticky.on_new_batch("t", current, 3, available=[])
        assert nxt != current and 0 <= nxt < 3
        current = nxt


def test_out_of_range_and_duplicate_available_entries_are_ignored() -> None:
    sticky = StickyPartitioner(random.Random(7))
    assert sticky.partition("a", 4, available=[9, 9, 9]) in range(4)
    assert sticky.partition("b", 4, available=[1]) == 1
    assert sticky.on_new_batch("b", 1, 4, available=[1, 1]) == 1  # terminates


def test_single_partition_topic() -> None:
    sticky = StickyPartitioner()
    assert sticky.partition("t", 1) == 0
    assert sticky.on_new_batch("t", 0, 1) == 0


def test_repicks_when_the_topic_shrinks() -> None:
    sticky = StickyPartitioner(random.Random(8))
    current = sticky.partition("t", 100)
    while current < 10:
        current = sticky.on_new_batch("t", current, 100)
    assert 0 <= sticky.partition("t", 10) < 10


def test_switches_spread_over_all_partitions() -> None:
    sticky = StickyPartitioner(random.Random(9))
    current = sticky.partition("t", 5)
    counts: Counter[int] = Counter()
    for _ in range(5000):
        current = sticky.on_new_batch("t", current, 5)
        counts[current] += 1
    assert set(counts) == set(range(5))
    assert min(counts.values()) > 800  # ~1000 each


def test_rejects_no_partitions() -> None:
    with pytest.raises(ValueError):
        StickyPartitioner().partition("t", 0)
    with pytest.raises(ValueError):
        StickyPartitioner().on_new_batch("t", 0, 0)


def test_with_the_accumulator_null_keys_fill_whole_batches() -> None:
    """The KafkaProducer flow: append with abort_on_new_batch; on abort, switch and append."""
    sticky = StickyPartitioner(random.Random(10))
    acc = RecordAccumulator(batch_size=1024, linger_ms=1000)
    n = 6
    order: list[int] = []
    for i in range(400):
        value = b"v%03d" % i + b"." * 40
        p = sticky.partition("t", n)
        result = acc.append("t", p, None, value, timestamp=1, abort_on_new_batch=True)
        if result.abort_for_new_batch:
            assert result.future is None
            assert not acc.queued_batches(("t", p)) or acc.queued_batches(("t", p))[-1].is_closed
            p = sticky.on_new_batch("t", p, n)
            result = acc.append("t", p, None, value, timestamp=1)
            assert result.new_batch_created
        order.append(p)
    # Consecutive runs: every switch happens exactly when a batch is complete.
    runs = [order[0]]
    for p in order[1:]:
        if p != runs[-1]:
            runs.append(p)
    batches = [b for p in range(n) for b in acc.queued_batches(("t", p))]
    assert len(runs) == len(batches)
    # Every batch but the open ones was filled to within one record of batch_size.
    closed = [b for b in batches if b.is_closed]
    assert closed and all(b.estimated_size > 1024 - 60 for b in closed)
    assert len({p for p in order}) > 1
