"""The coordinator's decisions, one example each: the happy paths of a transaction,
fencing, and every typed error for bad input (which changes nothing)."""

from __future__ import annotations

import copy

import pytest

from services.transactions.txn_metadata import (
    MAX_EPOCH,
    Completion,
    IllegalTransitionError,
    TransactionMetadata,
)
from services.transactions.txn_requests import (
    MAX_TRANSACTIONAL_ID_BYTES,
    ProducerIdAndEpoch,
    abort_timed_out,
    add_partitions,
    end_txn,
    init_producer_id,
    offsets_partition,
    verify_partitions,
)
from services.transactions.txn_state import VALID_PREVIOUS, TxnState
from strand.coordination.shards import GROUP_TOPIC, shard_for
from strand.errors import (
    ConcurrentTransactionsError,
    ErrorCode,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
    StrandError,
)
from tests.unit.transactions.txn_helpers import Shard

S = TxnState
# Kafka's TransactionState.validPreviousStates, written out independently.
KAFKA_TABLE = {
    "Empty": {"Empty", "CompleteCommit", "CompleteAbort"},
    "Ongoing": {"Ongoing", "Empty", "CompleteCommit", "CompleteAbort"},
    "PrepareCommit": {"Ongoing"},
    "PrepareAbort": {"Ongoing", "PrepareEpochFence"},
    "CompleteCommit": {"PrepareCommit"},
    "CompleteAbort": {"PrepareAbort"},
    "Dead": {"Empty", "CompleteAbort", "CompleteCommit"},
    "PrepareEpochFence": {"Ongoing"},
}


# Where Strand differs: a client's Prepare* leads to the next transaction's Ongoing
# while its markers are written (an epoch per transaction).
STRAND_TABLE = {**KAFKA_TABLE,
                "Ongoing": KAFKA_TABLE["Ongoing"] | {"PrepareCommit", "PrepareAbort"}}


def test_the_table_is_kafkas_with_the_overlap() -> None:
    assert {t.kafka_name: {s.kafka_name for s in previous}
            for t, previous in VALID_PREVIOUS.items()} == STRAND_TABLE
    assert [TxnState.from_name(n) for n in ("Empty", "PrepareEpochFence", "Bogus")] == [
        S.EMPTY, S.PREPARE_EPOCH_FENCE, None]
    assert [int(s) for s in S] == list(range(8))  # Kafka's state ids


def unchanged(metadata: TransactionMetadata, error: type[StrandError], call: object) -> None:
    before = copy.copy(metadata)
    with pytest.raises(error):
        call()  # type: ignore[operator]
    assert metadata == before


def test_a_transaction_commits_and_the_next_begins() -> None:
    shard = Shard()
    first = shard.init("app")
    assert (first.producer_epoch, first.last_producer_epoch) == (0, -1)
    metadata = shard.open("app", ("orders", 0), ("audit", 3))
    assert metadata.state is S.ONGOING and metadata.start_ms == shard.now_ms
    # partitions already in the transaction: nothing to write
    assert add_partitions(metadata, "app", metadata.producer_id, 0, [("orders", 0)], 1) is None
    prepare = end_txn(metadata, "app", metadata.producer_id, 0, True, shard.now_ms)
    assert prepare is not None and prepare.state is S.PREPARE_COMMIT
    # the end moves the id to the next epoch; the markers carry the ended one's
    assert (prepare.producer_epoch, prepare.last_producer_epoch) == (1, 0)
    assert prepare.completing is not None and prepare.completing.producer_epoch == 0
    shard.write(metadata, prepare)
    shard.finish("app")
    assert shard.metadata("app").state is S.COMPLETE_COMMIT and not metadata.partitions
    # a retried commit is answered success; an abort now is refused
    assert end_txn(metadata, "app", metadata.producer_id, 0, True, shard.now_ms) is None
    unchanged(metadata, InvalidTxnStateError,
              lambda: end_txn(metadata, "app", metadata.producer_id, 0, False, shard.now_ms))
    # the next transaction writes under the next epoch; the old one is fenced
    unchanged(metadata, ProducerFencedError,
              lambda: add_partitions(metadata, "app", metadata.producer_id, 0,
                                     [("orders", 1)], 5_000))
    again = add_partitions(metadata, "app", metadata.producer_id, 1, [("orders", 1)], 5_000)
    assert again is not None and again.start_ms == 5_000 and again.state is S.ONGOING


