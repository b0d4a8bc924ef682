"""What the transaction coordinator decides for each request (Kafka's
TransactionCoordinator ``handle*``), as pure functions over one id's
:class:`~services.transactions.txn_metadata.TransactionMetadata`.

Each either raises a typed error and changes nothing, returns None (nothing to
write: answer success, e.g. partitions already in the transaction), or returns the
:class:`~services.transactions.txn_metadata.TxnTransit` to write (the metadata then
has it pending; the caller writes it and completes or aborts it).

Fencing: a request naming another producer id than the id's current one gets
INVALID_PRODUCER_ID_MAPPING; one with another epoch gets PRODUCER_FENCED (an older
epoch is a zombie). A transition already pending, or a transaction still
completing (Prepare*), gets the retriable CONCURRENT_TRANSACTIONS.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from services.transactions.txn_metadata import (
    NO_PRODUCER_EPOCH,
    Completion,
    IllegalTransitionError,
    TopicPartition,
    TransactionMetadata,
    TxnTransit,
    epoch_exhausted,
)
from services.transactions.txn_state import TxnState
from strand.coordination.shards import GROUP_TOPIC, shard_for
from strand.errors import (
    ConcurrentTransactionsError,
    ErrorCode,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
)

__all__ = [
    "DEFAULT_MAX_TIMEOUT_MS",
    "MAX_TRANSACTIONAL_ID_BYTES",
    "ProducerIdAndEpoch",
    "abort_timed_out",
    "add_partitions",
    "complete_txn",
    "end_txn",
    "init_producer_id",
    "offsets_partition",
    "validate_timeout",
    "validate_transactional_id",
    "verify_partitions",
]

DEFAULT_MAX_TIMEOUT_MS = 900_000  # Kafka's transaction.max.timeout.ms: 15 minutes
# The longest string Kafka's protocol carries (an int16 length): the record key's too.
MAX_TRANSACTIONAL_ID_BYTES = (1 << 15) - 1


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    producer_id: int
    epoch: int
    # The end opened the next transaction (EndTxn's next partitions) under these.
    opened: bool = False


def validate_transactional_id(transactional_id: str) -> None:
    if not transactional_id:
        raise InvalidRequestError("the transactional id is empty: give the producer a "
                                  "transactional_id, or none for an idempotent producer")
    size = len(transactional_id.encode())
    if size > MAX_TRANSACTIONAL_ID_BYTES:
        raise InvalidRequestError(
            f"transactional id {transactional_id[:40]!r}... is {size} bytes; at most "
            f"{MAX_TRANSACTIONAL_ID_BYTES} are allowed")


def validate_timeout(timeout_ms: int, max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS) -> None:
    if not 0 < timeout_ms <= max_timeout_ms:
        raise InvalidTransactionTimeoutError(
            f"transaction timeout {timeout_ms} ms is outside 1..{max_timeout_ms} ms "
            "(transaction.max.timeout.ms): lower transaction_timeout_ms")


def offsets_partition(group_id: str, shards: int) -> TopicPartition:
    """The partition AddOffsetsToTxn adds: the group's shard of __consumer_offsets."""
    return (GROUP_TOPIC, shard_for(group_id, shards))


