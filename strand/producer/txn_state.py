"""The transactional producer's state machine (Kafka's client-side TransactionManager
states, KIP-98), pure: no I/O, no threads of its own.

States and the moves between them, as Kafka's ``TransactionManager.State``::

    UNINITIALIZED  -> INITIALIZING                       init_transactions()
    INITIALIZING   -> READY                              InitProducerId answered
    READY          -> IN_TRANSACTION                     begin_transaction()
    IN_TRANSACTION -> COMMITTING_TRANSACTION             commit_transaction()
    IN_TRANSACTION -> PREPARED_TRANSACTION               prepare_transaction(): written,
                                                         left for another process to end
    IN_TRANSACTION / ABORTABLE_ERROR
                   -> ABORTING_TRANSACTION               abort_transaction()
    COMMITTING / ABORTING -> READY                       EndTxn answered
    ABORTING       -> INITIALIZING                       the abort needs an epoch bump
                                                         (KIP-360, through the coordinator)
    IN_TRANSACTION / COMMITTING / INITIALIZING / ABORTABLE_ERROR
                   -> ABORTABLE_ERROR                    a send or request of the
                                                         transaction failed
    any            -> FATAL_ERROR                        fenced: a newer instance exists

It also keeps which partitions the open transaction has (Kafka's new / pending /
added sets): a partition's records may be sent only once the coordinator has added
it (AddPartitionsToTxn), so that no write lands outside the transaction.

Thread-safe: user threads (the API calls, ``send()``) and the sender thread (answers,
failed batches) share one instance.
"""

from __future__ import annotations

import enum
import threading

from strand.errors import InvalidTxnStateError
from strand.producer.errors import TransactionAbortableError
from strand.producer.producer_batch import TopicPartition

__all__ = ["TRANSITIONS", "TxnState", "TxnStateMachine"]


class TxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    PREPARED_TRANSACTION = "PREPARED_TRANSACTION"
    FATAL_ERROR = "FATAL_ERROR"


S = TxnState
# target -> the states it may be entered from (Kafka's State.isTransitionValid).
TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    S.UNINITIALIZED: frozenset({S.UNINITIALIZED}),
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.COMMITTING_TRANSACTION,
                                  S.ABORTABLE_ERROR, S.INITIALIZING}),
    S.PREPARED_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.FATAL_ERROR: frozenset(TxnState),
}


