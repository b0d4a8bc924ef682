"""The idempotent producer's sequences (TransactionManager with the RecordAccumulator):
assigned at the first drain, kept by retries, retries sent in order, at most 5
unanswered batches per partition, epoch bump after a gap; and Kafka's rules for
``enable_idempotence``."""

from __future__ import annotations

import pytest

from strand.producer import Producer, ProducerBatch, RecordAccumulator
from strand.producer.transaction_manager import MAX_EPOCH, TransactionManager
from strand.records import validate_batch
from tests.support.clock import FakeClock
from tests.unit.producer.producer_helpers import leaders

TP0 = ("t", 0)
TP1 = ("t", 1)
LEADERS = leaders({TP0: 1, TP1: 1})
PRODUCER_ID = 77


def setup(producer_id: int | None = PRODUCER_ID,
          ) -> tuple[FakeClock, RecordAccumulator, TransactionManager]:
    clock = FakeClock()
    # batch_size 0: every record is a batch of its own.
    acc = RecordAccumulator(clock=clock, batch_size=0, linger_ms=0, retry_backoff_ms=0)
    tm = TransactionManager()
    if producer_id is not None:
        tm.set_producer_id(producer_id, 0)
    acc.transaction_manager = tm
    return clock, acc, tm


def append(acc: RecordAccumulator, tp: tuple[str, int], records: int) -> None:
    for i in range(records):
        acc.append(tp[0], tp[1], None, b"v%d" % i, [], None)


def drain(acc: RecordAccumulator, clock: FakeClock) -> list[ProducerBatch]:
    return acc.drain([1], 1 << 30, leader_of=LEADERS, now=clock())[1]


def header(batch: ProducerBatch) -> tuple[int, int, int]:
    h = validate_batch(batch.build())
    return h.producer_id, h.producer_epoch, h.base_sequence


def test_sequences_are_assigned_per_partition_when_drained() -> None:
    clock, acc, _ = setup()
    acc.append("t", 0, None, b"a", [], None)
    assert acc.queued_batches(TP0)[0].has_sequence is False  # not before the drain
    append(acc, TP0, 2)
    append(acc, TP1, 1)
    sent = drain(acc, clock) + drain(acc, clock) + drain(acc, clock)
    by_tp = {tp: [header(b) for b in sent if b.topic_partition == tp] for tp in (TP0, TP1)}
    assert by_tp[TP0] == [(PRODUCER_ID, 0, 0), (PRODUCER_ID, 0, 1), (PRODUCER_ID, 0, 2)]
    assert by_tp[TP1] == [(PRODUCER_ID, 0, 0)]


def test_a_retry_keeps_its_sequence_and_bytes() -> None:
    clock, acc, _ = setup()
    append(acc, TP0, 3)
    first = drain(acc, clock)[0]
    sent_bytes = first.build()
    acc.reenqueue(first, clock())
    again = drain(acc, clock)
    assert again == [first]
    assert first.build() == sent_bytes
    assert header(first) == (PRODUCER_ID, 0, 0)
    assert header(drain(acc, clock)[0])[2] == 1  # the next new batch continues at 1


def test_retries_go_out_in_sequence_order_one_at_a_time() -> None:
    clock, acc, _ = setup()
    append(acc, TP0, 4)
    b0, b1, b2 = (drain(acc, clock)[0] for _ in range(3))
    # b0's answer was lost; b1 and b2 were refused as out of order: all three retry.
    for batch in (b2, b0, b1):
        acc.reenqueue(batch, clock())
    assert drain(acc, clock) == [b0]  # the partition's first unanswered batch only
    assert drain(acc, clock) == []  # b1 waits for b0's answer
    assert acc.ready(clock(), LEADERS).ready_nodes == set()
    b0.complete(10)
    assert drain(acc, clock) == [b1]
    b1.complete(11)
    assert drain(acc, clock) == [b2]
    b2.complete(12)
    fresh = drain(acc, clock)[0]
    assert [header(b)[2] for b in (b0, b1, b2, fresh)] == [0, 1, 2, 3]


