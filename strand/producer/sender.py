"""The producer's I/O thread: batches from the accumulator to the gateway and back.

One daemon thread runs an asyncio loop with a ``grpc.aio`` channel to the gateway.
Each turn of the loop (Kafka's ``Sender.runOnce``):

1. refresh metadata if someone asked for it (an unknown leader, a stale-leader
   answer, a new topic) or it is older than ``metadata_max_age_ms``;
2. ``accumulator.ready()`` with the cached leaders says which leader nodes have a
   sendable batch and when to look again;
3. for each such node with fewer than ``max_in_flight_requests`` calls in flight,
   ``drain()`` takes at most ``max_request_size`` bytes of batches, one per
   partition, then tops the request up with further *full* batches of the same
   partitions (they travel concatenated in one ``PartitionProduceData``: the log
   assigns them contiguous offsets), so that a partition that filled several batches
   while its previous request was in flight catches up in one call;
4. one Produce call per node group goes to the gateway (which forwards one call per
   leader node too): groups run in parallel, bounded per node;
5. answers complete the batches with their base offsets, put them back for a retry
   (after ``retry_backoff_ms``, at most ``retries`` times, within
   ``delivery_timeout_ms`` of their creation) or fail them with the typed error;
6. batches that waited in the accumulator past ``delivery_timeout_ms`` (no leader,
   cluster unreachable) fail with RequestTimedOutError.

Ordering: up to ``max_in_flight_requests`` calls per node are in flight, and a
partition's batches may be in several of them (pipelining: measured here, this
doubles throughput over one call at a time). The gateway and the storage node append
a partition's batches in arrival order. The idempotent producer (the default) keeps
send order across retries and writes a retried batch once
(strand.producer.transaction_manager). Without idempotence, as Kafka's producer: a
retry can land after batches sent later (unless ``max_in_flight_requests=1``: a
partition then has at most one call in flight, muted meanwhile, and a retried batch
goes back ahead of younger ones), and a retry after a failure whose append did happen
(an answer lost with a killed process, a timeout) writes the batch twice (at least
once delivery).

The loop sleeps on an ``asyncio.Event`` until the next deadline the accumulator and
the metadata give; ``wakeup()`` (thread-safe) sets it when a batch fills or is
created, a flush starts, or an append waits for memory. Callbacks and futures of
completed records run on this thread: callbacks must be quick and must not block.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc

from strand.client.channel import open_aio_channel, transport_error
from strand.client.metadata import MetadataCache
from strand.client.wire import encode_produce_request
from strand.errors import (
    ErrorCode,
    StrandError,
    UnknownServerError,
    error_for,
)
from strand.producer.batch_expiry import QueuedBatchFailer, only_under
from strand.producer.errors import OutcomeUnknownError, ProducerClosedError
from strand.producer.producer_batch import ProducerBatch, TopicPartition
from strand.producer.record_accumulator import RecordAccumulator
from strand.producer.transaction_manager import TransactionManager

if TYPE_CHECKING:
    from strand.producer.transactional import Transactions
from strand.client.sasl import SaslCredentials
from strand.security.tls import ClientTls
from strand.v1 import common_pb2 as pb
from strand.v1 import gateway_pb2_grpc
from strand.v1 import transactions_pb2 as pb_txn

__all__ = ["METADATA_ERRORS", "RETRIABLE_ERRORS", "Sender", "SenderConfig"]

log = logging.getLogger(__name__)

# Answers after which the same batch may succeed later (Kafka's RetriableException).
RETRIABLE_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    # A transactional batch of the producer's next epoch that waited too long for its
    # previous transaction's marker on the partition (or for the coordinator's
    # verification): not written.
    ErrorCode.CONCURRENT_TRANSACTIONS,
})
# Of those, the ones that mean "your metadata is stale" (Kafka's InvalidMetadataException).
METADATA_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    # A transactional batch of the producer's next epoch that waited too long for its
    # previous transaction's marker on the partition (or for the coordinator's
    # verification): not written.
    ErrorCode.CONCURRENT_TRANSACTIONS,
})

# Answers the idempotent producer resolves (retry, epoch bump) or that end it.
_SEQUENCE_ERRORS = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                              ErrorCode.UNKNOWN_PRODUCER_ID})
_FENCED_ERRORS = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED})
# Answers that prove no attempt of an idempotent batch was written: a refusal by its
# sequence (storage answers a written one as a duplicate), or of its bytes (every
# attempt sends the same bytes, refused the same way).
_NEVER_WRITTEN = _SEQUENCE_ERRORS | {ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE,
                                     ErrorCode.INVALID_RECORD, ErrorCode.RECORD_LIST_TOO_LARGE,
                                     ErrorCode.CONCURRENT_TRANSACTIONS}

# Refusals by the gateway's ACL checks, before any storage node saw the attempt: they
# say nothing of earlier attempts (one may have been written before an ACL changed).
_REFUSED_BY_GATEWAY = frozenset({ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                 ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                 ErrorCode.CLUSTER_AUTHORIZATION_FAILED})

_EXPIRY_CHECK_MS = 100.0


def _monotonic_ms() -> float:
    return time.monotonic() * 1000.0


@dataclass(frozen=True, slots=True)
class SenderConfig:
    acks: int = 1
    retries: int = 2_147_483_647
    retry_backoff_ms: float = 100
    delivery_timeout_ms: float = 120_000
    request_timeout_ms: float = 30_000
    max_request_size: int = 1_048_576
    max_in_flight_requests: int = 5
    metadata_wait_ms: float = 60_000
    client_id: str = ""
    transactional_id: str = ""  # sent with each Produce (KIP-890 verification)
    tls: ClientTls | None = None  # None: plaintext
    sasl: SaslCredentials | None = None  # None: no authentication


class Sender:
    """The I/O thread of one Producer; see the module docstring."""

    def __init__(self, address: str, accumulator: RecordAccumulator, metadata: MetadataCache,
                 config: SenderConfig, clock: Callable[[], float] = _monotonic_ms) -> None:
        self.address = address
        self.accumulator = accumulator
        self.metadata = metadata
        self.config = config
        self._clock = clock
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"strand-producer-sender-{config.client_id}")
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None
        self._wake_pending = False
        self._closing = False
        self._forced = False
        self._stopped = False
        self._inflight: dict[int, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._metadata_task: asyncio.Task[None] | None = None
        self._partitions: set[TopicPartition] = set()  # every partition a batch was made for
        self._solo: set[TopicPartition] = set()  # send one batch per request (MESSAGE_TOO_LARGE)
        self._next_expiry_check = 0.0
        self._strict_order = config.max_in_flight_requests == 1  # mute partitions in flight
        self._stub: gateway_pb2_grpc.GatewayStub | None = None
        self._produce_rpc: Any = None  # Produce with pre-encoded requests
        self.fatal_error: BaseException | None = None
        self._tm: TransactionManager | None = accumulator.transaction_manager
        self._init_task: asyncio.Task[None] | None = None
        self._next_init = 0.0  # InitProducerId backoff after a failure
        # Set by a transactional Producer: adds partitions to the transaction each turn.
        self.transactions: Transactions | None = None
        self._unsendable = QueuedBatchFailer(
            accumulator, metadata, self._fail, clock,
            delivery_timeout_ms=config.delivery_timeout_ms,
            metadata_wait_ms=config.metadata_wait_ms, tm=self._tm)

    # ------------------------------------------------------------- thread control

    def start(self) -> None:
        self._thread.start()
        self._ready.wait()

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self._stopped

    def note_partition(self, tp: TopicPartition) -> None:
        """A batch was created for ``tp`` (its records are watched for expiry)."""
        if tp not in self._partitions:
            self._partitions.add(tp)

    def wakeup(self) -> None:
        """Make the loop take a turn now. Thread-safe, never blocks; cheap when a wake-up
        is already pending."""
        if self._wake_pending:
            return
        loop, event = self._loop, self._event
        if loop is None or event is None or self._stopped:
            return
        self._wake_pending = True
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(event.set)

    def initiate_close(self) -> None:
        """Stop once every batch is delivered (or has failed)."""
        self._closing = True
        self._wake_pending = False
        self.wakeup()

    def force_close(self) -> None:
        """Stop now: in-flight calls are cancelled, undelivered records fail."""
        self._closing = True
        self._forced = True
        self._wake_pending = False
        self.wakeup()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end; True if it did."""
        if threading.current_thread() is self._thread:
            return False
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # ------------------------------------------------------------------- loop

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # a bug: never leave futures hanging
            log.exception("the producer's sender thread failed")
            self.fatal_error = exc
            self.accumulator.close()
            self.accumulator.abort_incomplete_batches(
                ProducerClosedError(f"the producer's sender thread failed: {exc!r}"))
        finally:
            self._stopped = True
            self._ready.set()

    async def _main(self) -> None:
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        channel = open_aio_channel(self.address, self.config.client_id or None,
                                   self.config.tls, self.config.sasl)
        self._stub = gateway_pb2_grpc.GatewayStub(channel)
        self._produce_rpc = channel.unary_unary(
            "/strand.v1.Gateway/Produce", request_serializer=None,
            response_deserializer=pb.ProduceResponse.FromString)
        self._event = event
        self._loop = loop
        self._ready.set()
        try:
            while True:
                self._wake_pending = False
                event.clear()
                if self._forced:
                    break
                if (self._closing and not self._tasks
                        and not self.accumulator.has_incomplete()):
                    break
                delay = self._run_once(self._clock())
                if delay <= 0:
                    await asyncio.sleep(0)
                    continue
                handle = None if math.isinf(delay) else loop.call_later(delay / 1000, event.set)
                await event.wait()
                if handle is not None:
                    handle.cancel()
        finally:
            self._stopped = True
            await self._shutdown(channel)

    async def _shutdown(self, channel: grpc.aio.Channel) -> None:
        tasks = list(self._tasks)
        if self._forced:
            for task in tasks:
                task.cancel()
        for extra in (self._metadata_task, self._init_task):  # no longer needed either way
            if extra is not None:
                extra.cancel()
                tasks.append(extra)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self.accumulator.close()
        self.accumulator.abort_incomplete_batches(
            ProducerClosedError("the producer was closed before the record was delivered"))
        await channel.close()

    def _run_once(self, now: float) -> float:
        """One turn; returns milliseconds until the next one is due (math.inf: only on
        a wake-up)."""
        metadata = self.metadata
        acc = self.accumulator
        leader_of = metadata.leader_of
        result = acc.ready(now, leader_of)
        if result.unknown_leader_partitions:
            self._unsendable.fail_missing_partitions(result.unknown_leader_partitions, now)
            metadata.request_update()
        delay = result.next_ready_check_delay_ms
        if self._tm is not None:
            delay = min(delay, self._idempotence_turn(now))
        if self._metadata_task is None and metadata.wanted_topics():
            wait = metadata.time_to_next_update(now)
            if wait <= 0:
                metadata.attempt_started(now)
                self._metadata_task = asyncio.ensure_future(self._refresh_metadata())
            else:
                delay = min(delay, wait)
        limit = self.config.max_in_flight_requests
        nodes = [n for n in result.ready_nodes if self._inflight.get(n, 0) < limit]
        if nodes:
            drained = acc.drain(nodes, self.config.max_request_size, leader_of=leader_of,
                                now=now)
            for node, batches in drained.items():
                if batches:
                    self._top_up(node, batches, now)
                    self._send(node, batches)
        if now >= self._next_expiry_check:
            self._next_expiry_check = now + _EXPIRY_CHECK_MS
            self._unsendable.expire(self._partitions, now)
        if self._partitions and acc.has_incomplete():
            delay = min(delay, max(1.0, self._next_expiry_check - now))
        return delay

    # ------------------------------------------------------------- idempotence

    def _idempotence_turn(self, now: float) -> float:
        """Get a producer id, bump the epoch when due, end on a fatal error; returns
        milliseconds until this needs another look."""
        tm = self._tm
        assert tm is not None
        if tm.fatal_error is not None:
            self.accumulator.abort_incomplete_batches(tm.fatal_error)
            return math.inf
        if self.transactions is not None:
            # Transactional: the id and its epochs come from the coordinator, at
            # init_transactions() and an abort's bump, never from here.
            return self.transactions.sender_turn()
        if tm.bump_needed and not tm.needs_new_producer_id and not any(self._inflight.values()):
            tm.bump_epoch()  # False at the largest epoch: a new producer id is due
            log.info("producer %s: bumped to epoch %d after a sequence gap",
                     self.config.client_id, tm.epoch)
        if not tm.needs_new_producer_id or self._init_task is not None:
            return math.inf
        if tm.has_producer_id and any(self._inflight.values()):
            return math.inf  # a new id only once nothing is in flight
        if now < self._next_init:
            return self._next_init - now
        self._init_task = asyncio.ensure_future(self._init_producer_id())
        return math.inf

    async def _init_producer_id(self) -> None:
        try:
            error = await self._request_producer_id()
        finally:
            self._init_task = None
            self._wake_pending = False
            if self._event is not None:
                self._event.set()
        tm = self._tm
        if error is None or tm is None:
            return
        log.warning("producer %s: InitProducerId failed (idempotence needs a transaction "
                    "coordinator): %s", self.config.client_id, error)
        tm.init_error = error
        self._next_init = self._clock() + self.config.retry_backoff_ms
        if not error.retriable:
            tm.set_fatal(error)

    async def _request_producer_id(self) -> StrandError | None:
        """One InitProducerId call; None once the producer has its id."""
        tm = self._tm
        assert tm is not None and self._stub is not None
        try:
            response = await self._stub.InitProducerId(
                pb_txn.InitProducerIdRequest(), timeout=self.config.request_timeout_ms / 1000)
        except grpc.aio.AioRpcError as exc:
            return transport_error(exc, self.address, "InitProducerId")
        if response.error_code != ErrorCode.NONE:
            return error_for(response.error_code, response.error_message)
        tm.set_producer_id(response.producer_id, response.producer_epoch)
        log.debug("producer %s: producer id %d epoch %d", self.config.client_id,
                  response.producer_id, response.producer_epoch)
        return None

    def _sequence_error(self, tp: TopicPartition, group: list[ProducerBatch], code: int,
                        error: StrandError, now: float) -> None:
        """OUT_OF_ORDER_SEQUENCE_NUMBER / UNKNOWN_PRODUCER_ID for an idempotent batch:
        retried in order; a gap no earlier batch explains bumps the epoch first."""
        tm = self._tm
        assert tm is not None
        for batch in group:
            explained = (not tm.is_current(batch)  # sent before a bump: gets a new sequence
                         or (code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
                             and not tm.is_next_sequence(tp, batch)))
            if not explained:
                log.info("producer %s: %s for %s-%d at sequence %d: bumping the epoch",
                         self.config.client_id, error.__class__.__name__, tp[0], tp[1],
                         batch.base_sequence)
                tm.request_bump()
        self._retry_or_fail(group, error, True, now)

    # ------------------------------------------------------------------ produce

    def _top_up(self, node: int, batches: list[ProducerBatch], now: float) -> None:
        """Add the following full batches of the drained partitions, up to max_request_size."""
        acc = self.accumulator
        budget = self.config.max_request_size - sum(b.estimated_size for b in batches)
        forced = acc.closed or acc.flush_in_progress or acc.waiting_for_memory > 0
        wanted: dict[TopicPartition, int] = {}  # partition -> batches to add
        for batch in batches:
            tp = batch.topic_partition
            if tp in self._solo or (self._tm is not None and batch.attempts > 0):
                # An idempotent retry goes alone: storage answers a request either as
                # a whole retry or as new batches, never a mix.
                continue
            count = 0
            for queued in acc.queued_batches(tp):
                if not (queued.is_full or forced) or queued.estimated_size > budget:
                    break
                budget -= queued.estimated_size
                count += 1
            if count:
                wanted[tp] = count
        # drain() takes one batch per partition per call, the heads planned above.
        while wanted:
            more = acc.drain([node], 1 << 62, leader_of=only_under(set(wanted), node),
                             now=now)[node]
            if not more:
                return
            batches.extend(more)
            for batch in more:
                tp = batch.topic_partition
                if wanted[tp] <= 1:
                    del wanted[tp]
                else:
                    wanted[tp] -= 1

    def _send(self, node: int, batches: list[ProducerBatch]) -> None:
        groups: dict[TopicPartition, list[ProducerBatch]] = {}
        for batch in batches:
            tp = batch.topic_partition
            group = groups.get(tp)
            if group is None:
                groups[tp] = [batch]
                if self._strict_order:
                    self.accumulator.mute(tp)
            else:
                group.append(batch)
        self._inflight[node] = self._inflight.get(node, 0) + 1
        self._tasks.add(asyncio.ensure_future(self._produce(node, groups)))

    async def _produce(self, node: int, groups: dict[TopicPartition, list[ProducerBatch]]) -> None:
        config = self.config
        try:
            topics: dict[str, list[tuple[int, list[bytes]]]] = {}
            for (topic, partition), group in groups.items():
                topics.setdefault(topic, []).append((partition, [b.build() for b in group]))
            # The batches are copied once, into the wire message (strand.client.wire).
            request = encode_produce_request(config.acks, int(config.request_timeout_ms),
                                             topics, config.transactional_id)
            assert self._produce_rpc is not None
            call = self._produce_rpc(request, timeout=config.request_timeout_ms / 1000)
            if config.acks == 0:
                # Nothing is acknowledged: the records count as sent once the call is out.
                for group in groups.values():
                    for batch in group:
                        batch.complete(-1)
            try:
                response = await call
            except grpc.aio.AioRpcError as exc:
                error = transport_error(exc, self.address, "Produce")
                if config.acks == 0:
                    log.warning("acks=0 produce call failed (records may be lost): %s", error)
                    return
                now = self._clock()
                for group in groups.values():
                    if self._tm is not None:  # the call may have been written before it broke
                        for batch in group:
                            self._tm.attempt_failed(batch, proves_unwritten=False)
                    self._retry_or_fail(group, error, error.retriable, now)
                self.metadata.request_update()
                return
            if config.acks != 0:
                self._handle_response(groups, response)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug here must not leave records hanging
            log.exception("producer request handling failed")
            for group in groups.values():
                for batch in group:
                    batch.fail(exc)
        finally:
            if self._strict_order:
                for tp in groups:
                    self.accumulator.unmute(tp)
            self._inflight[node] -= 1
            # Forgotten here, not in a done callback: the loop may run before that one
            # and must not see this call as still in flight.
            task = asyncio.current_task()
            if task is not None:
                self._tasks.discard(task)
            self._wake_pending = False
            if self._event is not None:
                self._event.set()

    def _handle_response(self, groups: dict[TopicPartition, list[ProducerBatch]],
                         response: pb.ProduceResponse) -> None:
        now = self._clock()
        refresh = False
        answered: set[TopicPartition] = set()
        for topic_response in response.topics:
            topic = topic_response.topic
            for part in topic_response.partitions:
                tp = (topic, part.partition)
                group = groups.get(tp)
                if group is None or tp in answered:
                    continue
                answered.add(tp)
                code = part.error_code
                if code == ErrorCode.NONE:
                    self._solo.discard(tp)
                    offset = part.base_offset
                    # -1 (or unset) unless the topic stamps LogAppendTime.
                    append_time = part.log_append_time_ms if part.log_append_time_ms > 0 else -1
                    for batch in group:
                        batch.complete(offset, append_time)
                        offset += batch.record_count
                    continue
                error = error_for(code, part.error_message)
                tm = self._tm
                if (tm is not None and code != ErrorCode.DUPLICATE_SEQUENCE_NUMBER
                        and code not in _REFUSED_BY_GATEWAY):
                    for batch in group:
                        tm.attempt_failed(batch, proves_unwritten=code in _NEVER_WRITTEN)
                if tm is not None and code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                    for batch in group:  # written before; its offsets are unknown (Kafka)
                        batch.complete(-1)
                elif tm is not None and code in _SEQUENCE_ERRORS:
                    self._sequence_error(tp, group, code, error, now)
                elif tm is not None and code in _FENCED_ERRORS:
                    tm.set_fatal(error)
                    for batch in group:
                        batch.fail(error)
                elif code in RETRIABLE_ERRORS:
                    self._retry_or_fail(group, error, True, now)
                    refresh = refresh or code in METADATA_ERRORS
                elif code == ErrorCode.MESSAGE_TOO_LARGE and len(group) > 1:
                    # One of the concatenated batches is too big: send them one by one.
                    self._solo.add(tp)
                    self._retry_or_fail(group, error, True, now)
                else:
                    for batch in group:
                        self._fail(batch, error)
        for tp, group in groups.items():
            if tp not in answered:
                missing = UnknownServerError(f"the gateway's answer lacks {tp[0]}-{tp[1]}")
                for batch in group:
                    if self._tm is not None:
                        self._tm.attempt_failed(batch, proves_unwritten=False)
                    self._fail(batch, missing)
        if refresh:
            self.metadata.request_update()

    def _retry_or_fail(self, group: list[ProducerBatch], error: StrandError, retriable: bool,
                       now: float) -> None:
        config = self.config
        for batch in group:
            if (retriable and batch.attempts < config.retries
                    and now - batch.created_ms < config.delivery_timeout_ms
                    and not self._forced):
                log.debug("retrying %r after %s", batch, error)
                if self.accumulator.metrics is not None:
                    self.accumulator.metrics.batch_retried(batch)
                self.accumulator.reenqueue(batch, now)
            else:
                self._fail(batch, error)

    def _fail(self, batch: ProducerBatch, error: StrandError) -> None:
        """Fail ``batch`` for good; when an earlier attempt of an idempotent batch may
        have been written, with OutcomeUnknownError: the records may be in the log."""
        if self._tm is not None and batch.maybe_written and batch.has_sequence:
            unknown = OutcomeUnknownError(
                f"{batch.record_count} record(s) for {batch.topic}-{batch.partition} may or "
                f"may not have been written: an earlier attempt got no clear answer, and "
                f"the producer gave up ({error}). Read the partition to find out; sending "
                "them again may write them twice")
            unknown.__cause__ = error
            error = unknown
        batch.fail(error)

    # ---------------------------------------------------------------- metadata

    async def _refresh_metadata(self) -> None:
        metadata = self.metadata
        topics = metadata.wanted_topics()
        try:
            assert self._stub is not None
            response = await self._stub.Metadata(
                pb.MetadataRequest(topics=topics), timeout=self.config.request_timeout_ms / 1000)
        except grpc.aio.AioRpcError as exc:
            error = transport_error(exc, self.address, "Metadata")
            log.debug("metadata refresh failed: %s", error)
            metadata.update_failed(error, self._clock())
        else:
            metadata.update(response, topics, self._clock())
        finally:
            self._metadata_task = None
            self._wake_pending = False
            if self._event is not None:
                self._event.set()

    # ------------------------------------------------------------ transactions

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The sender thread's event loop (None before it starts)."""
        return None if self._stopped else self._loop

    def gateway_stub(self) -> gateway_pb2_grpc.GatewayStub:
        """The gateway stub of the sender's channel (use on its loop only)."""
        assert self._stub is not None, "the sender thread has not started"
        return self._stub

    def fail_queued(self, error: StrandError) -> None:
        """Fail every batch not yet sent (on the sender thread): the transaction they
        belong to is aborting."""
        if self.accumulator.has_undrained():
            self._unsendable.drain_and_fail(set(self._partitions), lambda tp, n: error)