class TxnStateMachine:
    """The state of one transactional producer; see the module docstring."""

    def __init__(self, transactional_id: str) -> None:
        self.transactional_id = transactional_id
        self._lock = threading.Lock()
        self._state = TxnState.UNINITIALIZED
        self._error: BaseException | None = None  # the abortable or fatal cause
        self._new: set[TopicPartition] = set()  # sent to, not yet asked for
        self._pending: set[TopicPartition] = set()  # AddPartitionsToTxn in flight
        self._added: set[TopicPartition] = set()  # in the coordinator's transaction
        # The partitions the last transaction had: the next one adds them at its
        # begin_transaction(), in one AddPartitionsToTxn, before its first send.
        self._previous: frozenset[TopicPartition] = frozenset()
        # Of those, the ones no send of this transaction has asked for yet.
        self._speculative: set[TopicPartition] = set()
        # The coordinator has an open transaction for us (a partition or the offsets
        # of a group were added): only then is an EndTxn due.
        self._started = False
        # READY, yet the next transaction is open already with these partitions: the
        # commit that ended the last one began it (EndTxn's next partitions), so
        # begin_transaction() finds them added. Since ``_opened_at`` (monotonic s).
        self._opened: frozenset[TopicPartition] = frozenset()
        self._opened_at = 0.0
        # That open transaction is being ended because no begin_transaction() came
        # (see Transactions.sender_turn): nothing is added until it is.
        self._closing = False

    def __repr__(self) -> str:
        return f"TxnStateMachine({self.transactional_id!r}, {self._state.name})"

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> TxnState:
        return self._state

    @property
    def error(self) -> BaseException | None:
        return self._error

    @property
    def fatal_error(self) -> BaseException | None:
        return self._error if self._state is TxnState.FATAL_ERROR else None

    @property
    def started(self) -> bool:
        return self._started

    def transition(self, target: TxnState, operation: str = "") -> None:
        """Move to ``target``, or raise: the fatal error in FATAL_ERROR, the abortable
        one in ABORTABLE_ERROR (unless aborting), else InvalidTxnStateError."""
        with self._lock:
            self._transition(target, operation)

    def _transition(self, target: TxnState, operation: str) -> None:
        source = self._state
        if source not in TRANSITIONS[target]:
            if source is TxnState.FATAL_ERROR:
                assert self._error is not None
                raise self._error
            if source is TxnState.ABORTABLE_ERROR and target is not S.ABORTING_TRANSACTION:
                raise self._abortable()
            what = operation or f"move to {target.name}"
            raise InvalidTxnStateError(
                f"transactional producer {self.transactional_id!r}: cannot {what} in state "
                f"{source.name}{_HINTS.get((source, target), '')}")
        self._state = target
        if target in (S.READY, S.INITIALIZING):
            self._error = None
        if target is S.READY:
            self._previous = frozenset(self._added) if source is S.COMMITTING_TRANSACTION \
                else frozenset()
            self._new.clear()
            self._pending.clear()
            self._added.clear()
            self._started = False
            self._opened = frozenset()
        elif target is S.IN_TRANSACTION and self._opened:
            self._added = set(self._opened)  # open since the last commit
            self._speculative = set(self._opened)  # until sent to
            self._opened = frozenset()
            self._started = True
        elif target is S.IN_TRANSACTION:
            # Producers mostly write the same partitions transaction after transaction:
            # adding them all at once saves the next transaction the AddPartitionsToTxn
            # round trips its first sends would each wait for (a partition added and
            # not written to costs only its marker).
            self._new |= self._previous
            self._speculative = set(self._previous)
        elif target is S.ABORTING_TRANSACTION:
            self._new.clear()  # never add a partition to a transaction being aborted

    # ------------------------------------------------- the next transaction, open

    def next_opened(self, partitions: frozenset[TopicPartition], now: float) -> None:
        """READY after a commit whose EndTxn also opened the next transaction with
        ``partitions``."""
        with self._lock:
            if self._state is S.READY:
                self._opened, self._opened_at = partitions, now
                self._previous = frozenset()

    @property
    def opened(self) -> frozenset[TopicPartition]:
        return self._opened

    def opened_idle_since(self) -> float | None:
        """When the open next transaction was opened, if begin_transaction() has not
        taken it yet (None: there is none)."""
        return self._opened_at if self._opened and self._state is S.READY else None

    def take_opened(self) -> frozenset[TopicPartition]:
        """The open next transaction is to be ended unused (READY only): from now
        until :meth:`opened_closed`, a transaction begun adds its partitions only
        after that end (its epoch comes from it)."""
        with self._lock:
            if self._state is not S.READY or not self._opened:
                return frozenset()
            taken, self._opened = self._opened, frozenset()
            self._previous = taken  # a transaction begun now adds them ahead
            self._closing = True
            return taken

    def opened_closed(self) -> None:
        with self._lock:
            self._closing = False

    def _abortable(self) -> TransactionAbortableError:
        return TransactionAbortableError(
            f"the transaction of {self.transactional_id!r} cannot commit: {self._error}; "
            "call abort_transaction() and start again", cause=self._error)

    def maybe_fail(self) -> None:
        """Raise the error that ends this producer (fatal) or its transaction."""
        with self._lock:
            error = self._failure()
        if error is not None:
            raise error

    def _failure(self) -> BaseException | None:
        if self._state is TxnState.FATAL_ERROR:
            return self._error
        if self._state is TxnState.ABORTABLE_ERROR:
            return self._abortable()
        return None

    def set_abortable(self, error: BaseException) -> None:
        """A send or request of the open transaction failed: it can only abort. Nothing
        changes while aborting (its own failures are expected) or outside a transaction."""
        with self._lock:
            if self._state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION):
                self._state = S.ABORTABLE_ERROR
                self._error = error

    def set_fatal(self, error: BaseException) -> None:
        """This instance is fenced (or misconfigured): every later call raises ``error``."""
        with self._lock:
            if self._state is not S.FATAL_ERROR:
                self._state = S.FATAL_ERROR
                self._error = error

    # ------------------------------------------------------------- partitions

    def require_transaction(self, operation: str) -> None:
        """Raise unless a transaction is open: the fatal or abortable error, else
        InvalidTxnStateError."""
        if self._state is not S.IN_TRANSACTION:  # every send() asks: no lock on the way in
            self._refuse_outside_transaction(operation)

    def _refuse_outside_transaction(self, operation: str) -> None:
        with self._lock:
            if self._state is S.IN_TRANSACTION:
                return  # begun meanwhile
            error = self._not_in_transaction(operation)
        raise error

    def _not_in_transaction(self, operation: str) -> BaseException:
        return self._failure() or InvalidTxnStateError(
            f"transactional producer {self.transactional_id!r}: cannot {operation} in "
            f"state {self._state.name}: "
            + ("call init_transactions() first" if self._state is S.UNINITIALIZED
               else "call begin_transaction() first" if self._state is S.READY
               else "the transaction is prepared: Admin.complete_transaction() ends it; "
               "close this producer" if self._state is S.PREPARED_TRANSACTION
               else "the transaction is ending"))

    def add_partition(self, tp: TopicPartition) -> None:
        """``send()`` to ``tp``: allowed in a transaction only; a partition the
        transaction does not have yet is queued for AddPartitionsToTxn."""
        if (self._state is S.IN_TRANSACTION and tp in self._added
                and tp not in self._speculative):
            return  # the usual case, once per record: nothing to change, no lock
        with self._lock:
            if self._state is S.IN_TRANSACTION:
                if tp not in self._added and tp not in self._pending:
                    self._new.add(tp)
                self._speculative.discard(tp)
                return
            error = self._not_in_transaction(f"send to {tp[0]}-{tp[1]}")
        raise error

    def is_send_allowed(self, tp: TopicPartition) -> bool:
        """Whether the coordinator has ``tp`` in the open transaction (and it may still
        commit)."""
        return tp in self._added and self._state in (S.IN_TRANSACTION,
                                                     S.COMMITTING_TRANSACTION)

    def take_new_partitions(self) -> set[TopicPartition]:
        """The partitions to add in one AddPartitionsToTxn (none while one is in flight,
        or when the transaction can no longer commit)."""
        with self._lock:
            if self._pending or not self._new or self._closing or self._state not in (
                    S.IN_TRANSACTION, S.COMMITTING_TRANSACTION):
                return set()
            taken, self._new = self._new, set()
            self._pending = set(taken)
            return taken

    def partitions_added(self, tps: set[TopicPartition]) -> None:
        with self._lock:
            self._pending -= tps
            self._added |= tps
            self._started = True

    def partitions_not_added(self, tps: set[TopicPartition]) -> None:
        """AddPartitionsToTxn failed retriably: ask again."""
        with self._lock:
            self._pending -= tps
            if self._state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION):
                self._new |= tps

    def speculative(self, tps: set[TopicPartition]) -> set[TopicPartition]:
        """Those of ``tps`` only added ahead (the last transaction had them) and not
        sent to yet."""
        with self._lock:
            return tps & self._speculative

    def drop_speculative(self, tps: set[TopicPartition]) -> set[TopicPartition]:
        """An add of ``tps`` failed: forget the ones only added ahead (a deleted topic
        must not fail a transaction that no longer writes to it) and ask again for
        the others. Returns those forgotten."""
        with self._lock:
            dropped = tps & self._speculative
            self._speculative -= dropped
            self._pending -= tps
            if self._state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION):
                self._new |= tps - dropped
            return dropped

    @property
    def adding(self) -> bool:
        """Partitions wait to be added, or an add is in flight."""
        return bool(self._new or self._pending
                    or (self._closing and self._state is not S.READY))

    def offsets_added(self) -> None:
        with self._lock:
            self._started = True

    def added_partitions(self) -> frozenset[TopicPartition]:
        with self._lock:
            return frozenset(self._added)

    def written_partitions(self) -> frozenset[TopicPartition]:
        """The partitions of the transaction that records were sent to."""
        with self._lock:
            return frozenset(self._added - self._speculative)


_HINTS: dict[tuple[TxnState, TxnState], str] = {
    (S.UNINITIALIZED, S.IN_TRANSACTION): ": call init_transactions() first",
    (S.READY, S.COMMITTING_TRANSACTION): ": no transaction is open (begin_transaction())",
    (S.READY, S.ABORTING_TRANSACTION): ": no transaction is open (begin_transaction())",
    (S.UNINITIALIZED, S.COMMITTING_TRANSACTION): ": call init_transactions() first",
    (S.UNINITIALIZED, S.ABORTING_TRANSACTION): ": call init_transactions() first",
    (S.IN_TRANSACTION, S.IN_TRANSACTION): ": a transaction is already open",
    (S.READY, S.INITIALIZING): ": init_transactions() was already called",
    (S.IN_TRANSACTION, S.INITIALIZING): ": init_transactions() was already called",
}