def test_at_most_five_batches_of_a_partition_are_unanswered() -> None:
    clock, acc, _ = setup()
    append(acc, TP0, 7)
    append(acc, TP1, 1)
    sent = [b for _ in range(7) for b in drain(acc, clock)]
    assert [b.topic_partition for b in sent].count(TP0) == 5
    assert [b.topic_partition for b in sent].count(TP1) == 1
    sent[0].complete(0)
    assert [b.topic_partition for b in drain(acc, clock)] == [TP0]


def test_the_window_counts_answered_batches_after_an_unanswered_one() -> None:
    """b0's call timed out while b1..b4 were acknowledged: storage's last 5 batches
    must still hold b0 when it is retried, so no new batch goes out before b0's answer."""
    clock, acc, _ = setup()
    append(acc, TP0, 6)
    sent = [drain(acc, clock)[0] for _ in range(5)]
    for batch in sent[1:]:
        batch.complete(0)
    acc.reenqueue(sent[0], clock())
    assert drain(acc, clock) == [sent[0]]
    assert drain(acc, clock) == []
    sent[0].complete(0)
    assert header(drain(acc, clock)[0])[2] == 5


def test_nothing_is_sent_before_the_producer_id() -> None:
    clock, acc, tm = setup(producer_id=None)
    append(acc, TP0, 1)
    assert acc.ready(clock(), LEADERS).ready_nodes == set()
    assert drain(acc, clock) == []
    tm.set_producer_id(5, 3)
    assert acc.ready(clock(), LEADERS).ready_nodes == {1}
    assert header(drain(acc, clock)[0]) == (5, 3, 0)


def test_a_gap_bumps_the_epoch_and_resequences_the_queued_retries_in_order() -> None:
    clock, acc, tm = setup()
    append(acc, TP0, 4)
    b0, b1, b2 = (drain(acc, clock)[0] for _ in range(3))
    b0.complete(0)
    b1.fail(RuntimeError("delivery timeout"))  # sequence 1 never reaches storage
    assert tm.bump_needed
    acc.reenqueue(b2, clock())  # refused: out of order after the gap
    assert drain(acc, clock) == []  # nothing goes out until the bump
    assert tm.bump_epoch()
    assert (tm.epoch, tm.bump_needed) == (1, False)
    retried, fresh = drain(acc, clock)[0], None
    assert retried is b2
    b2.complete(1)
    fresh = drain(acc, clock)[0]
    assert [header(b) for b in (b2, fresh)] == [(PRODUCER_ID, 1, 0), (PRODUCER_ID, 1, 1)]


def test_at_the_largest_epoch_a_new_producer_id_is_due() -> None:
    tm = TransactionManager()
    tm.set_producer_id(PRODUCER_ID, MAX_EPOCH)
    tm.request_bump()
    assert not tm.bump_epoch()
    assert tm.needs_new_producer_id


def test_enable_idempotence_follows_kafkas_rules() -> None:
    for conflict in ({"acks": 1}, {"max_in_flight_requests": 6}, {"retries": 0}):
        with pytest.raises(ValueError, match="enable_idempotence=True needs"):
            Producer("127.0.0.1:1", enable_idempotence=True, **conflict)  # type: ignore[arg-type]
        with Producer("127.0.0.1:1", **conflict) as producer:  # type: ignore[arg-type]
            assert not producer.idempotent  # unset: yields to the conflicting setting
    with Producer("127.0.0.1:1", enable_idempotence=True) as producer:
        assert producer.idempotent
    with Producer("127.0.0.1:1") as producer:
        assert producer.idempotent  # on by default, as Kafka >= 3.0
    with Producer("127.0.0.1:1", enable_idempotence=False) as producer:
        assert not producer.idempotent
