"""A coordinator's shard: one partition of its internal compacted topic
(``__consumer_offsets`` for groups, ``__transaction_state`` for transactions),
written and read through the gateway (a coordinator is a client of the log like any
other).

Writes use acks=all, so a change answered to a client is on every in-sync replica
of the shard's partition and survives the loss of its leader. They are idempotent
batches under the owner's own producer id and epoch (strand.coordination.shard_fence):
a retry after a lost answer is recognised, not written twice, and once a newer owner
has written its fence, this owner's writes are refused. Loading first writes the
fence, then reads the partition from its start to the high watermark.

Appends made while a batch is on its way are gathered into the next batch (one batch
in flight per shard keeps the sequence numbers simple); a batch is retried until it
is answered or ``write_timeout_s`` passes. Then, or when fenced, the writer is
*lost*: its outcome is unknown or the shard has a newer owner, so the in-memory
state may no longer match the log; every append fails from then on with
NOT_COORDINATOR and ``on_lost`` tells the process to give the shard up (it is taken
again, under a new epoch, and reloaded).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from strand.client.structs import TopicPartition
from strand.cluster.gateway_calls import GatewayProducer
from strand.consumer import Consumer
from strand.coordination.shard_fence import FENCE_KEY, ShardWriterId, shard_writer_ids
from strand.errors import (
    ErrorCode,
    NotCoordinatorError,
    RequestTimedOutError,
    StrandError,
)
from strand.records import BatchBuilder

log = logging.getLogger(__name__)

__all__ = ["LOAD_TIMEOUT_S", "GatewayShardLog", "Record", "ShardLog", "owned_shard_log"]

LOAD_TIMEOUT_S = 60.0
WRITE_TIMEOUT_S = 30.0
RETRY_S = 0.1
BATCH_RECORDS = 1000
BATCH_BYTES = 512 * 1024
_FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED})
# The partition no longer follows this writer's sequence: it lost data it had
# acknowledged, or forgot the producer; the writer cannot tell what is there.
_DIVERGED = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                       ErrorCode.UNKNOWN_PRODUCER_ID})


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a shard: a coordinator's key and value bytes."""

    key: bytes
    value: bytes | None  # None: a tombstone


class ShardLog(Protocol):
    """Partition ``shard`` of a coordinator's internal topic."""

    async def append(self, records: Sequence[Record], *, hold_s: float = 0.0) -> None:
        """Write with acks=all; raise (a StrandError) if that did not happen.
        ``hold_s``: the caller expects another record at once; wait up to that long
        for it so that both go out in one write."""

    async def read_all(self) -> list[tuple[bytes, bytes | None]]:
        """Every (key, value) from the log start to the high watermark."""