def init_producer_id(metadata: TransactionMetadata, timeout_ms: int,
                     expected: ProducerIdAndEpoch | None, now_ms: int,
                     new_producer_id: Callable[[], int],
                     max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS) -> TxnTransit:
    """InitProducerId for an id whose metadata exists (a new id gets
    :meth:`TransactionMetadata` with a fresh producer id and no epoch first).

    Returns an Empty transit with the next epoch (or a new producer id once the
    epochs run out), or, when a transaction is open, the PrepareEpochFence transit:
    the caller then aborts it with :func:`end_txn` (``from_client=False``) under
    that epoch and answers CONCURRENT_TRANSACTIONS, so the client retries and gets
    an epoch of its own."""
    validate_transactional_id(metadata.transactional_id)
    validate_timeout(timeout_ms, max_timeout_ms)
    if metadata.pending:
        raise _concurrent(metadata)
    if expected is not None and not _may_reinit(metadata, expected):
        raise ProducerFencedError(
            f"transactional id {metadata.transactional_id!r} now has producer id "
            f"{metadata.producer_id}, not {expected.producer_id}: a newer instance exists")
    state = metadata.state
    if state.completing or metadata.completing is not None:
        raise _concurrent(metadata)
    if state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
        if metadata.epoch_exhausted and (expected is None
                                         or expected.epoch == metadata.producer_epoch):
            return metadata.prepare_producer_id_rotation(new_producer_id(), timeout_ms, now_ms,
                                                         record_last_epoch=expected is not None)
        return metadata.prepare_increment_epoch(
            timeout_ms, None if expected is None else expected.epoch, now_ms)
    if state is TxnState.ONGOING:
        if expected is not None and (expected.producer_id, expected.epoch) != (
                metadata.producer_id, metadata.producer_epoch):
            # Kafka fences here whatever the expected epoch; an older one is a zombie,
            # which must not abort the current instance's transaction.
            raise ProducerFencedError(
                f"transactional id {metadata.transactional_id!r} has a transaction open "
                f"under epoch {metadata.producer_epoch} of producer {metadata.producer_id}, "
                f"not {expected.epoch} of {expected.producer_id}: a newer instance exists")
        return metadata.prepare_fence_epoch()
    raise IllegalTransitionError(
        f"{metadata.transactional_id!r} is {state.kafka_name}, a state never entered")


def _may_reinit(metadata: TransactionMetadata, expected: ProducerIdAndEpoch) -> bool:
    """KIP-360: a producer re-initialising with its id and epoch is not fenced if the
    metadata is new, names its producer id, or (a retried rotation) names the last
    producer id with an exhausted epoch."""
    return (metadata.producer_epoch == NO_PRODUCER_EPOCH
            or expected.producer_id == metadata.producer_id
            or (expected.producer_id == metadata.last_producer_id
                and epoch_exhausted(expected.epoch)))


def _check_producer(metadata: TransactionMetadata | None, transactional_id: str,
                    producer_id: int, epoch: int) -> TransactionMetadata:
    validate_transactional_id(transactional_id)
    if metadata is None:
        raise InvalidProducerIdMappingError(
            f"transactional id {transactional_id!r} is unknown here: call "
            "init_transactions() first")
    if metadata.producer_id != producer_id:
        raise InvalidProducerIdMappingError(
            f"transactional id {transactional_id!r} has producer id "
            f"{metadata.producer_id}, not {producer_id}: call init_transactions() again")
    if metadata.producer_epoch != epoch:
        raise ProducerFencedError(
            f"producer {producer_id} of {transactional_id!r} has epoch "
            f"{metadata.producer_epoch}, not {epoch}: a newer instance fenced this one; "
            "close it")
    return metadata


def _concurrent(metadata: TransactionMetadata) -> ConcurrentTransactionsError:
    pending = metadata.pending_state
    what = (f"a change to {pending.kafka_name} is being written" if pending is not None
            else "the markers of the last transaction are still being written"
            if metadata.completing is not None
            else f"the last transaction is still {metadata.state.kafka_name}")
    return ConcurrentTransactionsError(
        f"transactional id {metadata.transactional_id!r}: {what}; retry shortly")