def test_a_commit_opens_the_next_transaction_in_the_same_record() -> None:
    shard = Shard()
    metadata = shard.open("app", ("orders", 0), ("audit", 3))
    pid = metadata.producer_id
    unchanged(metadata, InvalidRequestError, lambda: end_txn(
        metadata, "app", pid, 0, True, shard.now_ms, opens=[("", 1)]))
    shard.now_ms = 7_000
    both = end_txn(metadata, "app", pid, 0, True, shard.now_ms,
                   opens=[("orders", 0), ("audit", 3)])
    assert both is not None and both.state is S.ONGOING
    assert (both.producer_epoch, both.last_producer_epoch, both.start_ms) == (1, 0, 7_000)
    assert both.partitions == {("orders", 0), ("audit", 3)}
    assert both.completing is not None and both.completing.producer_epoch == 0
    shard.write(metadata, both)
    assert shard.reloaded().get("app") == metadata  # one record says it all
    # the next transaction has its partitions: no AddPartitions write, no question
    assert add_partitions(metadata, "app", pid, 1, [("orders", 0)], shard.now_ms) is None
    assert verify_partitions(metadata, "app", pid, 1, [("audit", 3)]) == {
        ("audit", 3): ErrorCode.NONE}
    # the ended one's end, repeated (its answer lost), is answered; its opposite is not
    for _ in ("markers due", "markers written"):
        assert end_txn(metadata, "app", pid, 0, True, shard.now_ms) is None
        unchanged(metadata, InvalidTxnStateError,
                  lambda: end_txn(metadata, "app", pid, 0, False, shard.now_ms))
        if metadata.completing is not None:
            shard.finish("app")
    assert metadata.state is S.ONGOING and metadata.completing is None
    # ended unused (an abort of nothing): the id moves on without a fence
    abort = end_txn(metadata, "app", pid, 1, False, shard.now_ms)
    assert abort is not None and abort.state is S.PREPARE_ABORT and abort.producer_epoch == 2
    # a fence opens nothing
    with pytest.raises(IllegalTransitionError):
        end_txn(metadata, "app", pid, 1, False, shard.now_ms, from_client=False,
                opens=[("orders", 0)])


def test_a_kafka_clients_end_keeps_its_epoch() -> None:
    """Transaction version 1 (a Kafka client's EndTxn before v5): Prepare* and the
    markers under the same epoch; the next transaction waits for them, then writes
    under that epoch again."""
    shard = Shard()
    metadata = shard.open("app", ("orders", 0))
    pid = metadata.producer_id
    prepare = end_txn(metadata, "app", pid, 0, True, shard.now_ms, keep_epoch=True)
    assert prepare is not None and prepare.state is S.PREPARE_COMMIT
    assert (prepare.producer_epoch, prepare.completing) == (0, None)
    with pytest.raises(IllegalTransitionError):
        metadata.prepare_end(True, shard.now_ms, opens=frozenset({("orders", 0)}),
                             keep_epoch=True)
    shard.write(metadata, prepare)
    assert metadata.completion_due() == Completion(pid, 0, True, frozenset({("orders", 0)}))
    unchanged(metadata, ConcurrentTransactionsError, lambda: end_txn(
        metadata, "app", pid, 0, True, shard.now_ms, keep_epoch=True))  # still completing
    unchanged(metadata, ConcurrentTransactionsError, lambda: add_partitions(
        metadata, "app", pid, 0, [("orders", 1)], shard.now_ms))
    shard.finish("app")
    assert metadata.state is S.COMPLETE_COMMIT and metadata.producer_epoch == 0
    assert end_txn(metadata, "app", pid, 0, True, shard.now_ms, keep_epoch=True) is None
    again = add_partitions(metadata, "app", pid, 0, [("orders", 1)], shard.now_ms)
    assert again is not None and again.producer_epoch == 0
    shard.write(metadata, again)
    assert shard.reloaded().get("app") == metadata


def test_commit_with_no_open_transaction_is_invalid_txn_state() -> None:
    shard = Shard()
    shard.init("app")
    metadata = shard.metadata("app")
    unchanged(metadata, InvalidTxnStateError,
              lambda: end_txn(metadata, "app", metadata.producer_id, 0, True, shard.now_ms))


def test_init_producer_id_bumps_the_epoch_and_fences_the_old_instance() -> None:
    shard = Shard()
    metadata = shard.open("app")
    old = (metadata.producer_id, metadata.producer_epoch)
    fence = shard.init("app")  # a new instance while a transaction is open
    assert fence.state is S.PREPARE_EPOCH_FENCE and fence.producer_epoch == 1
    assert metadata.state is S.PREPARE_ABORT and metadata.producer_epoch == 1
    # the old instance is fenced everywhere, and its transaction is being aborted
    unchanged(metadata, ProducerFencedError,
              lambda: add_partitions(metadata, "app", *old, [("x", 0)], 1))
    unchanged(metadata, ProducerFencedError,
              lambda: end_txn(metadata, "app", *old, True, 1))
    assert set(verify_partitions(metadata, "app", *old, [("orders", 0)]).values()) == {
        ErrorCode.PRODUCER_FENCED}
    # the new instance retries (CONCURRENT_TRANSACTIONS) until the abort completes
    unchanged(metadata, ConcurrentTransactionsError,
              lambda: init_producer_id(metadata, 60_000, None, 1, lambda: 0))
    shard.finish("app")
    assert shard.init("app").producer_epoch == 2