class _Pending:
    def __init__(self, records: Sequence[Record]) -> None:
        self.records = records
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class GatewayShardLog:
    def __init__(self, gateway: GatewayProducer, bootstrap: str, topic: str, shard: int,
                 writer: ShardWriterId, previous: ShardWriterId | None = None, *,
                 on_lost: Callable[[], None] = lambda: None,
                 write_timeout_s: float = WRITE_TIMEOUT_S) -> None:
        self.gateway = gateway
        self.bootstrap = bootstrap
        self.topic = topic
        self.shard = shard
        self.writer = writer
        self.previous = previous  # a previous generation's id to fence first
        self.on_lost = on_lost
        self.write_timeout_s = write_timeout_s
        self._sequence = 0
        self._fenced = False
        self._lost: str | None = None
        self._queue: list[_Pending] = []
        self._flushing: asyncio.Task[None] | None = None
        self._arrived = asyncio.Event()  # an append while a hold is on

    @property
    def where(self) -> str:
        return f"shard {self.shard} of {self.topic}"

    # ------------------------------------------------------------------ writing

    async def append(self, records: Sequence[Record], *, hold_s: float = 0.0) -> None:
        self._check_lost()
        if not records:
            return
        pending = _Pending(records)
        self._queue.append(pending)
        self._arrived.set()
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.create_task(self._flush(hold_s), name=f"write-{self.where}")
        await asyncio.shield(pending.done)

    async def _flush(self, hold_s: float = 0.0) -> None:
        if hold_s > 0:
            # Until the next append (or hold_s): it joins this write, in queue order.
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), hold_s)
        while self._queue:
            taken: list[_Pending] = []
            count = size = 0
            while self._queue and (not taken or (
                    count + len(self._queue[0].records) <= BATCH_RECORDS
                    and size < BATCH_BYTES)):
                pending = self._queue.pop(0)
                taken.append(pending)
                count += len(pending.records)
                size += sum(len(r.key) + len(r.value or b"") for r in pending.records)
            error: BaseException | None
            try:
                error = await self._write([r for p in taken for r in p.records])
            except BaseException as exc:
                # Whatever went wrong (even a cancellation), the batch's outcome is
                # unknown: no append may wait for ever, and memory must be reloaded.
                self._lose(f"writing a batch failed unexpectedly: {exc!r}")
                error = self._lost_error()
                if not isinstance(exc, Exception):
                    self._settle(taken, error)
                    self._settle(self._queue, error)
                    self._queue.clear()
                    raise
            self._settle(taken, error)
            if self._lost is not None:
                self._settle(self._queue, self._lost_error())
                self._queue.clear()

    @staticmethod
    def _settle(pendings: Sequence[_Pending], error: BaseException | None) -> None:
        for pending in pendings:
            if not pending.done.done():
                if error is None:
                    pending.done.set_result(None)
                else:
                    pending.done.set_exception(error)

    async def _write(self, records: Sequence[Record],
                     writer: ShardWriterId | None = None) -> StrandError | None:
        """One batch, retried until answered; None once written. A refusal (the
        batch is not written) is returned; anything that leaves the log's content
        unknown, or fences this writer, makes it lost."""
        writer = writer or self.writer
        sequence = 0 if writer is not self.writer else self._sequence
        builder = BatchBuilder(producer_id=writer.producer_id,
                               producer_epoch=writer.producer_epoch, base_sequence=sequence)
        now_ms = int(time.time() * 1000)
        for record in records:
            builder.append(record.value, key=record.key, timestamp=now_ms)
        batch = builder.build()
        deadline = time.monotonic() + self.write_timeout_s
        while True:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            error = await self.gateway.produce(self.topic, self.shard, batch,
                                               max(min(remaining_ms, 10_000), 1))
            if error is None:
                if writer is self.writer:
                    self._sequence += len(records)
                return None
            if error.code in _FENCED:
                self._lose(f"a newer owner has fenced this one ({error})")
                return self._lost_error()
            if error.code in _DIVERGED:
                self._lose(f"the partition no longer follows this writer's sequence ({error})")
                return self._lost_error()
            if not error.retriable:
                return error  # refused: not written, the sequence stays free
            if time.monotonic() + RETRY_S >= deadline:
                self._lose(f"a write went unanswered for {self.write_timeout_s:g} s, its "
                           f"outcome is unknown (last error: {error})")
                return self._lost_error()
            await asyncio.sleep(RETRY_S)

    def _lose(self, why: str) -> None:
        if self._lost is None:
            self._lost = why
            log.warning("shard writer lost: giving the shard up", extra={
                "topic": self.topic, "shard": self.shard, "why": why,
                "producer_id": self.writer.producer_id, "epoch": self.writer.producer_epoch})
            self.on_lost()

    def _lost_error(self) -> NotCoordinatorError:
        return NotCoordinatorError(
            f"{self.where} is no longer written by this instance: {self._lost}; it gives "
            "the shard up and it is reloaded (retry: the client looks the owner up again)")

    def _check_lost(self) -> None:
        if self._lost is not None:
            raise self._lost_error()

    async def fence(self) -> None:
        """Write this owner's fence record (after fencing the previous generation's
        id, at a generation switch): from then on the partition refuses older
        owners' writes. Done once; load calls it."""
        if self._fenced:
            return
        fence = [Record(FENCE_KEY, b"%d:%d" % (self.writer.producer_id,
                                               self.writer.producer_epoch))]
        for writer in filter(None, (self.previous, self.writer)):
            error = await self._write(fence, writer)
            if error is not None:
                raise error
        self._fenced = True

    # ------------------------------------------------------------------ loading

    async def read_all(self) -> list[tuple[bytes, bytes | None]]:
        self._check_lost()
        await self.fence()
        return await asyncio.get_running_loop().run_in_executor(None, self._read_all)

    def _read_all(self) -> list[tuple[bytes, bytes | None]]:
        tp = TopicPartition(self.topic, self.shard)
        out: list[tuple[bytes, bytes | None]] = []
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        settings = self.gateway.channels.client_settings(self.gateway.address)
        with Consumer(self.bootstrap, **settings) as consumer:
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            end = consumer.end_offsets([tp])[tp]
            while consumer.position(tp) < end:
                if time.monotonic() > deadline:
                    raise RequestTimedOutError(
                        f"loading {self.topic}-{self.shard}: only up to offset "
                        f"{consumer.position(tp)} of {end} in {LOAD_TIMEOUT_S:g} s")
                for records in consumer.poll(timeout_ms=500).values():
                    out.extend((r.key or b"", r.value) for r in records
                               if r.key != FENCE_KEY)
        return out


class _Owner(Protocol):
    def shard_epoch(self, shard: int) -> int: ...

    def give_up(self, shard: int) -> None: ...


def owned_shard_log(gateway: GatewayProducer, bootstrap: str, topic: str, kind: str,
                    shard: int, ownership: _Owner) -> GatewayShardLog:
    """The log of a shard this instance has just taken: written under the identity of
    its take-over, given up when that writer is lost."""
    writer, previous = shard_writer_ids(kind, shard, ownership.shard_epoch(shard))
    return GatewayShardLog(gateway, bootstrap, topic, shard, writer, previous,
                           on_lost=lambda: ownership.give_up(shard))
