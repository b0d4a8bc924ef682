"""The transactional producer (KIP-98): ``init_transactions()``,
``begin_transaction()``, ``send_offsets_to_transaction()``, ``commit_transaction()``
and ``abort_transaction()``, modelled on Kafka's client TransactionManager.

- ``TransactionalManager`` is the idempotent producer's sequencing
  (strand.producer.transaction_manager) plus the transaction: a partition's batches
  are drained only once the coordinator has it in the open transaction; a failed
  batch makes the transaction abortable; a fenced answer ends the producer. It never
  bumps its epoch itself, as Kafka's transactional producer: a sequence gap makes the
  transaction abortable, and the abort gets the next epoch from the coordinator.
  Every EndTxn does (an epoch per transaction, as KIP-890 part 2): its answer names
  the epoch the next transaction writes with, which can then begin while the
  coordinator still writes this one's markers. An abort with nothing to end asks
  InitProducerId with the producer id and epoch it has (KIP-360). A commit of a
  producer that commits in a loop also opens its next transaction with the same
  partitions in the same coordinator write (EndTxn's next partitions): the next
  transaction then needs no AddPartitionsToTxn, and its markers' leaders take its
  first writes without asking the coordinator (KIP-890 verification).
- ``Transactions`` runs the API calls: user threads wait for coroutines that run on
  the sender thread's event loop (strand.producer.txn_calls), and, each sender
  turn, AddPartitionsToTxn for every partition sent to since the last one (one call).

A call whose timeout passes raises RequestTimedOutError and stays pending: calling
it again waits for the same work (Kafka's rule); any other call meanwhile is an
InvalidTxnStateError.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Protocol

from strand.client.structs import OffsetAndMetadata, PreparedTransaction
from strand.errors import (
    InvalidGroupIdError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    RequestTimedOutError,
    StrandError,
)
from strand.producer.errors import ProducerClosedError, TransactionAbortableError
from strand.producer.producer_batch import ProducerBatch, TopicPartition
from strand.producer.transaction_manager import TransactionManager
from strand.producer.txn_calls import GroupMember, TxnCalls
from strand.producer.txn_state import TxnState, TxnStateMachine

__all__ = [
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "MAX_TRANSACTIONAL_ID_BYTES",
    "MAX_TRANSACTION_TIMEOUT_MS",
    "TransactionalManager",
    "Transactions",
    "validate_transactional",
]

log = logging.getLogger(__name__)

DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000  # Kafka's transaction.timeout.ms
MAX_TRANSACTION_TIMEOUT_MS = 900_000  # the coordinator's default transaction.max.timeout.ms
MAX_TRANSACTIONAL_ID_BYTES = (1 << 15) - 1  # an int16-length string in Kafka's protocol
_GRACE_S = 0.5  # past a call's deadline, for its coroutine's own (better) timeout error
_COMMITTABLE = (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION)
# How long an AddPartitionsToTxn holding partitions added ahead (the last transaction's)
# is retried before those are dropped and the others asked for alone.
_AHEAD_ADD_S = 5.0
# A commit opens the next transaction with its partitions (one coordinator write for
# the end and the next begin; see Transactions._end) when the application began the
# transaction after the last commit within this long: it commits in a loop. An open
# transaction that no begin_transaction() takes within it is ended, unused (an abort
# of nothing, without fencing), so that it neither shows as a long transaction nor
# times out into a fence. Capped by a quarter of transaction_timeout_ms.
_OPEN_NEXT_S = 5.0


def validate_transactional(transactional_id: object, timeout_ms: object) -> None:
    """ValueError for an empty or too long transactional id, or a transaction timeout
    outside 1..MAX_TRANSACTION_TIMEOUT_MS."""
    if not isinstance(transactional_id, str) or not transactional_id:
        raise ValueError(f"transactional_id must be a non-empty str, not {transactional_id!r}")
    size = len(transactional_id.encode())
    if size > MAX_TRANSACTIONAL_ID_BYTES:
        raise ValueError(f"transactional_id is {size} bytes long; at most "
                         f"{MAX_TRANSACTIONAL_ID_BYTES} are allowed")
    if type(timeout_ms) is not int or not 0 < timeout_ms <= MAX_TRANSACTION_TIMEOUT_MS:
        raise ValueError(
            f"transaction_timeout_ms must be an int in 1..{MAX_TRANSACTION_TIMEOUT_MS} "
            f"(the coordinator's transaction.max.timeout.ms), not {timeout_ms!r}")


class TransactionalManager(TransactionManager):
    """Sequencing (the base class) gated by the open transaction; see the module doc."""

    transactional = True

    def __init__(self, txn: TxnStateMachine) -> None:
        super().__init__()
        self.txn = txn

    def should_stop_drain(self, tp: TopicPartition, batch: ProducerBatch) -> bool:
        if not self.txn.is_send_allowed(tp):
            return True  # not (yet) in the coordinator's transaction, or aborting
        return super().should_stop_drain(tp, batch)

    def request_bump(self) -> None:
        super().request_bump()  # done at the abort, through the coordinator
        self.txn.set_abortable(OutOfOrderSequenceError(
            "a batch's sequence was refused: the transaction must abort, and the "
            "producer then takes the next epoch"))

    def batch_done(self, batch: ProducerBatch) -> None:
        super().batch_done(batch)
        if not batch.succeeded:
            self.txn.set_abortable(batch.error or StrandError(f"{batch!r} failed"))

    def set_fatal(self, error: BaseException) -> None:
        if isinstance(error, InvalidProducerEpochError):  # storage's word for "fenced"
            fenced = ProducerFencedError(f"{error}: a newer instance of transactional "
                                         f"id {self.txn.transactional_id!r} exists")
            fenced.__cause__ = error
            error = fenced
        super().set_fatal(error)
        self.txn.set_fatal(error)


class SenderHooks(Protocol):
    """What ``Transactions`` needs of the sender (strand.producer.sender.Sender)."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None: ...
    def wakeup(self) -> None: ...
    def fail_queued(self, error: StrandError) -> None: ...
    def gateway_stub(self) -> Any: ...


