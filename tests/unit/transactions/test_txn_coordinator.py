"""The transaction shard coordinator with an in-memory ``__transaction_state``
partition and marker writer: every transition durable before it is applied, EndTxn
through Prepare* and the markers to Complete*, a new owner finishing what it finds
in Prepare*, timeouts fencing the producer, and expired ids removed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Collection, Iterator, Sequence

import pytest

from services.transactions.coordinator import COMPLETION_HOLD_S, TxnShardCoordinator
from services.transactions.txn_metadata import TopicPartition
from services.transactions.txn_records import decode_value
from services.transactions.txn_requests import ProducerIdAndEpoch
from services.transactions.txn_state import TxnState
from strand.coordination.shard_log import Record
from strand.coordination.txn_verifier import OpenedNext
from strand.errors import (
    ConcurrentTransactionsError,
    CoordinatorNotAvailableError,
    InvalidTxnStateError,
    NotLeaderOrFollowerError,
    ProducerFencedError,
)
from tests.support.shard_log import MemoryLog

TID = "tx-1"
PARTS = [("orders", 0), ("orders", 1), ("audit", 0)]


class Markers:
    """Records every marker batch; refuses while ``broken``."""

    def __init__(self, broken: bool = False) -> None:
        self.broken = broken
        self.written: list[tuple[int, int, int, bool, tuple[TopicPartition, ...]]] = []
        self.opened: list[OpenedNext | None] = []

    async def write_markers(self, producer_id: int, producer_epoch: int,
                            coordinator_epoch: int, commit: bool,
                            partitions: Collection[TopicPartition],
                            opened: OpenedNext | None = None) -> None:
        if self.broken:
            raise NotLeaderOrFollowerError("orders-0: the leader moved")
        self.written.append((producer_id, producer_epoch, coordinator_epoch, commit,
                             tuple(partitions)))
        self.opened.append(opened)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def ids() -> Iterator[int]:
    n = 100
    while True:
        yield n
        n += 1


def coordinator(log: MemoryLog, markers: Markers, clock: Clock,
                epoch: int = 7) -> TxnShardCoordinator:
    pids = ids()

    async def new_producer_id() -> int:
        return next(pids)

    return TxnShardCoordinator(0, log, markers, new_producer_id, lambda: 4,
                               coordinator_epoch=epoch, abort_interval_ms=3_600_000,
                               marker_retry_s=0.01, clock=clock)


def states(log: MemoryLog) -> list[TxnState]:
    out = []
    for _, value in log.records:
        transit = decode_value(value)
        out.append(TxnState.DEAD if transit is None else transit.state)
    return out


async def settle(c: TxnShardCoordinator, state: TxnState) -> None:
    async with asyncio.timeout(5):
        while (m := c.store.get(TID)) is None or m.state is not state or m.pending:
            await asyncio.sleep(0.005)


def test_end_txn_writes_prepare_then_markers_then_complete() -> None:
    async def scenario() -> None:
        log, markers, clock = MemoryLog(), Markers(), Clock()
        c = coordinator(log, markers, clock)
        await c.load()
        c.start()
        first = await c.init_producer_id(TID, 60_000, None)
        assert first == ProducerIdAndEpoch(100, 0)
        # No transaction open yet: committing is refused and changes nothing.
        with pytest.raises(InvalidTxnStateError, match="no transaction is open"):
            await c.end_txn(TID, 100, 0, commit=True)
        assert len(log.records) == 1
        await c.add_partitions(TID, 100, 0, PARTS[:2])
        await c.add_offsets(TID, 100, 0, "group-a")
        await c.end_txn(TID, 100, 0, commit=True)
        await settle(c, TxnState.COMPLETE_COMMIT)
        assert states(log) == [TxnState.EMPTY, TxnState.ONGOING, TxnState.ONGOING,
                               TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]
        [(pid, epoch, coordinator_epoch, commit, partitions)] = markers.written
        assert (pid, epoch, coordinator_epoch, commit) == (100, 0, 7, True)
        assert len(partitions) == 3 and ("__consumer_offsets", partitions[0][1]) in partitions
        # A retried commit of the completed transaction succeeds; an abort of it does not.
        await c.end_txn(TID, 100, 0, commit=True)
        with pytest.raises(InvalidTxnStateError):
            await c.end_txn(TID, 100, 0, commit=False)
        await c.stop()

    asyncio.run(scenario())


def test_a_failed_write_changes_nothing() -> None:
    async def scenario() -> None:
        log, clock = MemoryLog(), Clock()
        c = coordinator(log, Markers(), clock)
        await c.load()
        c.start()
        log.fail_next = True
        with pytest.raises(CoordinatorNotAvailableError, match="nothing changed"):
            await c.init_producer_id(TID, 60_000, None)
        assert c.store.get(TID) is None and not log.records
        await c.init_producer_id(TID, 60_000, None)
        log.fail_next = True
        with pytest.raises(CoordinatorNotAvailableError):
            await c.add_partitions(TID, 101, 0, PARTS)
        metadata = c.store.get(TID)
        assert metadata is not None
        assert metadata.state is TxnState.EMPTY and not metadata.pending
        assert not metadata.partitions
        await c.stop()

    asyncio.run(scenario())


def test_a_new_owner_finishes_what_it_finds_in_prepare() -> None:
    async def scenario() -> None:
        log, clock = MemoryLog(), Clock()
        old = coordinator(log, Markers(broken=True), clock, epoch=7)
        await old.load()
        old.start()
        await old.init_producer_id(TID, 60_000, None)
        await old.add_partitions(TID, 100, 0, PARTS)
        await old.end_txn(TID, 100, 0, commit=False)
        await asyncio.sleep(0.05)  # the old owner keeps failing to write markers
        assert states(log)[-1] is TxnState.PREPARE_ABORT
        # Still completing: a new instance of the producer must wait, and is told so.
        with pytest.raises(ConcurrentTransactionsError):
            await old.init_producer_id(TID, 60_000, None)
        await old.stop()
        markers = Markers()
        new = coordinator(log, markers, clock, epoch=9)
        await new.load()
        new.start()
        await settle(new, TxnState.COMPLETE_ABORT)
        assert markers.written == [(100, 0, 9, False, tuple(sorted(PARTS)))]
        assert states(log)[-1] is TxnState.COMPLETE_ABORT
        # The abort moved the id to epoch 1; the new instance gets the one after.
        assert await new.init_producer_id(TID, 60_000, None) == ProducerIdAndEpoch(100, 2)
        await new.stop()

    asyncio.run(scenario())


def test_init_producer_id_fences_the_open_transaction_of_the_old_instance() -> None:
    async def scenario() -> None:
        log, markers, clock = MemoryLog(), Markers(), Clock()
        c = coordinator(log, markers, clock)
        await c.load()
        c.start()
        await c.init_producer_id(TID, 60_000, None)
        await c.add_partitions(TID, 100, 0, PARTS)
        with pytest.raises(ConcurrentTransactionsError, match="being aborted"):
            await c.init_producer_id(TID, 60_000, None)
        await settle(c, TxnState.COMPLETE_ABORT)
        # The abort ran under the bumped epoch: markers carry it, the old one is fenced.
        assert markers.written[0][:2] == (100, 1)
        assert await c.init_producer_id(TID, 60_000, None) == ProducerIdAndEpoch(100, 2)
        for call in (c.add_partitions(TID, 100, 0, PARTS), c.end_txn(TID, 100, 0, True)):
            with pytest.raises(ProducerFencedError):
                await call
        await c.stop()

    asyncio.run(scenario())


def test_a_timed_out_transaction_is_aborted_under_a_new_epoch() -> None:
    async def scenario() -> None:
        log, markers, clock = MemoryLog(), Markers(), Clock()
        c = coordinator(log, markers, clock)
        await c.load()
        c.start()
        await c.init_producer_id(TID, 1_000, None)
        await c.add_partitions(TID, 100, 0, PARTS)
        clock.now += 999
        await c.abort_timed_out()
        metadata = c.store.get(TID)
        assert metadata is not None and metadata.state is TxnState.ONGOING  # not yet
        clock.now += 2
        await c.abort_timed_out()
        await settle(c, TxnState.COMPLETE_ABORT)
        assert markers.written == [(100, 1, 7, False, tuple(sorted(PARTS)))]
        with pytest.raises(ProducerFencedError):
            await c.end_txn(TID, 100, 0, commit=True)
        await c.stop()

    asyncio.run(scenario())


def test_unused_ids_expire_with_a_tombstone() -> None:
    async def scenario() -> None:
        log, clock = MemoryLog(), Clock()
        c = coordinator(log, Markers(), clock)
        c.id_expiration_ms = 10_000
        await c.load()
        c.start()
        await c.init_producer_id(TID, 60_000, None)
        await c.init_producer_id("open", 600_000, None)
        await c.add_partitions("open", 101, 0, PARTS)
        clock.now += 10_001
        await c.expire_ids()
        assert c.store.get(TID) is None
        assert c.store.get("open") is not None  # a transaction is open: never expires
        assert log.records[-1][1] is None
        reloaded = coordinator(log, Markers(), clock)
        await reloaded.load()
        assert reloaded.store.get(TID) is None
        await c.stop()

    asyncio.run(scenario())


class SlowLog(MemoryLog):
    """Appends wait until ``release`` is set (a slow, replicated write)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def append(self, records: Sequence[Record], *, hold_s: float = 0.0) -> None:
        await self.release.wait()
        await super().append(records)