def test_timeout_aborts_with_an_epoch_bump() -> None:
    shard = Shard()
    metadata = shard.open("app")
    pid, epoch = metadata.producer_id, metadata.producer_epoch
    assert shard.store.timed_out(shard.now_ms + 60_000) == []
    (late,) = shard.store.timed_out(shard.now_ms + 60_001)
    assert (late.transactional_id, late.producer_id, late.producer_epoch) == ("app", pid, epoch)
    fence = abort_timed_out(metadata, late.producer_id)
    assert fence is not None and fence.producer_epoch == epoch + 1
    abort = end_txn(metadata, "app", pid, fence.producer_epoch, False, 1, from_client=False)
    assert abort is not None
    shard.write(metadata, abort)
    assert metadata.state is S.PREPARE_ABORT and metadata.producer_epoch == epoch + 1
    unchanged(metadata, ProducerFencedError,
              lambda: end_txn(metadata, "app", pid, epoch, True, 1))
    assert abort_timed_out(metadata, pid) is None  # already aborting


def test_a_failed_fence_write_leaves_the_epoch_and_retries_with_the_same() -> None:
    shard = Shard()
    metadata = shard.open("app")
    first = abort_timed_out(metadata, metadata.producer_id)
    assert first is not None
    abort = end_txn(metadata, "app", metadata.producer_id, first.producer_epoch, False, 1,
                    from_client=False)
    assert abort is not None
    shard.write(metadata, abort, fail=True)
    assert metadata.producer_epoch == 0 and metadata.state is S.ONGOING and not metadata.pending
    again = abort_timed_out(metadata, metadata.producer_id)
    assert again is not None and again.producer_epoch == first.producer_epoch


def test_retried_init_with_the_last_epoch_gets_the_same_epoch() -> None:
    shard = Shard()
    shard.init("app")
    first = shard.init("app", expected=ProducerIdAndEpoch(1000, 0))
    assert (first.producer_epoch, first.last_producer_epoch) == (1, 0)
    retry = shard.init("app", expected=ProducerIdAndEpoch(1000, 0))  # answer was lost
    assert retry.producer_epoch == 1
    metadata = shard.metadata("app")
    unchanged(metadata, ProducerFencedError,
              lambda: init_producer_id(metadata, 1000, ProducerIdAndEpoch(1000, 5), 1,
                                       lambda: 0))
    unchanged(metadata, ProducerFencedError,
              lambda: init_producer_id(metadata, 1000, ProducerIdAndEpoch(77, 1), 1, lambda: 0))


def test_an_exhausted_epoch_moves_to_a_new_producer_id() -> None:
    shard = Shard()
    shard.init("app")
    metadata = shard.metadata("app")
    metadata.producer_epoch = MAX_EPOCH - 1  # as if it had been bumped that often
    rotated = shard.init("app")
    assert (rotated.producer_id, rotated.producer_epoch, rotated.last_producer_id) == (
        1001, 0, 1000)
    assert metadata.producer_id == 1001


@pytest.mark.parametrize("tid", ["", "x" * (MAX_TRANSACTIONAL_ID_BYTES + 1)])
def test_empty_or_too_long_transactional_id_is_refused(tid: str) -> None:
    metadata = TransactionMetadata(tid, 1, 1000, 0)
    unchanged(metadata, InvalidRequestError,
              lambda: init_producer_id(metadata, 1000, None, 0, lambda: 2))
    unchanged(metadata, InvalidRequestError,
              lambda: add_partitions(metadata, tid, 1, -1, [("t", 0)], 0))


@pytest.mark.parametrize("timeout_ms", [0, -5, 900_001])
def test_out_of_range_timeout_is_refused(timeout_ms: int) -> None:
    metadata = TransactionMetadata("app", 1, 1000, 0)
    unchanged(metadata, InvalidTransactionTimeoutError,
              lambda: init_producer_id(metadata, timeout_ms, None, 0, lambda: 2))
    assert init_producer_id(metadata, 900_000, None, 0, lambda: 2).timeout_ms == 900_000


def test_unknown_id_or_producer_is_invalid_producer_id_mapping() -> None:
    with pytest.raises(InvalidProducerIdMappingError):
        add_partitions(None, "nobody", 1, 0, [("t", 0)], 0)
    with pytest.raises(InvalidProducerIdMappingError):
        end_txn(None, "nobody", 1, 0, True, 0)
    shard = Shard()
    metadata = shard.open("app")
    unchanged(metadata, InvalidProducerIdMappingError,
              lambda: add_partitions(metadata, "app", 999, 0, [("t", 0)], 0))
    unchanged(metadata, InvalidProducerIdMappingError,
              lambda: end_txn(metadata, "app", 999, 0, True, 0))