class Transactions:
    """The transactional API of one Producer; see the module docstring."""

    def __init__(self, tm: TransactionalManager, calls: TxnCalls, sender: SenderHooks,
                 flush: Callable[[float | None], None], max_block_ms: float,
                 delivery_timeout_ms: float,
                 transaction_timeout_ms: float = DEFAULT_TRANSACTION_TIMEOUT_MS) -> None:
        self.tm = tm
        self.txn = tm.txn
        self.calls = calls
        self.sender = sender
        self._flush = flush
        self.max_block_ms = max_block_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self._lock = threading.Lock()
        self._pending: tuple[str, concurrent.futures.Future[None]] | None = None
        self._add_task: asyncio.Task[None] | None = None
        self._close_task: asyncio.Task[None] | None = None
        self.open_next_s = min(_OPEN_NEXT_S, transaction_timeout_ms / 4000)
        # When the last commit returned, and whether the begin after it came soon: only
        # a producer seen committing in a loop has its next transaction opened (one that
        # commits once and closes would pay an abort of the opened one on close).
        self._committed_at: float | None = None
        self._loops = False

    # ------------------------------------------------------------ sender side

    def sender_turn(self) -> float:
        """On the sender thread, each turn: fail what an aborting transaction still
        has queued; add the new partitions. Returns ms until another look is due."""
        txn = self.txn
        if txn.state in (TxnState.ABORTABLE_ERROR, TxnState.ABORTING_TRANSACTION):
            cause = txn.error
            self.sender.fail_queued(TransactionAbortableError(
                f"the transaction of {txn.transactional_id!r} is aborting"
                + (f" after: {cause}" if cause is not None else ""), cause=cause))
        if self._add_task is None:
            new = txn.take_new_partitions()
            if new:
                self._add_task = asyncio.ensure_future(self._add_partitions(new))
        opened_at = txn.opened_idle_since()
        if opened_at is None or self._close_task is not None:
            return math.inf
        idle = time.monotonic() - opened_at
        if idle < self.open_next_s:
            return (self.open_next_s - idle) * 1000
        taken = txn.take_opened()
        if taken:
            self._close_task = asyncio.ensure_future(self._close_opened(taken))
        return math.inf

    async def _close_opened(self, partitions: frozenset[TopicPartition]) -> None:
        """End the next transaction that the last commit opened and no
        begin_transaction() took: an abort of nothing (no record was sent in it), under
        the epoch it has; the next one starts from the epoch this end names. If the end
        fails, the transaction stays open at the coordinator and the next
        begin_transaction() adds its partitions again (a no-op there)."""
        tm, txn = self.tm, self.txn
        deadline = time.monotonic() + self.delivery_timeout_ms / 1000
        try:
            self.calls.stub = self.sender.gateway_stub()
            producer_id, epoch, _ = await self.calls.end_txn(tm.producer_id, tm.epoch, False,
                                                             deadline)
            tm.set_producer_id(producer_id, epoch)
        except ProducerFencedError as exc:
            tm.set_fatal(exc)
        except StrandError as exc:
            log.info("transactional producer %r: the unused transaction opened with %s "
                     "could not be ended (%s); the next begin_transaction() takes it",
                     txn.transactional_id, sorted(partitions), exc)
        finally:
            txn.opened_closed()
            self._close_task = None
            self.sender.wakeup()

    async def _add_partitions(self, partitions: set[TopicPartition]) -> None:
        txn, tm = self.txn, self.tm
        ahead = txn.speculative(partitions)
        timeout_s = self.delivery_timeout_ms / 1000
        deadline = time.monotonic() + (min(timeout_s, _AHEAD_ADD_S) if ahead else timeout_s)
        try:
            self.calls.stub = self.sender.gateway_stub()
            await self.calls.add_partitions(tm.producer_id, tm.epoch, partitions, deadline,
                                            lambda: txn.state in _COMMITTABLE)
        except ProducerFencedError as exc:
            tm.set_fatal(exc)
        except StrandError as exc:
            dropped = txn.drop_speculative(partitions) if ahead else set()
            if dropped:
                log.info("transactional producer %r: the partitions %s, added ahead, could "
                         "not be added (%s); adding the others alone", txn.transactional_id,
                         sorted(dropped), exc)
                return
            log.warning("transactional producer %r: AddPartitionsToTxn %s failed: %s",
                        txn.transactional_id, sorted(partitions), exc)
            txn.set_abortable(exc)
            txn.partitions_not_added(partitions)
        else:
            txn.partitions_added(partitions)
        finally:
            self._add_task = None
            self.sender.wakeup()

    # ------------------------------------------------------------ user side

    def check_send(self) -> None:
        """``send()`` is allowed only inside a transaction (raises otherwise)."""
        self.txn.require_transaction("send")

    def before_send(self, tp: TopicPartition) -> None:
        """``send()`` to ``tp``: only inside a transaction (raises otherwise)."""
        self.txn.add_partition(tp)

    def init_transactions(self, timeout: float | None) -> None:
        deadline = self._deadline(timeout)

        def start() -> Coroutine[Any, Any, None]:
            if self.txn.state is not TxnState.INITIALIZING:  # else: resume a timed-out one
                self.txn.transition(TxnState.INITIALIZING, "init_transactions()")
            return self._init(deadline, None)

        self._run("init_transactions()", start, deadline)

    def begin_transaction(self) -> None:
        with self._lock:
            self._refuse_if_pending("begin_transaction()")
            self.txn.transition(TxnState.IN_TRANSACTION, "begin_transaction()")
            if self._committed_at is not None:
                self._loops = time.monotonic() - self._committed_at <= self.open_next_s
        if self.txn.adding:  # the last transaction's partitions: added at once
            self.sender.wakeup()

    def send_offsets_to_transaction(
            self, offsets: Mapping[Any, OffsetAndMetadata | int], group_metadata: GroupMember,
            timeout: float | None) -> None:
        wanted = _offsets(offsets)
        group_id = getattr(group_metadata, "group_id", None)
        if not isinstance(group_id, str) or not group_id:
            raise InvalidGroupIdError(
                f"send_offsets_to_transaction needs the consumer's group_metadata() (a "
                f"group id), not {group_metadata!r}")
        deadline = self._deadline(timeout)

        def start() -> Coroutine[Any, Any, None]:
            self.txn.require_transaction("send offsets")
            return self._send_offsets(group_metadata, wanted, deadline)

        self._run("send_offsets_to_transaction()", start, deadline)

    def commit_transaction(self, timeout: float | None) -> None:
        deadline = self._deadline(timeout)

        def start() -> Coroutine[Any, Any, None]:
            if self.txn.state is not TxnState.COMMITTING_TRANSACTION:  # else: resume
                self.txn.transition(TxnState.COMMITTING_TRANSACTION, "commit_transaction()")
            self._flush_until(deadline)
            self.txn.maybe_fail()  # a send of the transaction failed: abortable
            return self._end(True, deadline)

        self._run("commit_transaction()", start, deadline)
        self._committed_at = time.monotonic()

    def abort_transaction(self, timeout: float | None) -> None:
        deadline = self._deadline(timeout)

        def start() -> Coroutine[Any, Any, None]:
            if self.txn.state not in (TxnState.ABORTING_TRANSACTION, TxnState.INITIALIZING):
                self.txn.transition(TxnState.ABORTING_TRANSACTION, "abort_transaction()")
            elif self.txn.state is TxnState.INITIALIZING and not self._bumping:
                raise InvalidTxnStateError(
                    f"transactional producer {self.txn.transactional_id!r}: no transaction "
                    "to abort: init_transactions() has not completed")
            # The sender fails the queued batches now (sender_turn); then wait for
            # those in flight: their outcome must be known before the abort.
            self.sender.wakeup()
            self._flush_until(deadline)
            return self._end(False, deadline)

        self._run("abort_transaction()", start, deadline)

    def prepare_transaction(self, timeout: float | None) -> PreparedTransaction | None:
        """Flush, wait for every partition to be added, then leave the transaction
        open for another process to end (PREPARED_TRANSACTION: nothing more can be
        sent, and ``close()`` does not abort it). None when the transaction holds
        nothing (no record was sent): there is nothing to end."""
        deadline = self._deadline(timeout)
        with self._lock:
            self._refuse_if_pending("prepare_transaction()")
        self.txn.require_transaction("prepare_transaction()")
        self._flush_until(deadline)
        while self.txn.adding and time.monotonic() < deadline:
            time.sleep(0.005)  # a speculative add still in flight
        if self.txn.adding:
            raise RequestTimedOutError(
                f"prepare_transaction() for {self.txn.transactional_id!r}: partitions are "
                "still being added to the transaction: call it again to keep waiting")
        self.txn.maybe_fail()  # a send of the transaction failed: abortable
        self.txn.transition(TxnState.PREPARED_TRANSACTION, "prepare_transaction()")
        if not self.txn.started:
            return None
        return PreparedTransaction(self.txn.transactional_id, self.tm.producer_id,
                                   self.tm.epoch)

    def end_on_close(self, timeout: float | None) -> None:
        """``close()`` inside a transaction aborts it, as Kafka's client does ("aborting
        incomplete transaction due to shutdown"): its records are then never visible,
        and read_committed readers of its partitions do not wait
        ``transaction_timeout_ms`` for the coordinator to abort it. Unlike Kafka's, the
        records still queued are not sent first: they fail, as with
        ``abort_transaction()``. A commit or abort already under way (a call that timed
        out) is waited for instead. Raises what the abort or the wait raises."""
        state = self.txn.state
        taken = self.txn.take_opened() if state is TxnState.READY else frozenset()
        if taken:  # (one already being ended by the sender ends on its own)
            self._run("close()", lambda: self._close_opened(taken), self._deadline(timeout))
        elif state in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR):
            log.info("transactional producer %r: aborting the open transaction on close",
                     self.txn.transactional_id)
            self.abort_transaction(timeout)
        elif self._pending is not None and not self._pending[1].done():
            operation = self._pending[0]
            if operation == "commit_transaction()":
                self.commit_transaction(timeout)
            elif operation == "abort_transaction()":
                self.abort_transaction(timeout)

    _bumping = False  # INITIALIZING for an abort's epoch bump, not init_transactions()

    # ------------------------------------------------------------ coroutines

    async def _init(self, deadline: float, current: tuple[int, int] | None) -> None:
        self.calls.stub = self.sender.gateway_stub()
        try:
            producer_id, epoch = await self.calls.init_producer_id(deadline, current)
        except RequestTimedOutError:
            raise  # stays INITIALIZING: the call may be repeated
        except StrandError as exc:
            self.tm.set_fatal(exc)  # fenced, or refused (e.g. its timeout): unusable
            raise
        self.tm.set_producer_id(producer_id, epoch)
        self._bumping = False
        self.txn.transition(TxnState.READY)
        log.info("transactional producer %r: producer id %d, epoch %d",
                 self.txn.transactional_id, producer_id, epoch)

    async def _send_offsets(self, member: GroupMember,
                            offsets: dict[TopicPartition, tuple[int, str]],
                            deadline: float) -> None:
        tm, txn = self.tm, self.txn
        self.calls.stub = self.sender.gateway_stub()
        try:
            try:
                await self.calls.add_offsets(tm.producer_id, tm.epoch, member.group_id,
                                             deadline)
            except (InvalidGroupIdError, InvalidRequestError):
                raise  # refused as asked: nothing changed, the transaction goes on
            txn.offsets_added()
            await self.calls.txn_offset_commit(tm.producer_id, tm.epoch, member, offsets,
                                               deadline)
        except (ProducerFencedError, InvalidProducerEpochError) as exc:
            tm.set_fatal(exc)
            raise
        except (RequestTimedOutError, InvalidGroupIdError, InvalidRequestError):
            raise
        except StrandError as exc:
            # A member of an older generation (a zombie consumer), an unknown member, ...:
            # these offsets cannot commit with the records (Kafka's CommitFailedException).
            txn.set_abortable(exc)
            raise TransactionAbortableError(
                f"the offsets of group {member.group_id!r} could not be added to the "
                f"transaction of {txn.transactional_id!r}: {exc}; call "
                "abort_transaction()", cause=exc) from exc

    async def _end(self, commit: bool, deadline: float) -> None:
        tm, txn = self.tm, self.txn
        self.calls.stub = self.sender.gateway_stub()
        if txn.state is TxnState.INITIALIZING:  # a timed-out abort's epoch bump, resumed
            await self._init(deadline, (tm.producer_id, tm.epoch))
            return
        while txn.adding and time.monotonic() < deadline:
            await asyncio.sleep(0.005)  # an add in flight or due comes before the end
        # An unknown producer id mapping refuses EndTxn too: go straight to the bump.
        skip = not txn.started or isinstance(txn.error, InvalidProducerIdMappingError)
        # A producer committing in a loop: its next transaction begins in this end.
        opens = txn.written_partitions() if commit and self._loops else frozenset()
        opened = False
        try:
            if not skip:
                # The answer names the next transaction's epoch: its batches restart at
                # sequence 0 (a batch left unresolved by an abort keeps its numbers
                # until resolved, as after InitProducerId).
                producer_id, epoch, opened = await self.calls.end_txn(
                    tm.producer_id, tm.epoch, commit, deadline, opens)
                tm.set_producer_id(producer_id, epoch)
        except RequestTimedOutError:
            raise  # the call may be repeated
        except ProducerFencedError as exc:
            tm.set_fatal(exc)
            raise
        except StrandError as exc:
            if not commit:
                tm.set_fatal(exc)  # an abort the coordinator refuses: nothing safe is left
                raise
            txn.set_abortable(exc)
            raise TransactionAbortableError(
                f"the commit of {txn.transactional_id!r} was refused: {exc}; call "
                "abort_transaction()", cause=exc) from exc
        if not commit and (tm.bump_needed or isinstance(txn.error,
                                                        InvalidProducerIdMappingError)):
            # No EndTxn was sent (nothing was added), yet a batch's outcome or sequence
            # is unknown: continue under the next epoch, from the coordinator (KIP-360),
            # never a local bump.
            self._bumping = True
            txn.transition(TxnState.INITIALIZING)
            await self._init(deadline, (tm.producer_id, tm.epoch))
            return
        txn.transition(TxnState.READY)
        if opened:
            txn.next_opened(opens, time.monotonic())
            self.sender.wakeup()  # its idle timer starts

    # --------------------------------------------------------------- helpers

    def _deadline(self, timeout: float | None) -> float:
        if timeout is None:
            timeout = self.max_block_ms / 1000  # Kafka bounds these calls by max.block.ms
        if timeout < 0:
            raise ValueError(f"timeout must be >= 0 seconds, not {timeout}")
        return time.monotonic() + timeout

    def _flush_until(self, deadline: float) -> None:
        self._flush(max(0.0, deadline - time.monotonic()))

    def _refuse_if_pending(self, operation: str) -> None:
        if self._pending is not None and not self._pending[1].done():
            self.txn.maybe_fail()
            earlier = self._pending[0]
            raise InvalidTxnStateError(
                f"transactional producer {self.txn.transactional_id!r}: cannot "
                f"{operation} while {earlier} is still pending (it timed out): call "
                f"{earlier} again to wait for it")

    def _run(self, operation: str, start: Callable[[], Coroutine[Any, Any, None]],
             deadline: float) -> None:
        """Start ``operation`` (or wait again for its pending run) until ``deadline``."""
        with self._lock:
            pending = self._pending
            if pending is not None and pending[1].done():
                pending = self._pending = None
            if pending is not None and pending[0] != operation:
                self._refuse_if_pending(operation)
            if pending is None:
                coroutine = start()
                loop = self.sender.loop
                if loop is None or loop.is_closed():
                    coroutine.close()
                    raise ProducerClosedError(f"the producer is closed: cannot {operation}")
                future = asyncio.run_coroutine_threadsafe(coroutine, loop)
                self._pending = pending = (operation, future)
        future = pending[1]
        try:
            future.result(max(0.0, deadline - time.monotonic()) + _GRACE_S)
        except concurrent.futures.TimeoutError:
            raise RequestTimedOutError(
                f"{operation} for transactional id {self.txn.transactional_id!r} did not "
                f"complete in time: call it again to keep waiting") from None
        except concurrent.futures.CancelledError:
            raise ProducerClosedError(
                f"the producer was closed during {operation}") from None
        finally:
            with self._lock:
                if self._pending is pending and future.done():
                    self._pending = None


def _offsets(offsets: Mapping[Any, OffsetAndMetadata | int]
             ) -> dict[TopicPartition, tuple[int, str]]:
    if not isinstance(offsets, Mapping):
        raise TypeError(f"offsets must be a mapping of TopicPartition to OffsetAndMetadata "
                        f"or int, not {type(offsets).__name__}")
    out: dict[TopicPartition, tuple[int, str]] = {}
    for tp, value in offsets.items():
        if (not isinstance(tp, tuple) or len(tp) != 2 or not isinstance(tp[0], str)
                or type(tp[1]) is not int):
            raise TypeError(f"offsets keys must be TopicPartition(topic, partition), not {tp!r}")
        offset, metadata = (value, "") if type(value) is int else (
            (value.offset, value.metadata) if isinstance(value, OffsetAndMetadata)
            else (None, ""))
        if type(offset) is not int or offset < 0:
            raise ValueError(f"the offset for {tp[0]}-{tp[1]} must be an int >= 0 (the next "
                             f"offset to read), not {value!r}")
        out[(tp[0], tp[1])] = (offset, metadata)
    if not out:
        raise ValueError("send_offsets_to_transaction needs at least one offset")
    return out
