"""One transactional id's state and its transitions (Kafka's TransactionMetadata),
as pure code: no I/O, no clock, no locks.

A change is made in two steps, as in Kafka. ``prepare_*`` checks the transition
against the table (:mod:`services.transactions.txn_state`), marks it pending and
returns the :class:`TxnTransit` to write to ``__transaction_state``; once that write
is on every in-sync replica, :meth:`TransactionMetadata.complete_transition` applies
it (and checks it again), or :meth:`TransactionMetadata.abort_pending` forgets it if
the write failed. A pending transition blocks every other one: the caller answers
CONCURRENT_TRANSACTIONS meanwhile. What is in memory is therefore always what the
last written record says, plus at most one pending change.

Epochs (KIP-98, KIP-360; KIP-890 part 1 leaves the coordinator's epochs alone):
InitProducerId bumps the epoch; so does fencing an open transaction (a new
InitProducerId, or ``transaction.timeout.ms`` passing), which aborts it under the
bumped epoch so that the old instance is fenced. A producer id whose epoch reaches
``Short.MaxValue - 1`` is replaced by a new producer id with epoch 0, so the
coordinator always has one epoch left to fence with.

An epoch per transaction (KIP-890 part 2, taken further): a client's EndTxn writes
Prepare* with the *next* epoch (a new producer id once the epochs run out) and the
ended transaction as its :class:`Completion` (its producer id, epoch, outcome and
partitions: what the markers carry). The client gets that epoch in the answer and
may add partitions of its next transaction at once: Prepare* -> Ongoing keeps the
Completion until its markers are written (then Ongoing again without it), so the
next transaction runs while the previous one's markers are written. Its batches
carry the new epoch, so a partition holds them until the older transaction's
marker is there (services.storage.txn_verification), and a marker of an older
epoch than the partition has seen is already done. A fence's PrepareAbort (an
InitProducerId, a timeout) has no Completion: its markers carry the bumped epoch,
which fences the old instance on every partition.

Where Strand differs: Kafka bumps the in-memory epoch before the fencing
PrepareAbort is written and remembers a failed write (``hasFailedEpochFence``) so
as not to bump twice; here the bumped epoch lives only in the pending transit until
its write succeeds, so a retried fence writes the same epoch and memory never runs
ahead of the log. The last producer id and epoch are written to the log (Kafka keeps
the last epoch in memory only), so a retried InitProducerId is recognised across a
coordinator change.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NoReturn

from services.transactions.txn_state import VALID_PREVIOUS, TxnState
from strand.errors import ProducerFencedError, UnknownServerError

__all__ = [
    "MAX_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "Completion",
    "IllegalTransitionError",
    "TopicPartition",
    "TransactionMetadata",
    "TxnTransit",
    "epoch_exhausted",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = (1 << 15) - 1  # an epoch is a signed 16-bit number on the wire

TopicPartition = tuple[str, int]


def epoch_exhausted(epoch: int) -> bool:
    """A client never gets ``MAX_EPOCH``: the coordinator keeps it to fence with."""
    return epoch >= MAX_EPOCH - 1


class IllegalTransitionError(UnknownServerError):
    """A transition outside Kafka's table or a transit that does not follow from the
    state: a bug in the coordinator, never the client's doing."""