async def serving(log: SlowLog, markers: Markers) -> TxnShardCoordinator:
    """A started coordinator over ``log`` with TID initialised (producer 100, epoch 0)."""
    log.release.set()
    c = coordinator(log, markers, Clock())
    await c.load()
    c.start()
    await c.init_producer_id(TID, 60_000, None)
    return c


async def cut_short_mid_write(log: SlowLog, call: Awaitable[object]) -> None:
    """Run ``call`` while the shard write is held, cancel it there as a client's
    deadline would, then let the write land."""
    log.release.clear()
    task = asyncio.ensure_future(call)
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    log.release.set()


def test_a_caller_that_goes_away_does_not_leave_its_change_pending() -> None:
    """A client's deadline cancels its call while the shard write is on its way: the
    write still lands and the change is applied (not left pending, which would
    answer every later call for the id "being written" for ever)."""
    async def scenario() -> None:
        log = SlowLog()
        c = await serving(log, Markers())
        await cut_short_mid_write(log, c.add_partitions(TID, 100, 0, PARTS))
        await settle(c, TxnState.ONGOING)
        metadata = c.store.get(TID)
        assert metadata is not None and metadata.partitions == set(PARTS)
        assert states(log) == [TxnState.EMPTY, TxnState.ONGOING]
        await c.end_txn(TID, 100, 0, commit=True)  # the id is not stuck
        await settle(c, TxnState.COMPLETE_COMMIT)
        await c.stop()

    asyncio.run(scenario())


