"""The produce path: validate each partition's batches, append them as leader, answer.

Per partition: the node must lead it; the batches are validated by
``PartitionLog.append_as_leader`` (framing, magic, CRC, size against
``max.message.bytes``, offset deltas), stamped with the leader epoch of the
partition record and appended in a disk thread. A bad batch fails its partition
with a typed error and nothing of that partition's request is written; other
partitions of the request are unaffected. Appends to one partition are serialized
in arrival order; different partitions are appended in parallel. A producer's retry
of batches the partition already has (idempotence: ``strand.log.producer_state``) is
answered with the offsets they were first written at, and writes nothing.

acks (docs/architecture.md §3): with 0 and 1 the answer follows the leader's own append (with
acks=0 Kafka sends no answer at all; a gRPC call always has one, and such clients
simply do not wait for it). With -1 (all) the append is refused with
NOT_ENOUGH_REPLICAS when the ISR is smaller than ``min.insync.replicas``; otherwise
it is parked until the high watermark covers it (every ISR member has it), then
answered — with NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below the
minimum meanwhile, NOT_LEADER_OR_FOLLOWER if leadership moved, REQUEST_TIMED_OUT
after ``timeout_ms``. Parked appends wait on a future, never in a polling loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry import trace

from services.storage.append_traces import current_trace_context
from services.storage.broker_metrics import BrokerMetrics
from services.storage.disk import DiskExecutor
from services.storage.errors import (
    InvalidRequiredAcksError,
    NotLeaderOrFollowerError,
    fail_partition,
    wire_code,
)
from services.storage.replica import Replica, VerificationGuard
from services.storage.replica_manager import ReplicaManager
from services.storage.txn_verification import (
    TxnWriter,
    require_transactional_id,
    transactional_writer,
)
from strand.coordination.txn_verifier import TxnVerifier
from strand.errors import (
    ConcurrentTransactionsError,
    InvalidRecordError,
    InvalidTxnStateError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    RequestTimedOutError,
)
from strand.log.log import AppendInfo, PartitionLog
from strand.log.producer_state import AppendOrigin
from strand.records.batch import CONTROL_FLAG, HEADER_SIZE, read_header

log = logging.getLogger(__name__)

VALID_ACKS = frozenset((0, 1, -1))
# How long a batch of a producer's next epoch waits for its previous transaction's
# marker on the partition (the coordinator writes it right after the EndTxn answer).
MARKER_HOLD_S = 5.0
# An acks=all append is answered this long before the request's timeout, so that the
# answer (REQUEST_TIMED_OUT) reaches the client before its own deadline fires.
ANSWER_MARGIN_MS = 200


@dataclass(frozen=True, slots=True)
class PartitionAppend:
    topic: str
    partition: int
    records: bytes
    # COORDINATOR: a transaction marker (services.storage.txn_markers), the only
    # control batches a leader takes; CLIENT: a producer's batches.
    origin: AppendOrigin = AppendOrigin.CLIENT
    transactional_id: str = ""  # the producer's, for a transactional request
    # A marker's: the producer's next transaction, under this epoch, is open here.
    next_producer_epoch: int | None = None


@dataclass(slots=True)
class AppendResult:
    topic: str
    partition: int
    error_code: int = 0
    error_message: str = ""
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1


class Appender:
    def __init__(self, manager: ReplicaManager, disk: DiskExecutor,
                 verifier: TxnVerifier | None = None,
                 metrics: BrokerMetrics | None = None) -> None:
        self.manager = manager
        self.disk = disk
        # None: no KIP-890 verification of transactional writes.
        self.verifier = verifier
        self.metrics = metrics

    async def append(self, acks: int, partitions: Sequence[PartitionAppend],
                     timeout_ms: int = 30_000) -> list[AppendResult]:
        """One result per entry of ``partitions``, in the same order."""
        if acks not in VALID_ACKS:
            error = InvalidRequiredAcksError(f"acks must be 0, 1 or -1, got {acks}")
            return [AppendResult(p.topic, p.partition, wire_code(error), str(error))
                    for p in partitions]
        # Shielded: once started, an append completes (and wakes waiting fetches) even
        # if the client cancels the call.
        wait_s = max(timeout_ms - ANSWER_MARGIN_MS, 0) / 1000
        return list(await asyncio.gather(*(
            asyncio.shield(self._append_one(p, acks, wait_s)) for p in partitions)))

    async def _append_one(self, request: PartitionAppend, acks: int,
                          wait_s: float) -> AppendResult:
        result = AppendResult(request.topic, request.partition)
        replica: Replica | None = None
        try:
            replica = await self.manager.leader_replica_soon(request.topic, request.partition)
            if acks == -1:
                _check_enough_replicas(replica, NotEnoughReplicasError, "before the append")
            writer = self._writer(request)
            turn = replica.producer_turns.take(writer.producer_id) if writer else None
            try:
                if writer is not None:
                    await _hold_for_previous_marker(replica, request, writer, wait_s)
                token = await self._verify(replica, request, writer)
                if turn is not None:
                    await replica.producer_turns.wait(turn)
                async with replica.append_lock:
                    if turn is not None:
                        replica.producer_turns.passed(turn)
                    # Leadership may have moved while this append queued behind others.
                    if self.manager.leader_replica(request.topic, request.partition) is not replica:
                        raise NotLeaderOrFollowerError(
                            f"{request.topic}-{request.partition} was re-created; retry")
                    if _stale_marker(replica, request):
                        return result  # its transaction is not open here: nothing to end
                    _check_verified(replica, request,
                                    writer if self.verifier is not None else None, token)
                    epoch = replica.record.leader_epoch
                    partition_log = replica.log
                    info, log_start = await self.disk.run(
                        lambda: _append_as_leader(partition_log, request.records, epoch,
                                                  request.origin), [replica])
                    if writer is not None:  # the transaction is open here now (or ended)
                        replica.verified_txns.pop(writer.producer_id, None)
                    if not info.duplicate:  # a retry answered from producer state wrote nothing
                        replica.appended(info.last_offset + 1, info.size_bytes)
                        self.manager.maybe_advance_high_watermark(replica)
                        replica.append_traces.record(
                            info.first_offset, info.last_offset, current_trace_context(),
                            replica.log.high_watermark)
                        if self.metrics is not None and request.origin is AppendOrigin.CLIENT:
                            self.metrics.appended(request.topic, info.record_count,
                                                  info.size_bytes)
                    if request.origin is AppendOrigin.COORDINATOR:
                        _confirm_next_transaction(replica, request, epoch)
                        replica.marker_arrivals.appended()
            finally:
                if turn is not None:
                    replica.producer_turns.passed(turn)
            if acks == -1:  # a retry too: its first attempt may not be replicated yet
                await _await_replication(replica, info.last_offset + 1, wait_s)
                span = trace.get_current_span()
                if span.is_recording():  # the attributes cost a list per append
                    span.add_event("replicated", {
                        "strand.high_watermark": replica.log.high_watermark,
                        "strand.isr": list(replica.leader_state.isr) if replica.leader_state
                        else []})
        except Exception as exc:
            if replica is not None:
                self.manager.storage_failed(replica, exc)
            fail_partition(result, exc, "append")
            return result
        result.base_offset = info.first_offset
        result.log_append_time_ms = info.log_append_time
        result.log_start_offset = log_start
        return result


    def _writer(self, request: PartitionAppend) -> TxnWriter | None:
        """The request's transactional producer (None: not a transactional write)."""
        if request.origin is not AppendOrigin.CLIENT:
            return None
        writer = transactional_writer(request.records)
        if writer is not None and self.verifier is not None:
            require_transactional_id(request.transactional_id, writer,
                                     f"{request.topic}-{request.partition}")
        return writer

    async def _verify(self, replica: Replica, request: PartitionAppend,
                      writer: TxnWriter | None) -> VerificationGuard | None:
        """KIP-890: the guard of the coordinator's confirmation that ``writer``'s
        transaction has the partition, when that transaction is not open here yet."""
        if self.verifier is None or writer is None:
            return None
        if replica.log.open_transaction(writer.producer_id, writer.producer_epoch):
            return None
        # Registered before asking, as Kafka's VerificationGuard: a marker appended
        # while the question is out invalidates the answer. Shared by the producer's
        # requests verified at once, so that a later one does not void an earlier one.
        guard = replica.verified_txns.get(writer.producer_id)
        if (guard is not None and guard.epoch == writer.producer_epoch
                and guard.confirmed_in == replica.record.leader_epoch):
            return guard  # the previous transaction's marker brought the answer
        if guard is None or guard.epoch != writer.producer_epoch:
            guard = VerificationGuard(writer.producer_epoch)
            replica.verified_txns[writer.producer_id] = guard
        guard.holders += 1
        try:
            await self.verifier.verify(request.transactional_id, writer.producer_id,
                                       writer.producer_epoch, request.topic, request.partition)
        except BaseException:
            guard.holders -= 1
            if not guard.holders and replica.verified_txns.get(writer.producer_id) is guard:
                del replica.verified_txns[writer.producer_id]
            raise
        return guard