@dataclass(frozen=True, slots=True)
class Completion:
    """A transaction whose outcome is written (Prepare*) and whose markers are due:
    the producer id and epoch they carry, the outcome and the partitions."""

    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The state a transition leads to: what one ``__transaction_state`` record holds."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int  # when the first partition of the transaction was added; -1: none
    last_update_ms: int
    # The previous transaction, while its markers are written (see the module doc).
    completing: Completion | None = None


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    timeout_ms: int
    last_update_ms: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    state: TxnState = TxnState.EMPTY
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1
    completing: Completion | None = None
    # The transaction the last client end decided, kept in memory once its markers
    # are written: a repeated EndTxn (its answer lost) is still answered with that
    # outcome when the end opened the next transaction (see prepare_end).
    last_ended: Completion | None = None
    pending_state: TxnState | None = None
    # The pending PrepareAbort fences: it carries the bumped epoch (see the docstring).
    pending_fence: bool = field(default=False)

    # -- the persisted view ---------------------------------------------------------------

    @classmethod
    def loaded(cls, transactional_id: str, transit: TxnTransit) -> TransactionMetadata:
        """The state a record read back from ``__transaction_state`` describes."""
        return cls(transactional_id, transit.producer_id, transit.timeout_ms,
                   transit.last_update_ms, transit.last_producer_id, transit.producer_epoch,
                   transit.last_producer_epoch, transit.state, transit.partitions,
                   transit.start_ms, transit.completing)

    def current(self) -> TxnTransit:
        """The state as a transit (what the last record written says)."""
        return TxnTransit(self.producer_id, self.last_producer_id, self.producer_epoch,
                          self.last_producer_epoch, self.timeout_ms, self.state,
                          self.partitions, self.start_ms, self.last_update_ms, self.completing)

    def completion_due(self) -> Completion | None:
        """The transaction whose markers are due: the Completion of a client's end
        (kept through the next transaction's Ongoing), or the Prepare* transaction
        itself for a fence (or a record written before epochs per transaction)."""
        if self.completing is not None:
            return self.completing
        if self.state.completing:
            return self._ending(self.state is TxnState.PREPARE_COMMIT)
        return None

    def _ending(self, commit: bool) -> Completion:
        """The open transaction (its producer id, epoch and partitions) ending so."""
        return Completion(self.producer_id, self.producer_epoch, commit, self.partitions)

    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return epoch_exhausted(self.producer_epoch)

    # -- prepare: check, mark pending, return what to write -------------------------------

    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                now_ms: int) -> TxnTransit:
        """InitProducerId on the same producer id: the next epoch, or the current one
        again when ``expected_epoch`` is the last (a retry of a call that succeeded).
        Raises ProducerFencedError for any other expected epoch."""
        if self.epoch_exhausted:
            raise IllegalTransitionError(
                f"{self.transactional_id!r}: producer id {self.producer_id} has no epoch "
                "left; it needs a new producer id")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            raise ProducerFencedError(
                f"transactional id {self.transactional_id!r}: epoch {expected_epoch} of "
                f"producer {self.producer_id} is neither the current ({self.producer_epoch}) "
                f"nor the last ({self.last_producer_epoch}); a newer instance exists: "
                "close this producer")
        return self._prepare(TxnState.EMPTY, self.producer_id, self.producer_id, epoch, last,
                             timeout_ms, frozenset(), -1, now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransit:
        """The epochs of this producer id are used up: go on with a new one at epoch 0."""
        if self.state.pending_transaction:
            raise IllegalTransitionError(
                f"{self.transactional_id!r}: cannot change the producer id while a "
                f"transaction is {self.state.kafka_name}")
        return self._prepare(TxnState.EMPTY, new_producer_id, self.producer_id, 0,
                             self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             timeout_ms, frozenset(), -1, now_ms)

    def prepare_fence_epoch(self) -> TxnTransit:
        """Abort the open transaction under the next epoch, fencing the instance that
        opened it (a new InitProducerId, or the transaction timed out)."""
        if self.producer_epoch >= MAX_EPOCH:
            raise IllegalTransitionError(
                f"{self.transactional_id!r}: epoch {self.producer_epoch} cannot be bumped")
        if self.completing is not None:
            raise IllegalTransitionError(
                f"{self.transactional_id!r}: cannot fence while the previous transaction "
                "is completing")
        return self._prepare(TxnState.PREPARE_EPOCH_FENCE, self.producer_id,
                             self.last_producer_id, self.producer_epoch + 1, NO_PRODUCER_EPOCH,
                             self.timeout_ms, self.partitions, self.start_ms,
                             self.last_update_ms)

    def prepare_add_partitions(self, added: Iterable[TopicPartition],
                               now_ms: int) -> TxnTransit:
        """The first partitions of a transaction (from Empty, Complete*, or Prepare*
        with its markers still due: the Completion stays), or more of them."""
        if self.state is TxnState.ONGOING:
            start, partitions = self.start_ms, self.partitions | frozenset(added)
        else:
            start, partitions = now_ms, frozenset(added)
        if self.state.completing and self.completing is None:
            raise IllegalTransitionError(
                f"{self.transactional_id!r}: a transaction cannot begin while a fenced "
                "one is aborting")
        return self._prepare(TxnState.ONGOING, self.producer_id, self.last_producer_id,
                             self.producer_epoch, self.last_producer_epoch, self.timeout_ms,
                             partitions, start, now_ms, self.completing)

    def prepare_previous_completed(self, now_ms: int) -> TxnTransit:
        """Ongoing, and the previous transaction's markers are written: drop its
        Completion."""
        if self.state is not TxnState.ONGOING or self.completing is None:
            raise IllegalTransitionError(
                f"{self.transactional_id!r}: no previous transaction is completing")
        return self._prepare(TxnState.ONGOING, self.producer_id, self.last_producer_id,
                             self.producer_epoch, self.last_producer_epoch, self.timeout_ms,
                             self.partitions, self.start_ms, now_ms)

    def prepare_end(self, commit: bool, now_ms: int,
                    new_producer_id: int | None = None,
                    opens: frozenset[TopicPartition] = frozenset(),
                    keep_epoch: bool = False) -> TxnTransit:
        """Ongoing -> PrepareCommit / PrepareAbort. A client's end moves the id to the
        next epoch, or to ``new_producer_id`` at epoch 0 once the epochs run out, and
        keeps the transaction as the Completion (see the module doc). A fence, once
        prepared, turns into its PrepareAbort here (see
        :func:`~services.transactions.txn_requests.end_txn`), under the bumped epoch.

        ``opens``: the client's end also begins its next transaction with these
        partitions: Ongoing -> Ongoing under the next epoch, with the Completion — the
        record Prepare* -> Ongoing would leave, in one write instead of two.

        ``keep_epoch``: Kafka's transaction version 1 (a Kafka client's EndTxn before
        v5): Prepare* under the same producer id and epoch, without a Completion (the
        markers carry that epoch); the next transaction waits for them."""
        fencing = self.pending_state is TxnState.PREPARE_EPOCH_FENCE
        if fencing and commit:
            raise IllegalTransitionError(f"{self.transactional_id!r}: a fence only aborts")
        if self.completing is not None:
            raise IllegalTransitionError(
                f"{self.transactional_id!r}: the previous transaction is still completing")
        target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if fencing:
            self.pending_state = None
            transit = self._prepare(target, self.producer_id, self.last_producer_id,
                                    self.producer_epoch + 1, NO_PRODUCER_EPOCH,
                                    self.timeout_ms, self.partitions, self.start_ms, now_ms)
            self.pending_fence = True
            return transit
        if epoch_exhausted(self.producer_epoch + 1):
            if new_producer_id is None:
                raise IllegalTransitionError(
                    f"{self.transactional_id!r}: the epochs of producer {self.producer_id} "
                    "are used up; the end needs a new producer id")
            producer_id, epoch = new_producer_id, 0
        else:
            producer_id, epoch = self.producer_id, self.producer_epoch + 1
        if keep_epoch:
            if opens:
                raise IllegalTransitionError(
                    f"{self.transactional_id!r}: an end that keeps the epoch opens nothing")
            return self._prepare(target, self.producer_id, self.last_producer_id,
                                 self.producer_epoch, self.last_producer_epoch,
                                 self.timeout_ms, self.partitions, self.start_ms, now_ms)
        ended = self._ending(commit)
        if opens:
            return self._prepare(TxnState.ONGOING, producer_id, self.producer_id, epoch,
                                 self.producer_epoch, self.timeout_ms, opens, now_ms, now_ms,
                                 ended)
        return self._prepare(target, producer_id, self.producer_id, epoch, self.producer_epoch,
                             self.timeout_ms, self.partitions, self.start_ms, now_ms, ended)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """The markers are written: Prepare* -> Complete*."""
        target = (TxnState.COMPLETE_COMMIT if self.state is TxnState.PREPARE_COMMIT
                  else TxnState.COMPLETE_ABORT)
        return self._prepare(target, self.producer_id, self.last_producer_id,
                             self.producer_epoch, self.last_producer_epoch, self.timeout_ms,
                             frozenset(), self.start_ms, now_ms)

    def prepare_dead(self) -> TxnTransit:
        """The id expires: its tombstone is to be written, then it is forgotten."""
        return self._prepare(TxnState.DEAD, self.producer_id, self.last_producer_id,
                             self.producer_epoch, self.last_producer_epoch, self.timeout_ms,
                             frozenset(), self.start_ms, self.last_update_ms)

    def _prepare(self, target: TxnState, producer_id: int, last_producer_id: int, epoch: int,
                 last_epoch: int, timeout_ms: int, partitions: frozenset[TopicPartition],
                 start_ms: int, now_ms: int,
                 completing: Completion | None = None) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransitionError(
                f"{self.transactional_id!r}: preparing {target.kafka_name} while "
                f"{self.pending_state.kafka_name} is pending")
        if producer_id < 0:
            raise IllegalTransitionError(f"illegal producer id {producer_id}")
        if target is not TxnState.DEAD and not 0 <= epoch <= MAX_EPOCH:
            raise IllegalTransitionError(f"illegal producer epoch {epoch}")
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalTransitionError(
                f"{self.transactional_id!r}: {self.state.kafka_name} -> {target.kafka_name} "
                "is not a valid transition")
        self.pending_state = target
        return TxnTransit(producer_id, last_producer_id, epoch, last_epoch, timeout_ms,
                          target, partitions, start_ms, now_ms, completing)

    # -- complete: the record is written ------------------------------------------------

    def abort_pending(self) -> None:
        """The pending transit was not written: forget it (nothing else changed)."""
        self.pending_state = None
        self.pending_fence = False

    def complete_transition(self, transit: TxnTransit) -> None:
        """Apply ``transit`` once its record is written, checking (as Kafka does) that
        it is the pending one and follows from the current state."""
        target = self.pending_state
        if target is None or target is not transit.state:
            self._refuse(transit, "it is not the pending transition")
        same_producer = (transit.producer_id == self.producer_id
                         and transit.producer_epoch == self.producer_epoch)
        if target is TxnState.EMPTY:
            bump = (transit.producer_epoch == self.producer_epoch + 1
                    or (transit.producer_epoch == 0 and transit.producer_id != self.producer_id))
            if (not (same_producer or bump) or transit.partitions or transit.start_ms != -1):
                self._refuse(transit, "not an epoch bump of an empty transaction")
        elif target is TxnState.ONGOING and self._ends_and_begins(transit):
            pass
        elif target is TxnState.ONGOING:
            if not same_producer or transit.timeout_ms != self.timeout_ms:
                self._refuse(transit, "not the same producer adding partitions")
            if self.state is TxnState.ONGOING:
                if (not self.partitions <= transit.partitions
                        or transit.completing not in (self.completing, None)):
                    self._refuse(transit, "not the open transaction adding partitions")
            elif transit.completing != self.completing:
                self._refuse(transit, "the previous transaction's markers are not kept")
        elif target in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            fenced = (self.pending_fence and transit.producer_id == self.producer_id
                      and transit.producer_epoch == self.producer_epoch + 1
                      and transit.completing is None)
            ended = self._ending(target is TxnState.PREPARE_COMMIT)
            next_epoch = (transit.producer_epoch == self.producer_epoch + 1
                          if transit.producer_id == self.producer_id
                          else transit.producer_epoch == 0)
            ends = (transit.completing == ended and next_epoch
                    and transit.last_producer_id == self.producer_id
                    and transit.last_producer_epoch == self.producer_epoch)
            kept = (not self.pending_fence and transit.completing is None
                    and (transit.producer_id, transit.producer_epoch, transit.last_producer_id,
                         transit.last_producer_epoch) == (
                        self.producer_id, self.producer_epoch, self.last_producer_id,
                        self.last_producer_epoch))
            if ((not ends and not fenced and not kept) or transit.partitions != self.partitions
                    or transit.timeout_ms != self.timeout_ms
                    or transit.start_ms != self.start_ms):
                self._refuse(transit, "not the open transaction ending")
        elif target in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            if (not same_producer or transit.timeout_ms != self.timeout_ms
                    or transit.start_ms == -1 or transit.partitions
                    or transit.completing is not None):
                self._refuse(transit, "not the prepared transaction completing")
        else:  # PrepareEpochFence turns into PrepareAbort; Dead is removed, never applied
            self._refuse(transit, f"{target.kafka_name} is never completed")
        self.producer_id = transit.producer_id
        self.last_producer_id = transit.last_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.partitions = transit.partitions
        self.start_ms = transit.start_ms
        self.last_update_ms = transit.last_update_ms
        if self.completing is not None and transit.completing is None:
            self.last_ended = self.completing  # its markers are written
        elif target is not TxnState.ONGOING:
            self.last_ended = None
        self.completing = transit.completing
        self.state = transit.state
        self.pending_state = None
        self.pending_fence = False

    def _ends_and_begins(self, transit: TxnTransit) -> bool:
        """Whether ``transit`` ends the open transaction and begins the next one with
        its partitions (``prepare_end`` with ``opens``)."""
        ended = transit.completing
        if self.state is not TxnState.ONGOING or self.completing is not None \
                or ended is None or self.pending_fence:
            return False
        next_epoch = (transit.producer_epoch == self.producer_epoch + 1
                      if transit.producer_id == self.producer_id
                      else transit.producer_epoch == 0)
        return (ended == self._ending(ended.commit) and next_epoch
                and transit.last_producer_id == self.producer_id
                and transit.last_producer_epoch == self.producer_epoch
                and transit.timeout_ms == self.timeout_ms and bool(transit.partitions)
                and transit.start_ms == transit.last_update_ms)

    def _refuse(self, transit: TxnTransit, why: str) -> NoReturn:
        raise IllegalTransitionError(
            f"{self.transactional_id!r}: cannot complete {transit} from {self.current()} "
            f"(pending {self.pending_state}): {why}")
