"""The transaction coordinator of one shard: the transactional ids that hash to it
and partition ``shard`` of ``__transaction_state`` that holds their state.

The decisions are the pure ones of :mod:`services.transactions.txn_requests` over
:class:`~services.transactions.txn_store.TransactionStore`; this module adds time,
durability and the markers:

* every transition is written to the shard's partition with acks=all *before* it
  is applied (``prepare`` → write → ``complete_transition``; a failed write
  forgets the pending change), so memory never runs ahead of the log;
* EndTxn answers once PrepareCommit / PrepareAbort is written (the outcome is then
  decided, as in Kafka), with the id's next epoch; a task per transaction writes
  the markers through the :class:`~services.transactions.markers.MarkerWriter`,
  retrying until they are on every partition, then writes Complete* (or, if the
  next transaction began meanwhile, its Ongoing without the Completion: see
  txn_metadata's epoch per transaction);
* ``load()`` rebuilds the shard when this instance takes it over, and ``start()``
  finishes every transaction found in Prepare*;
* one timer task aborts transactions open past ``transaction.timeout.ms`` (with an
  epoch bump: the producer is fenced) and removes ids unused for
  ``transactional.id.expiration.ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterable

from services.transactions.markers import MarkerWriter
from services.transactions.txn_metadata import (
    Completion,
    TopicPartition,
    TransactionMetadata,
    TxnTransit,
    epoch_exhausted,
)
from services.transactions.txn_records import record
from services.transactions.txn_requests import (
    DEFAULT_MAX_TIMEOUT_MS,
    ProducerIdAndEpoch,
    abort_timed_out,
    add_partitions,
    complete_txn,
    end_txn,
    init_producer_id,
    offsets_partition,
    validate_timeout,
    validate_transactional_id,
    verify_partitions,
)
from services.transactions.txn_state import TxnState
from services.transactions.txn_store import (
    DEFAULT_ID_EXPIRATION_MS,
    TransactionDescription,
    TransactionListing,
    TransactionStore,
)
from strand.coordination.shard_log import ShardLog
from strand.coordination.shards import GROUP_TOPIC, TRANSACTION_TOPIC
from strand.coordination.txn_verifier import OpenedNext
from strand.errors import (
    ConcurrentTransactionsError,
    CoordinatorNotAvailableError,
    ErrorCode,
    InvalidGroupIdError,
    NotCoordinatorError,
    StrandError,
)
from strand.service.aio import wait_event

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_ABORT_INTERVAL_MS", "DEFAULT_EXPIRATION_INTERVAL_MS", "TxnShardCoordinator",
           "wall_ms"]

# Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms and
# transactional.id.expiration.check.interval.ms (transaction.remove.expired...).
DEFAULT_ABORT_INTERVAL_MS = 10_000
DEFAULT_EXPIRATION_INTERVAL_MS = 3_600_000
MARKER_RETRY_S = 0.5
# How long AddOffsetsToTxn / InitProducerId / EndTxn (and AddPartitionsToTxn after a
# fence) wait for the id's previous transaction to complete before answering
# CONCURRENT_TRANSACTIONS.
COMPLETION_WAIT_S = 2.0
# How long a Complete* record waits for the record of a request that was waiting for
# it (they then share one write).
COMPLETION_HOLD_S = 0.005
PENDING_POLL_S = 0.002  # a completion waiting for another change's write to land


def _opened_next(metadata: TransactionMetadata, ended: Completion) -> OpenedNext | None:
    """The producer's next transaction when it is already open (written) under the
    same producer id: the markers of ``ended`` tell its partitions' leaders so."""
    if (metadata.state is TxnState.ONGOING and metadata.producer_id == ended.producer_id
            and metadata.producer_epoch == ended.producer_epoch + 1):
        return OpenedNext(metadata.producer_epoch, metadata.partitions)
    return None


def wall_ms() -> int:
    """Transactions' times are wall-clock (they are written and read back by another
    instance, and DescribeTransactions shows them)."""
    return time.time_ns() // 1_000_000