def _check_verified(replica: Replica, request: PartitionAppend, writer: TxnWriter | None,
                    token: VerificationGuard | None) -> None:
    """Under the append lock: a marker append ends verifications of its producer; a
    transactional write needs its transaction open here or a still valid confirmation
    (no marker came between the coordinator's answer and now)."""
    if request.origin is AppendOrigin.COORDINATOR:
        header = read_header(memoryview(request.records), 0)
        guard = replica.verified_txns.get(header.producer_id)
        # A verification of the producer's next epoch (held until this marker) stays.
        if guard is not None and guard.epoch <= header.producer_epoch:
            del replica.verified_txns[header.producer_id]
        return
    if writer is None or replica.log.open_transaction(writer.producer_id,
                                                      writer.producer_epoch):
        return
    # Not open (any more): only a confirmation no marker has ended since will do.
    if token is None or replica.verified_txns.get(writer.producer_id) is not token:
        raise InvalidTxnStateError(
            f"{request.topic}-{request.partition}: the transaction of producer "
            f"{writer.producer_id} (epoch {writer.producer_epoch}) ended while this write "
            "was being verified; it is not part of an open transaction here: abort the "
            "transaction and begin a new one")


def _confirm_next_transaction(replica: Replica, marker: PartitionAppend,
                              leader_epoch: int) -> None:
    """A marker that says the producer's next transaction is open and has this
    partition (the coordinator wrote it first) stands for the coordinator's answer to
    that transaction's first write here (see VerificationGuard)."""
    if marker.next_producer_epoch is None:
        return
    header = read_header(memoryview(marker.records), 0)
    if marker.next_producer_epoch <= header.producer_epoch:
        return
    latest = replica.log.producer_epoch(header.producer_id)
    if latest is not None and latest >= marker.next_producer_epoch:
        return  # that transaction wrote here already (verified by asking)
    guard = replica.verified_txns.get(header.producer_id)
    if guard is not None and guard.epoch == marker.next_producer_epoch:
        guard.confirmed_in = leader_epoch  # a write asking meanwhile keeps its token
        return
    replica.verified_txns[header.producer_id] = VerificationGuard(
        marker.next_producer_epoch, confirmed_in=leader_epoch)