def test_changes_while_completing_are_concurrent_transactions() -> None:
    shard = Shard()
    metadata = shard.open("app")
    prepare = end_txn(metadata, "app", metadata.producer_id, 0, True, 1)
    assert prepare is not None
    # the PrepareCommit is being written
    unchanged(metadata, ConcurrentTransactionsError,
              lambda: add_partitions(metadata, "app", metadata.producer_id, 0, [("t", 0)], 1))
    unchanged(metadata, ConcurrentTransactionsError,
              lambda: end_txn(metadata, "app", metadata.producer_id, 0, True, 1))
    shard.write(metadata, prepare)
    # written: a retried commit is answered (the outcome is decided), an abort
    # contradicts it, the ended epoch is fenced; InitProducerId waits for the markers
    pid = metadata.producer_id
    assert end_txn(metadata, "app", pid, 0, True, 1) is None
    unchanged(metadata, InvalidTxnStateError, lambda: end_txn(metadata, "app", pid, 0, False, 1))
    unchanged(metadata, ProducerFencedError,
              lambda: add_partitions(metadata, "app", pid, 0, [("t", 0)], 1))
    unchanged(metadata, ConcurrentTransactionsError,
              lambda: init_producer_id(metadata, 60_000, None, 1, lambda: 0))
    # the next transaction begins at once, under the next epoch, keeping the markers due
    due = metadata.completion_due()
    following = add_partitions(metadata, "app", pid, 1, [("t", 0)], 2)
    assert following is not None
    shard.write(metadata, following)
    assert metadata.state is S.ONGOING and metadata.completion_due() == due
    assert verify_partitions(metadata, "app", pid, 1, [("t", 0)]) == {("t", 0): ErrorCode.NONE}
    # its offsets wait: their TxnOffsetCommit would replace the ended one's pending offsets
    unchanged(metadata, ConcurrentTransactionsError,
              lambda: add_partitions(metadata, "app", pid, 1, [offsets_partition("g", 50)], 2,
                                     offsets=True))
    # but it cannot end, be fenced or time out before those markers are written
    unchanged(metadata, ConcurrentTransactionsError,
              lambda: end_txn(metadata, "app", pid, 1, True, 3))
    unchanged(metadata, ConcurrentTransactionsError,
              lambda: init_producer_id(metadata, 60_000, None, 3, lambda: 0))
    assert abort_timed_out(metadata, pid) is None
    shard.finish("app")
    assert metadata.state is S.ONGOING and metadata.completing is None
    assert metadata.partitions == {("t", 0)} and metadata.producer_epoch == 1
    # not written: a new owner would load the Completion and write its markers again
    reloaded = shard.reloaded().get("app")
    assert reloaded is not None and reloaded.completion_due() == due


def test_bad_partitions_are_refused() -> None:
    shard = Shard()
    shard.init("app")
    metadata = shard.metadata("app")
    for parts in ([], [("", 0)], [("t", -1)]):
        unchanged(metadata, InvalidRequestError,
                  lambda p=parts: add_partitions(metadata, "app", 1000, 0, p, 1))


def test_offsets_partition_is_the_groups_shard() -> None:
    assert offsets_partition("readers", 12) == (GROUP_TOPIC, shard_for("readers", 12))


def test_verify_partitions_is_kip_890_part_1() -> None:
    shard = Shard()
    metadata = shard.open("app", ("orders", 0))
    assert verify_partitions(metadata, "app", metadata.producer_id, 0,
                             [("orders", 0), ("orders", 1)]) == {
        ("orders", 0): ErrorCode.NONE, ("orders", 1): ErrorCode.INVALID_TXN_STATE}
    assert verify_partitions(None, "app", 1, 0, [("orders", 0)]) == {
        ("orders", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}


def test_transitions_outside_the_table_are_refused() -> None:
    metadata = TransactionMetadata("app", 1, 1000, 0)  # Empty
    with pytest.raises(IllegalTransitionError):
        metadata.prepare_complete(1)  # Empty -> CompleteAbort
    with pytest.raises(IllegalTransitionError):
        metadata.prepare_end(True, 1)  # Empty -> PrepareCommit
    assert not metadata.pending
    transit = metadata.prepare_increment_epoch(1000, None, 1)
    with pytest.raises(IllegalTransitionError):  # one pending change at a time
        metadata.prepare_add_partitions([("t", 0)], 1)
    with pytest.raises(IllegalTransitionError):  # not the pending transit
        metadata.complete_transition(type(transit)(**{
            **{f: getattr(transit, f) for f in transit.__dataclass_fields__},
            "producer_epoch": 5}))