class TxnShardCoordinator:
    def __init__(self, shard: int, log_: ShardLog, markers: MarkerWriter,
                 new_producer_id: Callable[[], Awaitable[int]],
                 offsets_shards: Callable[[], int | None], *, coordinator_epoch: int,
                 max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS,
                 abort_interval_ms: int = DEFAULT_ABORT_INTERVAL_MS,
                 id_expiration_ms: int = DEFAULT_ID_EXPIRATION_MS,
                 expiration_interval_ms: int = DEFAULT_EXPIRATION_INTERVAL_MS,
                 marker_retry_s: float = MARKER_RETRY_S,
                 clock: Callable[[], int] = wall_ms) -> None:
        self.shard = shard
        self.log = log_
        self.markers = markers
        self.new_producer_id = new_producer_id
        self.offsets_shards = offsets_shards
        # Which take-over of the shard this is: in every marker, so a partition can
        # refuse the markers of an owner that has been replaced.
        self.coordinator_epoch = coordinator_epoch
        self.max_timeout_ms = max_timeout_ms
        self.abort_interval_ms = abort_interval_ms
        self.id_expiration_ms = id_expiration_ms
        self.expiration_interval_ms = expiration_interval_ms
        self.marker_retry_s = marker_retry_s
        self.clock = clock
        self.store = TransactionStore()
        self._stopping = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._started = False
        # Transactional ids whose markers are being written: set once Complete*.
        self._completions: dict[str, asyncio.Event] = {}
        # Transactional ids with a request waiting for that completion.
        self._waiting: dict[str, int] = {}

    # -- lifecycle ----------------------------------------------------------------------------

    async def load(self) -> None:
        """Rebuild the shard from its partition (raises if a record is unreadable:
        the caller retries rather than serve an older state of some id)."""
        completing = self.store.load(await self.log.read_all())
        log.info("transaction shard loaded", extra={
            "shard": self.shard, "ids": len(self.store),
            "completing": [m.transactional_id for m in completing]})

    def start(self) -> None:
        """Serve: finish what the previous owner left in Prepare*, run the timers."""
        self._started = True
        for metadata in self.store.completing():
            self._finish(metadata)
        self._spawn(self._timers(), f"txn-shard-{self.shard}-timers")

    async def stop(self) -> None:
        """Stop serving (the shard moved away): markers and timers stop; whatever is
        Prepare* is finished by the next owner."""
        self._stopping.set()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _spawn(self, work: Awaitable[None], name: str) -> None:
        task = asyncio.ensure_future(work)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- writing transitions ------------------------------------------------------------------

    async def _write(self, metadata: TransactionMetadata, transit: TxnTransit) -> None:
        """Write ``transit`` (pending on ``metadata``) with acks=all, then apply it.
        Shielded: a caller that goes away (a client's deadline cancels its call) must
        not leave the transition pending for ever; it is applied or dropped."""
        await asyncio.shield(self._write_and_apply(metadata, transit))

    async def _write_and_apply(self, metadata: TransactionMetadata,
                               transit: TxnTransit) -> None:
        try:
            if self._stopping.is_set():
                raise NotCoordinatorError(
                    f"shard {self.shard} of {TRANSACTION_TOPIC} moved to another instance")
            await self.log.append([record(metadata.transactional_id, transit)])
        except Exception as exc:
            self.store.abort_pending(metadata)
            if isinstance(exc, NotCoordinatorError):
                raise
            raise CoordinatorNotAvailableError(
                f"could not write {transit.state.kafka_name} of transactional id "
                f"{metadata.transactional_id!r} to {TRANSACTION_TOPIC}-{self.shard} "
                f"({exc}); nothing changed, retry") from exc
        metadata.complete_transition(transit)

    async def _end(self, metadata: TransactionMetadata, transit: TxnTransit | None) -> None:
        """Write a Prepare* transit (or nothing), then finish it in the background.
        Shielded as one: a caller going away once Prepare* is written must not keep
        its markers from being written (the id would stay in Prepare* with nothing
        completing it, every later call answered "still being written")."""
        if transit is None:
            return
        await asyncio.shield(self._write_then_finish(metadata, transit))

    async def _write_then_finish(self, metadata: TransactionMetadata,
                                 transit: TxnTransit) -> None:
        await self._write_and_apply(metadata, transit)
        self._finish(metadata)

    async def _fence(self, metadata: TransactionMetadata, fence: TxnTransit) -> None:
        """``fence`` is the pending PrepareEpochFence of ``metadata``: abort its open
        transaction under the bumped epoch."""
        try:
            abort = end_txn(metadata, metadata.transactional_id, fence.producer_id,
                            fence.producer_epoch, commit=False, now_ms=self.clock(),
                            from_client=False)
        except StrandError:
            self.store.abort_pending(metadata)
            raise
        await self._end(metadata, abort)

    def _finish(self, metadata: TransactionMetadata) -> None:
        if self._started and not self._stopping.is_set():
            done = self._completions.setdefault(metadata.transactional_id, asyncio.Event())
            done.clear()
            self._spawn(self._completing(metadata, done),
                        f"txn-complete-{metadata.transactional_id[:40]}")

    async def _completing(self, metadata: TransactionMetadata, done: asyncio.Event) -> None:
        try:
            await self._complete(metadata)
        finally:
            done.set()
            if self._completions.get(metadata.transactional_id) is done:
                del self._completions[metadata.transactional_id]

    async def _previous_completed(self, transactional_id: str) -> None:
        """Wait a little for the id's previous transaction to complete. Kafka answers
        CONCURRENT_TRANSACTIONS at once and the client polls; waiting here saves the
        client its backoff and a round trip per poll (a producer committing often
        would otherwise spend most of its time between transactions polling)."""
        done = self._completions.get(transactional_id)
        if done is not None:
            self._waiting[transactional_id] = self._waiting.get(transactional_id, 0) + 1
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), COMPLETION_WAIT_S)
            finally:
                left = self._waiting.pop(transactional_id) - 1
                if left:
                    self._waiting[transactional_id] = left

    async def _complete(self, metadata: TransactionMetadata) -> None:
        """Markers on every partition, then Complete* (or the next transaction's Ongoing
        without the Completion); retried until done or stopped."""
        ended = metadata.completion_due()
        if ended is None:
            return
        partitions = sorted(ended.partitions)
        opened = _opened_next(metadata, ended)
        while True:
            try:
                await self.markers.write_markers(ended.producer_id, ended.producer_epoch,
                                                 self.coordinator_epoch, ended.commit,
                                                 partitions, opened)
                break
            except Exception as exc:
                log.warning("could not write transaction markers; retrying", extra={
                    "transactional_id": metadata.transactional_id, "error": str(exc)})
                if await wait_event(self._stopping, self.marker_retry_s):
                    return
        while True:
            if metadata.pending:  # the next transaction's AddPartitions is being written
                if await wait_event(self._stopping, PENDING_POLL_S):
                    return
                continue
            try:
                transit = complete_txn(metadata, ended, self.clock())
            except StrandError as exc:
                # The id moved on (it cannot while its markers are due): nothing to do.
                log.error("cannot complete a transaction", extra={
                    "transactional_id": metadata.transactional_id, "error": str(exc)})
                return
            if transit.state is TxnState.ONGOING:
                # The next transaction is open: its next record (its end, at the latest)
                # carries the id's whole state without the Completion, so this one is
                # not written. A new owner loading the Completion before then writes its
                # markers again, which changes nothing (an older epoch's marker is
                # answered and not written where the next transaction wrote).
                metadata.complete_transition(transit)
                return
            if await self._write_behind(metadata, transit):
                return
            if await wait_event(self._stopping, self.marker_retry_s):
                return

    async def _write_behind(self, metadata: TransactionMetadata, transit: TxnTransit) -> bool:
        """Apply a Complete* transit as soon as its record is queued in the shard log,
        ahead of any later record of the id, instead of once it is written: the next
        transaction need not wait for that write. The log stays consistent: every
        later record of the id carries its whole state and supersedes the Prepare*
        one, and while none does, a new owner that loads the Prepare* record writes
        the markers again (a repeated marker changes nothing) and completes it.
        False if the record was not queued (retry); a write failing after the
        transition only leaves the log at Prepare*, as above."""
        if self._stopping.is_set():
            self.store.abort_pending(metadata)
            return False
        # A request waiting for this completion writes its own record right after:
        # held for it, both go out in one write instead of one after the other.
        hold_s = COMPLETION_HOLD_S if self._waiting.get(metadata.transactional_id) else 0.0
        writing = asyncio.ensure_future(
            self.log.append([record(metadata.transactional_id, transit)], hold_s=hold_s))
        await asyncio.sleep(0)  # the append queues the record before its first wait
        if writing.done() and (writing.cancelled() or writing.exception() is not None):
            self.store.abort_pending(metadata)
            log.warning("could not write the transaction's completion; retrying", extra={
                "transactional_id": metadata.transactional_id,
                "error": "cancelled" if writing.cancelled() else str(writing.exception())})
            return False
        metadata.complete_transition(transit)
        done = self._completions.get(metadata.transactional_id)
        if done is not None:
            done.set()  # the next transaction may begin: its records queue behind this one
        try:
            await writing
        except Exception as exc:
            log.warning("the transaction's completion record was not written; the log "
                        "keeps its Prepare* record until the id's next one", extra={
                            "transactional_id": metadata.transactional_id, "error": str(exc)})
        return True

    # -- the API ------------------------------------------------------------------------------

    async def _spare_producer_id(self, transactional_id: str,
                                 needed: bool) -> Callable[[], int]:
        """Only an exhausted epoch needs a new producer id: fetched (when ``needed``)
        before the synchronous decision, which calls the returned function for it
        (CONCURRENT_TRANSACTIONS if the id changed meanwhile and none was fetched)."""
        spare = await self.new_producer_id() if needed else None

        def rotated() -> int:
            if spare is None:
                raise ConcurrentTransactionsError(
                    f"transactional id {transactional_id!r} changed meanwhile; retry")
            return spare

        return rotated

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: ProducerIdAndEpoch | None) -> ProducerIdAndEpoch:
        validate_transactional_id(transactional_id)
        validate_timeout(timeout_ms, self.max_timeout_ms)
        await self._previous_completed(transactional_id)
        metadata = self.store.get(transactional_id)
        if metadata is None:
            producer_id = await self.new_producer_id()
            metadata = self.store.put_if_absent(TransactionMetadata(
                transactional_id, producer_id, timeout_ms, self.clock()))
        rotated = await self._spare_producer_id(transactional_id, metadata.epoch_exhausted)
        transit = init_producer_id(metadata, timeout_ms, expected, self.clock(), rotated,
                                   self.max_timeout_ms)
        if transit.state is TxnState.PREPARE_EPOCH_FENCE:
            await self._fence(metadata, transit)
            raise ConcurrentTransactionsError(
                f"transactional id {transactional_id!r} had a transaction open under epoch "
                f"{transit.producer_epoch - 1}: it is being aborted and that producer "
                "fenced; retry")
        await self._write(metadata, transit)
        return ProducerIdAndEpoch(metadata.producer_id, metadata.producer_epoch)

    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             partitions: Iterable[TopicPartition],
                             offsets: bool = False) -> None:
        metadata = self.store.get(transactional_id)
        if offsets or metadata is None or metadata.completing is None or (
                metadata.producer_id, metadata.producer_epoch) != (producer_id, epoch):
            # The next epoch's first partitions go in at once, while the markers of the
            # previous transaction are written; anything else waits for them first.
            await self._previous_completed(transactional_id)
            metadata = self.store.get(transactional_id)
        transit = add_partitions(metadata, transactional_id, producer_id, epoch, partitions,
                                 self.clock(), offsets)
        if transit is not None:
            assert metadata is not None
            await self._write(metadata, transit)

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: Collection[TopicPartition]
                          ) -> dict[TopicPartition, ErrorCode]:
        return verify_partitions(self.store.get(transactional_id), transactional_id,
                                 producer_id, epoch, partitions)

    async def add_offsets(self, transactional_id: str, producer_id: int, epoch: int,
                          group_id: str) -> None:
        if not group_id:
            raise InvalidGroupIdError(
                f"{transactional_id!r}: the group id of the offsets must not be empty")
        shards = self.offsets_shards()
        if shards is None:
            raise CoordinatorNotAvailableError(
                f"{GROUP_TOPIC} does not exist yet (no group coordinator has run); retry")
        # The offsets wait for the previous transaction's completion (txn_requests'
        # add_partitions says why): CONCURRENT_TRANSACTIONS past the wait.
        await self.add_partitions(transactional_id, producer_id, epoch,
                                  [offsets_partition(group_id, shards)], offsets=True)

    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int,
                      commit: bool, opens: Collection[TopicPartition] = (),
                      keep_epoch: bool = False) -> ProducerIdAndEpoch:
        """Returns the producer id and epoch of the id's next transaction, and whether
        it is open already (``opens``: its partitions, see txn_requests.end_txn)."""
        metadata = self.store.get(transactional_id)
        if metadata is not None and metadata.completing is not None:
            await self._previous_completed(transactional_id)  # one completion at a time
            metadata = self.store.get(transactional_id)
        rotated = await self._spare_producer_id(
            transactional_id, not keep_epoch and metadata is not None
            and epoch_exhausted(metadata.producer_epoch + 1))
        transit = end_txn(metadata, transactional_id, producer_id, epoch, commit, self.clock(),
                          new_producer_id=rotated, opens=opens, keep_epoch=keep_epoch)
        assert metadata is not None
        if transit is not None:
            await self._end(metadata, transit)
        return ProducerIdAndEpoch(metadata.producer_id, metadata.producer_epoch,
                                  bool(opens) and metadata.state is TxnState.ONGOING)

    def list_transactions(self, states: Collection[str], producer_ids: Collection[int],
                          min_duration_ms: int) -> TransactionListing:
        return self.store.list_transactions(states, producer_ids, min_duration_ms,
                                            self.clock())

    def describe(self, transactional_id: str) -> TransactionDescription:
        return self.store.describe(transactional_id)

    # -- timers -------------------------------------------------------------------------------

    async def _timers(self) -> None:
        expire_due = self.clock() + self.expiration_interval_ms
        while True:
            wait_ms = min(self.abort_interval_ms, max(expire_due - self.clock(), 0))
            if await wait_event(self._stopping, wait_ms / 1000):
                return
            try:
                await self.abort_timed_out()
                if self.clock() >= expire_due:
                    expire_due = self.clock() + self.expiration_interval_ms
                    await self.expire_ids()
            except Exception:
                log.exception("transaction timers failed", extra={"shard": self.shard})

    async def abort_timed_out(self) -> None:
        """Abort, under a bumped epoch, every transaction open past its timeout."""
        for found in self.store.timed_out(self.clock()):
            metadata = self.store.get(found.transactional_id)
            if metadata is None:
                continue
            fence = abort_timed_out(metadata, found.producer_id)
            if fence is None:
                continue
            log.info("aborting a timed-out transaction", extra={
                "transactional_id": found.transactional_id, "producer_id": found.producer_id,
                "epoch": found.producer_epoch})
            try:
                await self._fence(metadata, fence)
            except StrandError as exc:
                log.warning("could not abort a timed-out transaction; next round", extra={
                    "transactional_id": found.transactional_id, "error": str(exc)})

    async def expire_ids(self) -> None:
        """Remove the ids unused for ``transactional.id.expiration.ms``: tombstones."""
        for expiring in self.store.expire(self.clock(), self.id_expiration_ms):
            metadata = self.store.get(expiring.transactional_id)
            try:
                await self.log.append([expiring.tombstone])
            except Exception as exc:
                if metadata is not None:
                    self.store.abort_pending(metadata)
                log.warning("could not expire a transactional id; next round", extra={
                    "transactional_id": expiring.transactional_id, "error": str(exc)})
                continue
            self.store.remove(expiring.transactional_id, expiring.transit)
