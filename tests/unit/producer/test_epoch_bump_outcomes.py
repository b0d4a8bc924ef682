"""KIP-360's risk at an epoch bump: a queued retry whose earlier attempt may have been
written must not be renumbered under the new epoch (storage could not recognise it:
written twice). It is resolved under its old epoch first (storage answers a written
one with its original offsets), or, when it cannot be, fails to the user with
OutcomeUnknownError. Only batches refused by their sequence are renumbered.

The Sender runs turn by turn against a fake gateway whose partitions check producer
sequences as a leader does (tests/unit/producer/fake_gateway.py)."""

from __future__ import annotations

from strand.errors import ErrorCode, RecordTooLargeError, RequestTimedOutError
from strand.producer import OutcomeUnknownError, ProducerBatch, RecordAccumulator
from strand.producer.transaction_manager import TransactionManager
from tests.support.clock import FakeClock
from tests.unit.producer.fake_gateway import DrivenProducer, Fate
from tests.unit.producer.producer_helpers import leaders

TP0, TP1 = ("t", 0), ("t", 1)


def test_a_written_batch_whose_answer_was_lost_is_not_written_again_by_a_bump() -> None:
    """a0 is written but its answer lost; then TP1 needs a bump (storage lost the
    producer). Renumbered under the new epoch, a0 would be written a second time."""
    p = DrivenProducer.start()
    p.gateway.fates[TP0] = [Fate.LOSE_ANSWER]
    a0 = p.send(*TP0, b"a0")
    p.run(until=lambda: p.gateway.calls == 1)
    assert p.gateway.log(TP0).values == [b"a0"]  # written; the producer does not know
    p.gateway.refusals[TP1] = [ErrorCode.UNKNOWN_PRODUCER_ID]
    b0 = p.send(*TP1, b"b0")
    p.run(until=lambda: a0.done() and b0.done())
    assert p.gateway.log(TP0).values == [b"a0"]  # once
    assert p.gateway.log(TP1).values == [b"b0"]
    assert a0.result().offset == 0  # resolved under its old epoch: its original offset
    assert p.tm.epoch == 1  # then the bump: b0 was renumbered
    a1 = p.send(*TP0, b"a1")
    p.run(until=a1.done)
    assert p.gateway.log(TP0).values == [b"a0", b"a1"]


def test_an_unresolvable_outcome_fails_the_batch_instead_of_renumbering_it() -> None:
    """a0 is written, its answer lost, and then TP0's leader stops answering: a0 stays
    on the old epoch (TP1 moves on) until its delivery timeout, then fails with
    OutcomeUnknownError (its records are in the log) and is never renumbered."""
    p = DrivenProducer.start(delivery_timeout_ms=2_000)
    p.gateway.fates[TP0] = [Fate.LOSE_ANSWER]
    a0 = p.send(*TP0, b"a0")
    p.run(until=lambda: p.gateway.calls == 1)
    p.gateway.unreachable.add(TP0)
    p.gateway.refusals[TP1] = [ErrorCode.UNKNOWN_PRODUCER_ID]
    b0 = p.send(*TP1, b"b0")
    p.run(until=lambda: a0.done() and b0.done())
    error = a0.exception()
    assert isinstance(error, OutcomeUnknownError) and isinstance(error, RequestTimedOutError)
    assert "may or may not have been written" in str(error) and not error.retriable
    assert b0.result().offset == 0 and p.tm.epoch == 1
    tried = {header for tp, header in p.gateway.received if tp == TP0}
    assert tried == {(7, 0, 0)}  # a0 was only ever sent as it first was
    p.gateway.unreachable.clear()
    a1 = p.send(*TP0, b"a1")
    p.run(until=a1.done)
    assert a1.result().offset == 1
    assert p.gateway.log(TP0).values == [b"a0", b"a1"]  # a0 once, though "failed"