async def _hold_for_previous_marker(replica: Replica, request: PartitionAppend,
                                    writer: TxnWriter, wait_s: float) -> None:
    """A batch of the producer's next epoch waits until the transaction it still has
    open here under an older epoch gets its marker (services.storage.txn_verification's
    MarkerArrivals); CONCURRENT_TRANSACTIONS (retriable) if that takes too long."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(wait_s, MARKER_HOLD_S)
    while True:
        open_epoch = replica.log.open_transaction_epoch(writer.producer_id)
        if open_epoch is None or open_epoch >= writer.producer_epoch:
            return
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise ConcurrentTransactionsError(
                f"{request.topic}-{request.partition}: producer {writer.producer_id} still "
                f"has its transaction of epoch {open_epoch} open here, waiting for its "
                f"marker; its epoch {writer.producer_epoch} writes wait for it: retry")
        with contextlib.suppress(TimeoutError):
            await replica.marker_arrivals.wait(remaining)


def _stale_marker(replica: Replica, request: PartitionAppend) -> bool:
    """A marker of an older epoch than the producer's latest here ends nothing: its
    transaction is not open here (a newer epoch's batch waits for it, see
    ``_hold_for_previous_marker``, and a fence's marker carries the newer epoch)."""
    if request.origin is not AppendOrigin.COORDINATOR:
        return False
    header = read_header(memoryview(request.records), 0)
    latest = replica.log.producer_epoch(header.producer_id)
    return latest is not None and header.producer_epoch < latest


def _check_enough_replicas(replica: Replica, error: type[Exception], when: str) -> None:
    state = replica.leader_state
    needed = replica.log.config.min_insync_replicas
    isr = len(state.isr) if state is not None else 0
    if isr < needed:
        raise error(f"{replica.topic}-{replica.partition} has {isr} in-sync replica(s) "
                    f"{when}, fewer than min.insync.replicas={needed}")


async def _await_replication(replica: Replica, required_offset: int, wait_s: float) -> None:
    """Until every ISR member has the records before ``required_offset`` (acks=all)."""
    if replica.log.high_watermark < required_offset:
        waiter = replica.wait_for_high_watermark(required_offset)
        try:
            async with asyncio.timeout(wait_s):  # not wait_for: see strand.service.aio
                await waiter
        except TimeoutError:
            raise RequestTimedOutError(
                f"{replica.topic}-{replica.partition}: the in-sync replicas did not all "
                f"acknowledge offset {required_offset - 1} within the request timeout") from None
    _check_enough_replicas(replica, NotEnoughReplicasAfterAppendError, "after the append")




def _append_as_leader(partition_log: PartitionLog, records: bytes, leader_epoch: int,
                      origin: AppendOrigin) -> tuple[AppendInfo, int]:
    if origin is AppendOrigin.CLIENT:
        _refuse_control_batches(records)
    info = partition_log.append_as_leader(records, leader_epoch, origin)
    return info, partition_log.log_start_offset


def _refuse_control_batches(records: bytes) -> None:
    """Control batches (transaction markers) are written by coordinators, never by
    producers (as in Kafka). Only the headers are read; framing errors are left to
    the full validation of the append."""
    view = memoryview(records)
    pos = 0
    while len(view) - pos >= HEADER_SIZE:
        header = read_header(view, pos)
        if header.attributes & CONTROL_FLAG:
            raise InvalidRecordError("producers may not write control batches")
        if header.size_in_bytes < HEADER_SIZE:
            return
        pos += header.size_in_bytes