def add_partitions(metadata: TransactionMetadata | None, transactional_id: str,
                   producer_id: int, epoch: int, partitions: Iterable[TopicPartition],
                   now_ms: int, offsets: bool = False) -> TxnTransit | None:
    """AddPartitionsToTxn (and AddOffsetsToTxn, ``offsets``, with
    :func:`offsets_partition`). A transaction's data partitions may be added while the
    previous transaction's markers are written (each partition holds its batches until
    its marker); its offsets may not: the group coordinator keeps one pending offset per
    (group, producer, partition), which this transaction's TxnOffsetCommit would
    replace before the previous transaction's completion commits it."""
    added = frozenset(partitions)
    if not added:
        raise InvalidRequestError(f"{transactional_id!r}: no partitions to add")
    for topic, partition in sorted(added):
        if not topic or partition < 0:
            raise InvalidRequestError(
                f"{transactional_id!r}: cannot add partition {topic!r}-{partition}")
    metadata = _check_producer(metadata, transactional_id, producer_id, epoch)
    if metadata.pending or (metadata.state.completing and metadata.completing is None):
        raise _concurrent(metadata)  # a fence's abort (or an older record's) completes first
    if offsets and metadata.completing is not None:
        raise _concurrent(metadata)
    if metadata.state is TxnState.ONGOING and added <= metadata.partitions:
        return None
    return metadata.prepare_add_partitions(added, now_ms)


def end_txn(metadata: TransactionMetadata | None, transactional_id: str, producer_id: int,
            epoch: int, commit: bool, now_ms: int, from_client: bool = True,
            new_producer_id: Callable[[], int] | None = None,
            opens: Iterable[TopicPartition] = (),
            keep_epoch: bool = False) -> TxnTransit | None:
    """EndTxn: Ongoing -> PrepareCommit / PrepareAbort under the next epoch (from
    ``new_producer_id`` once the epochs run out; see txn_metadata), or, with
    ``opens``, Ongoing -> Ongoing: the next transaction begins with those partitions
    in the same record, or, ``keep_epoch`` (Kafka's transaction version 1), Prepare*
    under the same epoch. A retry of an end that is decided answers success (None:
    the caller answers the current producer id and epoch); an end that contradicts
    the outcome, or with no transaction open, is INVALID_TXN_STATE.

    The coordinator itself (``from_client=False``) ends a transaction it fences with
    the bumped epoch of the pending PrepareEpochFence."""
    validate_transactional_id(transactional_id)
    opened = frozenset(opens)
    for topic, partition in sorted(opened):
        if not topic or partition < 0:
            raise InvalidRequestError(
                f"{transactional_id!r}: cannot open the next transaction with partition "
                f"{topic!r}-{partition}")
    if opened and not from_client:
        raise IllegalTransitionError(f"{transactional_id!r}: a fence opens nothing")
    decided = _decided_end(metadata, producer_id, epoch) if from_client else None
    if decided is not None:
        if decided == commit:
            return None
        raise InvalidTxnStateError(
            f"cannot {'commit' if commit else 'abort'} the transaction of "
            f"{transactional_id!r} (producer {producer_id}, epoch {epoch}): it was already "
            f"{'committed' if decided else 'aborted'}")
    if metadata is None or metadata.producer_id != producer_id:
        _check_producer(metadata, transactional_id, producer_id, epoch)
    assert metadata is not None
    fencing = metadata.pending_state is TxnState.PREPARE_EPOCH_FENCE
    expected_epoch = metadata.producer_epoch + 1 if fencing and not from_client \
        else metadata.producer_epoch
    if epoch != expected_epoch:
        raise ProducerFencedError(
            f"producer {producer_id} of {transactional_id!r} has epoch {expected_epoch}, "
            f"not {epoch}: a newer instance fenced this one; close it")
    if metadata.pending and not (fencing and not from_client):
        raise _concurrent(metadata)
    outcome = "commit" if commit else "abort"
    state = metadata.state
    if state is TxnState.ONGOING:
        if metadata.completing is not None:
            raise _concurrent(metadata)
        fencing = metadata.pending_state is TxnState.PREPARE_EPOCH_FENCE
        rotated = None
        if not fencing and not keep_epoch and epoch_exhausted(metadata.producer_epoch + 1):
            if new_producer_id is None:
                raise ConcurrentTransactionsError(
                    f"transactional id {transactional_id!r} needs a new producer id; retry")
            rotated = new_producer_id()
        if fencing:
            return metadata.prepare_end(commit, now_ms)
        return metadata.prepare_end(commit, now_ms, rotated, opened, keep_epoch)
    if state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
        if commit == (state is TxnState.COMPLETE_COMMIT):
            return None  # a retry of an end that completed
    elif state.completing and commit == (state is TxnState.PREPARE_COMMIT):
        raise _concurrent(metadata)
    if state in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
        raise IllegalTransitionError(
            f"{transactional_id!r} is {state.kafka_name}, a state never entered")
    raise InvalidTxnStateError(
        f"cannot {outcome} the transaction of {transactional_id!r}: it is "
        f"{state.kafka_name}" + (" (no transaction is open: begin one and send first)"
                                 if state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                              TxnState.COMPLETE_ABORT) else ""))