def test_an_end_txn_whose_caller_goes_away_still_gets_its_markers() -> None:
    """The client's deadline cancels EndTxn while PrepareCommit is being written: the
    record lands and the markers are still written to Complete* (not left in Prepare*
    with nothing writing them, which answers the id's every InitProducerId "the
    markers are still being written" until the shard moves)."""
    async def scenario() -> None:
        log, markers = SlowLog(), Markers()
        c = await serving(log, markers)
        await c.add_partitions(TID, 100, 0, PARTS)
        await cut_short_mid_write(log, c.end_txn(TID, 100, 0, commit=True))
        await settle(c, TxnState.COMPLETE_COMMIT)
        assert [(pid, epoch, commit) for pid, epoch, _, commit, _ in markers.written] == \
            [(100, 0, True)]
        assert await c.init_producer_id(TID, 60_000, None) == ProducerIdAndEpoch(100, 2)
        await c.stop()

    asyncio.run(scenario())


def test_a_fence_whose_caller_goes_away_still_aborts() -> None:
    """The same for the abort a new instance's InitProducerId starts (the fence)."""
    async def scenario() -> None:
        log, markers = SlowLog(), Markers()
        c = await serving(log, markers)
        await c.add_partitions(TID, 100, 0, PARTS)
        await cut_short_mid_write(log, c.init_producer_id(TID, 60_000, None))
        await settle(c, TxnState.COMPLETE_ABORT)
        assert [(pid, epoch, commit) for pid, epoch, _, commit, _ in markers.written] == \
            [(100, 1, False)]
        await c.stop()

    asyncio.run(scenario())