def test_a_dropped_call_is_resent_under_its_old_epoch_before_the_bump() -> None:
    """a0's call never reached the leader: resolving it under the old epoch writes it,
    once, before the bump."""
    p = DrivenProducer.start()
    p.gateway.fates[TP0] = [Fate.DROP]
    a0 = p.send(*TP0, b"a0")
    p.run(until=lambda: p.gateway.calls == 1)
    p.gateway.refusals[TP1] = [ErrorCode.UNKNOWN_PRODUCER_ID]
    b0 = p.send(*TP1, b"b0")
    p.run(until=lambda: a0.done() and b0.done())
    assert a0.result().offset == 0 and b0.result().offset == 0
    assert p.gateway.log(TP0).values == [b"a0"] and p.tm.epoch == 1


def test_a_batch_refused_by_its_sequence_is_renumbered() -> None:
    """Refused with OUT_OF_ORDER_SEQUENCE_NUMBER as the next expected batch: known not
    written, it gets the new epoch's sequence 0 and is written once."""
    p = DrivenProducer.start()
    p.gateway.refusals[TP0] = [ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER]
    a0 = p.send(*TP0, b"a0")
    p.run(until=a0.done)
    assert a0.result().offset == 0 and p.tm.epoch == 1
    assert p.gateway.log(TP0).values == [b"a0"]


def test_a_refusal_of_the_bytes_proves_no_attempt_was_written() -> None:
    """The first call is lost, the retry refused as too large: every attempt sent the
    same bytes, so none was written; the error says so (no OutcomeUnknownError)."""
    p = DrivenProducer.start()
    p.gateway.fates[TP0] = [Fate.DROP]
    p.gateway.refusals[TP0] = [ErrorCode.MESSAGE_TOO_LARGE]
    a0 = p.send(*TP0, b"a0")
    p.run(until=a0.done)
    assert isinstance(a0.exception(), RecordTooLargeError)
    assert not isinstance(a0.exception(), OutcomeUnknownError)


# -- the transaction manager's rule, alone ---------------------------------------------

def _sent(producer_id: int = 7) -> tuple[FakeClock, RecordAccumulator, TransactionManager,
                                         ProducerBatch, ProducerBatch]:
    clock = FakeClock()
    acc = RecordAccumulator(clock=clock, batch_size=0, linger_ms=0, retry_backoff_ms=0)
    tm = TransactionManager()
    tm.set_producer_id(producer_id, 0)
    acc.transaction_manager = tm
    for _ in range(2):
        acc.append(*TP0, None, b"v", [], None)
    b0, b1 = (acc.drain([1], 1 << 30, leader_of=leaders({TP0: 1}), now=clock())[1][0]
              for _ in range(2))
    return clock, acc, tm, b0, b1


def test_a_bump_leaves_a_partition_with_an_unresolved_retry_on_its_old_epoch() -> None:
    clock, acc, tm, b0, b1 = _sent()
    tm.attempt_failed(b0, proves_unwritten=False)  # answer lost
    tm.attempt_failed(b1, proves_unwritten=True)  # out of order behind b0
    for batch in (b1, b0):
        acc.reenqueue(batch, clock())
    acc.append(*TP1, None, b"other", [], None)
    tm.request_bump()
    assert tm.bump_epoch() and tm.epoch == 1

    def drain() -> list[ProducerBatch]:
        return acc.drain([1], 1 << 30, leader_of=leaders({TP0: 1, TP1: 1}), now=clock())[1]

    first = drain()  # TP0: only b0, still as sent; TP1: at once, under the new epoch
    assert {b.topic_partition: (b.producer_epoch, b.base_sequence) for b in first} == {
        TP0: (0, 0), TP1: (1, 0)} and b0 in first
    assert [b for b in drain() if b.topic_partition == TP0] == []  # b1 waits
    tm.attempt_failed(b0, proves_unwritten=True)  # resolved: not written
    acc.reenqueue(b0, clock())
    again = [drain()[0] for _ in range(2)]
    assert again == [b0, b1]
    assert [(b.producer_epoch, b.base_sequence) for b in again] == [(1, 0), (1, 1)]