def _decided_end(metadata: TransactionMetadata | None, producer_id: int,
                 epoch: int) -> bool | None:
    """If this EndTxn repeats one that moved the id to its next epoch (its answer was
    lost): the outcome that end decided (True: commit). None otherwise."""
    if metadata is None or metadata.pending or epoch == NO_PRODUCER_EPOCH or (
            producer_id, epoch) != (metadata.last_producer_id, metadata.last_producer_epoch):
        return None
    state = metadata.state
    if state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
        return state is TxnState.COMPLETE_COMMIT
    ended = metadata.completing
    if state.completing and ended is not None and (
            ended.producer_id, ended.producer_epoch) == (producer_id, epoch):
        return ended.commit
    # An end that opened the next transaction (its markers due, or written since).
    for ended in (metadata.completing, metadata.last_ended):
        if state is TxnState.ONGOING and ended is not None and (
                ended.producer_id, ended.producer_epoch) == (producer_id, epoch):
            return ended.commit
    return None


def complete_txn(metadata: TransactionMetadata, ended: Completion,
                 now_ms: int) -> TxnTransit:
    """Every partition of ``ended`` has its marker: the transit to write
    (Prepare* -> Complete*, or the next transaction's Ongoing without the
    Completion). CONCURRENT_TRANSACTIONS while another change is pending (retry);
    INVALID_TXN_STATE if ``ended`` is no longer what the id has to complete."""
    if metadata.pending:
        raise _concurrent(metadata)
    if metadata.completion_due() != ended:
        raise InvalidTxnStateError(
            f"{metadata.transactional_id!r} no longer has the "
            f"{'commit' if ended.commit else 'abort'} of producer {ended.producer_id} "
            f"(epoch {ended.producer_epoch}) to complete: it is {metadata.state.kafka_name}")
    if metadata.state is TxnState.ONGOING:
        return metadata.prepare_previous_completed(now_ms)
    return metadata.prepare_complete(now_ms)


def abort_timed_out(metadata: TransactionMetadata, producer_id: int) -> TxnTransit | None:
    """transaction.timeout.ms passed: fence the producer (PrepareEpochFence; then
    :func:`end_txn` aborts under the bumped epoch). None if the id moved on since
    it was found timed out (another producer id, or a change pending)."""
    if metadata.producer_id != producer_id or metadata.pending \
            or metadata.state is not TxnState.ONGOING or metadata.completing is not None:
        return None  # (the previous transaction's markers first: the next round)
    return metadata.prepare_fence_epoch()


def verify_partitions(metadata: TransactionMetadata | None, transactional_id: str,
                      producer_id: int, epoch: int,
                      partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    """KIP-890 part 1: a partition leader asks, before the first transactional write
    of a producer to a partition, whether the partition is in its open transaction.
    A write that is not (a late request of an aborted transaction) is refused."""
    wanted = list(partitions)
    try:
        metadata = _check_producer(metadata, transactional_id, producer_id, epoch)
        if metadata.state.completing:
            raise _concurrent(metadata)
    except (InvalidProducerIdMappingError, ProducerFencedError,
            ConcurrentTransactionsError) as exc:
        return dict.fromkeys(wanted, exc.code)
    return {tp: ErrorCode.NONE if metadata.state is TxnState.ONGOING and tp in metadata.partitions
            else ErrorCode.INVALID_TXN_STATE for tp in wanted}