class GatedMarkers(Markers):
    """Markers written only once ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def write_markers(self, producer_id: int, producer_epoch: int,
                            coordinator_epoch: int, commit: bool,
                            partitions: Collection[TopicPartition],
                            opened: OpenedNext | None = None) -> None:
        await self.release.wait()
        await super().write_markers(producer_id, producer_epoch, coordinator_epoch, commit,
                                    partitions, opened)


class HoldLog(MemoryLog):
    """Records the hold asked for with each append."""

    def __init__(self) -> None:
        super().__init__()
        self.holds: list[tuple[TxnState, float]] = []

    async def append(self, records: Sequence[Record], *, hold_s: float = 0.0) -> None:
        for r in records:
            transit = decode_value(r.value)
            self.holds.append((TxnState.DEAD if transit is None else transit.state, hold_s))
        await super().append(records, hold_s=hold_s)


async def one_commit_with_gated_markers() -> tuple[TxnShardCoordinator, HoldLog,
                                                    GatedMarkers]:
    """A coordinator whose id committed one transaction under epoch 0 (now at epoch 1),
    its COMMIT markers held until ``markers.release`` is set."""
    log, markers = HoldLog(), GatedMarkers()
    c = coordinator(log, markers, Clock())
    await c.load()
    c.start()
    await c.init_producer_id(TID, 60_000, None)
    await c.add_partitions(TID, 100, 0, PARTS[:1])
    assert await c.end_txn(TID, 100, 0, commit=True) == ProducerIdAndEpoch(100, 1)
    return c, log, markers


def test_the_next_transaction_begins_while_the_markers_are_written() -> None:
    """An epoch per transaction: EndTxn answers the next epoch, whose AddPartitionsToTxn
    goes in at once while the markers are written (they carry the ended epoch). The
    next EndTxn waits for them. Dropping the Completion writes nothing (the next
    record carries the whole state); a Complete* record goes out at once when nobody
    waits for it."""
    async def scenario() -> None:
        c, log, markers = await one_commit_with_gated_markers()
        await asyncio.wait_for(c.add_partitions(TID, 100, 1, PARTS[1:2]), 1)
        metadata = c.store.get(TID)
        assert metadata is not None and metadata.state is TxnState.ONGOING
        assert metadata.completing is not None and markers.written == []
        ending = asyncio.ensure_future(c.end_txn(TID, 100, 1, commit=True))
        await asyncio.sleep(0.02)
        assert not ending.done()  # waiting for the previous transaction's markers
        markers.release.set()
        assert await ending == ProducerIdAndEpoch(100, 2)
        await settle(c, TxnState.COMPLETE_COMMIT)
        assert [m[:2] + m[3:] for m in markers.written] == [
            (100, 0, True, tuple(PARTS[:1])), (100, 1, True, tuple(PARTS[1:2]))]
        assert log.holds[-4:] == [
            (TxnState.PREPARE_COMMIT, 0.0), (TxnState.ONGOING, 0.0),
            (TxnState.PREPARE_COMMIT, 0.0), (TxnState.COMPLETE_COMMIT, 0.0)]
        # Each PrepareCommit carries its own transaction, not the one before it.
        written = [decode_value(value) for _, value in log.records]
        assert [(t.producer_epoch, t.completing.producer_epoch) for t in written
                if t is not None and t.state is TxnState.PREPARE_COMMIT
                and t.completing is not None] == [(1, 0), (2, 1)]
        await c.stop()

    asyncio.run(scenario())


def test_a_completion_a_request_waits_for_is_held_for_its_record() -> None:
    """AddOffsetsToTxn waits for the previous transaction's markers (the group keeps one
    pending offset per producer and partition); the Complete record is then held for
    its Ongoing record, so both go out in one shard write."""
    async def scenario() -> None:
        c, log, markers = await one_commit_with_gated_markers()
        adding = asyncio.ensure_future(c.add_offsets(TID, 100, 1, "group-a"))
        await asyncio.sleep(0.02)
        assert not adding.done()  # waiting for the markers
        markers.release.set()
        await adding
        assert log.holds[-3:] == [(TxnState.PREPARE_COMMIT, 0.0),
                                  (TxnState.COMPLETE_COMMIT, COMPLETION_HOLD_S),
                                  (TxnState.ONGOING, 0.0)]
        await c.stop()

    asyncio.run(scenario())


def test_offsets_never_join_while_the_previous_transaction_completes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Past its wait, AddOffsetsToTxn answers CONCURRENT_TRANSACTIONS and adds nothing
    (the next transaction's TxnOffsetCommit would replace the offsets the previous one
    still has pending), where data partitions go in at once."""
    monkeypatch.setattr("services.transactions.coordinator.COMPLETION_WAIT_S", 0.05)

    async def scenario() -> None:
        c, log, markers = await one_commit_with_gated_markers()
        written = len(log.records)
        with pytest.raises(ConcurrentTransactionsError, match=r"markers .* still being written"):
            await c.add_offsets(TID, 100, 1, "group-a")
        assert len(log.records) == written
        await c.add_partitions(TID, 100, 1, PARTS[1:2])
        markers.release.set()
        await c.add_offsets(TID, 100, 1, "group-a")
        await c.stop()

    asyncio.run(scenario())
