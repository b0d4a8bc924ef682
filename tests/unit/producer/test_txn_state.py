"""The transactional producer's state machine alone (strand.producer.txn_state) and
TransactionalManager with the RecordAccumulator: Kafka's table of valid transitions
(checked against every pair, and as a hypothesis property over random calls), the
fatal and abortable errors, and the partition bookkeeping that keeps a partition's
batches back until the coordinator has added it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strand.errors import InvalidTxnStateError, ProducerFencedError, RequestTimedOutError
from strand.producer import Producer, RecordAccumulator
from strand.producer.errors import TransactionAbortableError
from strand.producer.transactional import TransactionalManager
from strand.producer.txn_state import TxnState, TxnStateMachine
from strand.records import validate_batch
from tests.support.clock import FakeClock
from tests.unit.producer.producer_helpers import leaders

S = TxnState
# Kafka's TransactionManager.State.isTransitionValid, written out as (source, target).
KAFKA_TABLE = {
    (S.UNINITIALIZED, S.UNINITIALIZED),
    (S.UNINITIALIZED, S.INITIALIZING), (S.ABORTING_TRANSACTION, S.INITIALIZING),
    (S.INITIALIZING, S.READY), (S.COMMITTING_TRANSACTION, S.READY),
    (S.ABORTING_TRANSACTION, S.READY),
    (S.READY, S.IN_TRANSACTION),
    (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION),
    (S.IN_TRANSACTION, S.ABORTING_TRANSACTION), (S.ABORTABLE_ERROR, S.ABORTING_TRANSACTION),
    (S.IN_TRANSACTION, S.ABORTABLE_ERROR), (S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR),
    (S.ABORTABLE_ERROR, S.ABORTABLE_ERROR), (S.INITIALIZING, S.ABORTABLE_ERROR),
} | {(source, S.FATAL_ERROR) for source in S} | {
    # KIP-939's prepareTransaction(): Strand's SDK has it, Kafka's client since 4.x.
    (S.IN_TRANSACTION, S.PREPARED_TRANSACTION)}
TP = ("t", 0)


def at(state: TxnState) -> TxnStateMachine:
    """A machine in ``state``, reached through valid moves only."""
    machine = TxnStateMachine("tx")
    path = {
        S.UNINITIALIZED: [],
        S.INITIALIZING: [S.INITIALIZING],
        S.READY: [S.INITIALIZING, S.READY],
        S.IN_TRANSACTION: [S.INITIALIZING, S.READY, S.IN_TRANSACTION],
        S.COMMITTING_TRANSACTION: [S.INITIALIZING, S.READY, S.IN_TRANSACTION,
                                   S.COMMITTING_TRANSACTION],
        S.ABORTING_TRANSACTION: [S.INITIALIZING, S.READY, S.IN_TRANSACTION,
                                 S.ABORTING_TRANSACTION],
        S.ABORTABLE_ERROR: [S.INITIALIZING, S.READY, S.IN_TRANSACTION, S.ABORTABLE_ERROR],
        S.PREPARED_TRANSACTION: [S.INITIALIZING, S.READY, S.IN_TRANSACTION,
                                 S.PREPARED_TRANSACTION],
        S.FATAL_ERROR: [S.FATAL_ERROR],
    }[state]
    for target in path:
        move(machine, target)
    assert machine.state is state
    return machine


def move(machine: TxnStateMachine, target: TxnState) -> None:
    """Ask for ``target`` as the producer would: errors through their setters."""
    if target is S.ABORTABLE_ERROR:
        machine.set_abortable(RequestTimedOutError("a send timed out"))
    elif target is S.FATAL_ERROR:
        machine.set_fatal(ProducerFencedError("fenced"))
    else:
        machine.transition(target)


@pytest.mark.parametrize("source", list(S))
@pytest.mark.parametrize("target", [t for t in S if t not in (S.ABORTABLE_ERROR,
                                                                S.FATAL_ERROR)])
def test_every_transition_follows_kafkas_table(source: TxnState, target: TxnState) -> None:
    machine = at(source)
    if (source, target) in KAFKA_TABLE:
        machine.transition(target)
        assert machine.state is target
        return
    with pytest.raises((InvalidTxnStateError, TransactionAbortableError,
                        ProducerFencedError)):
        machine.transition(target)
    assert machine.state is source  # a refused call changes nothing


def test_a_refused_call_names_the_state_and_what_to_do() -> None:
    with pytest.raises(InvalidTxnStateError, match=r"READY.*begin_transaction"):
        at(S.READY).transition(S.COMMITTING_TRANSACTION, "commit_transaction()")
    with pytest.raises(InvalidTxnStateError, match="already open"):
        at(S.IN_TRANSACTION).transition(S.IN_TRANSACTION, "begin_transaction()")
    with pytest.raises(InvalidTxnStateError, match="init_transactions"):
        at(S.UNINITIALIZED).add_partition(TP)


def test_abortable_error_refuses_everything_but_abort_and_keeps_its_cause() -> None:
    machine = at(S.IN_TRANSACTION)
    cause = RequestTimedOutError("partition t-0: delivery timed out")
    machine.set_abortable(cause)
    for target in (S.COMMITTING_TRANSACTION, S.IN_TRANSACTION, S.READY):
        with pytest.raises(TransactionAbortableError) as info:
            machine.transition(target)
        assert info.value.cause is cause
        assert info.value.code == cause.code
    with pytest.raises(TransactionAbortableError):
        machine.add_partition(TP)
    machine.transition(S.ABORTING_TRANSACTION)
    machine.set_abortable(RequestTimedOutError("its own failures while aborting"))
    assert machine.state is S.ABORTING_TRANSACTION
    machine.transition(S.READY)
    assert machine.error is None


def test_fatal_error_is_raised_by_every_later_call() -> None:
    fenced = ProducerFencedError("a newer instance exists")
    for state in S:
        machine = at(state)
        machine.set_fatal(fenced)
        first = machine.fatal_error  # the first fatal error stays
        assert first is (fenced if state is not S.FATAL_ERROR else first)
        for target in S:
            if target is S.FATAL_ERROR:
                continue
            with pytest.raises(ProducerFencedError) as info:
                machine.transition(target)
            assert info.value is first
        with pytest.raises(ProducerFencedError):
            machine.add_partition(TP)
        machine.set_abortable(RequestTimedOutError("later"))  # fatal stays fatal
        assert machine.state is S.FATAL_ERROR and machine.fatal_error is first


def test_partitions_are_sendable_only_once_added_and_forgotten_at_the_end() -> None:
    machine = at(S.IN_TRANSACTION)
    machine.add_partition(TP)
    machine.add_partition(("t", 1))
    assert not machine.is_send_allowed(TP)
    taken = machine.take_new_partitions()
    assert taken == {TP, ("t", 1)}
    machine.add_partition(("u", 0))  # while an add is in flight: waits for the next one
    assert machine.take_new_partitions() == set()
    machine.partitions_not_added({("t", 1)})  # retriable: asked again
    machine.partitions_added({TP})
    assert machine.is_send_allowed(TP) and machine.started
    assert machine.take_new_partitions() == {("t", 1), ("u", 0)}
    machine.partitions_added({("t", 1), ("u", 0)})
    machine.add_partition(TP)  # already in: nothing to add
    assert not machine.adding
    machine.transition(S.COMMITTING_TRANSACTION)
    assert machine.is_send_allowed(TP)
    machine.transition(S.READY)
    assert not machine.is_send_allowed(TP) and not machine.started


def test_an_aborting_transaction_adds_and_sends_nothing_more() -> None:
    machine = at(S.IN_TRANSACTION)
    machine.add_partition(TP)
    machine.partitions_added(set(machine.take_new_partitions()))
    machine.add_partition(("t", 1))
    machine.transition(S.ABORTING_TRANSACTION)
    assert machine.take_new_partitions() == set()
    assert not machine.is_send_allowed(TP)


OPS = st.lists(st.sampled_from(list(S)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_random_calls_only_take_kafkas_transitions(targets: list[TxnState]) -> None:
    """Whatever is asked, in any order: the state moves along the table only, a
    refused move leaves it as it was, and FATAL_ERROR is never left."""
    machine = TxnStateMachine("tx")
    for target in targets:
        before = machine.state
        try:
            move(machine, target)
        except (InvalidTxnStateError, TransactionAbortableError, ProducerFencedError):
            assert machine.state is before
            continue
        after = machine.state
        assert after == before or (before, after) in KAFKA_TABLE, (before, after)
        if before is S.FATAL_ERROR:
            assert after is S.FATAL_ERROR


# ------------------------------------------------ TransactionalManager, accumulator


def setup() -> tuple[FakeClock, RecordAccumulator, TransactionalManager]:
    clock = FakeClock()
    acc = RecordAccumulator(clock=clock, batch_size=0, linger_ms=0, retry_backoff_ms=0)
    machine = at(S.IN_TRANSACTION)
    tm = TransactionalManager(machine)
    tm.set_producer_id(9, 3)
    acc.transaction_manager = tm
    return clock, acc, tm


def test_a_partition_is_drained_only_after_the_coordinator_added_it() -> None:
    clock, acc, tm = setup()
    tm.txn.add_partition(TP)
    acc.append(TP[0], TP[1], None, b"v", [], None)
    assert acc.drain([1], 1 << 20, leader_of=leaders({TP: 1}), now=clock())[1] == []
    tm.txn.partitions_added(tm.txn.take_new_partitions())
    [batch] = acc.drain([1], 1 << 20, leader_of=leaders({TP: 1}), now=clock())[1]
    header = validate_batch(batch.build())
    assert header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 3, 0)


def test_a_failed_batch_makes_the_transaction_abortable_and_never_bumps_locally() -> None:
    clock, acc, tm = setup()
    tm.txn.add_partition(TP)
    tm.txn.partitions_added(tm.txn.take_new_partitions())
    acc.append(TP[0], TP[1], None, b"v", [], None)
    [batch] = acc.drain([1], 1 << 20, leader_of=leaders({TP: 1}), now=clock())[1]
    cause = RequestTimedOutError("delivery timed out")
    batch.fail(cause)
    assert tm.txn.state is S.ABORTABLE_ERROR and tm.txn.error is cause
    assert tm.bump_needed and tm.epoch == 3  # the bump comes from the coordinator


def test_transactional_settings_are_checked() -> None:
    for bad_id in ("", "x" * 40_000, 7):
        with pytest.raises(ValueError, match="transactional_id"):
            Producer("127.0.0.1:1", transactional_id=bad_id)  # type: ignore[arg-type]
    for bad_timeout in (0, -5, 900_001):
        with pytest.raises(ValueError, match="transaction_timeout_ms"):
            Producer("127.0.0.1:1", transactional_id="tx", transaction_timeout_ms=bad_timeout)
    with pytest.raises(ValueError, match="idempotent"):
        Producer("127.0.0.1:1", transactional_id="tx", enable_idempotence=False)
    with pytest.raises(ValueError, match="acks"):
        Producer("127.0.0.1:1", transactional_id="tx", acks=1)
    with pytest.raises(ValueError, match="needs a transactional_id"):
        Producer("127.0.0.1:1", transaction_timeout_ms=1000)


def test_calls_out_of_order_are_refused_without_a_cluster() -> None:
    with Producer("127.0.0.1:1", transactional_id="tx") as producer:
        with pytest.raises(InvalidTxnStateError, match="init_transactions"):
            producer.send("t", b"v", partition=0)
        with pytest.raises(InvalidTxnStateError, match="init_transactions"):
            producer.begin_transaction()
        with pytest.raises(InvalidTxnStateError, match="init_transactions"):
            producer.commit_transaction()
    with Producer("127.0.0.1:1") as plain, \
            pytest.raises(InvalidTxnStateError, match="transactional_id"):
        plain.begin_transaction()
