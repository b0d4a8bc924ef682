"""The shard coordinator's transactional offsets with an in-memory
__consumer_offsets partition and a scripted transaction coordinator (the KIP-890
verifier): a TxnOffsetCommit not in the producer's open transaction stores nothing;
pending offsets are unstable, survive a take-over, and become committed offsets (or
vanish) with CompleteTxnOffsets; a completion waits for a TxnOffsetCommit being
written; a group with pending offsets cannot be deleted."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from services.groups.coordinator import ShardCoordinator
from services.groups.records import OffsetValue
from strand.coordination.shard_log import Record
from strand.coordination.shards import GROUP_TOPIC
from strand.errors import (
    ErrorCode,
    GroupNotEmptyError,
    InvalidTxnStateError,
    ProducerFencedError,
)
from tests.support.shard_log import MemoryLog
from tests.unit.groups.test_shard_coordinator import RANGE, TOPICS, member, run, topics

SHARD = 3


class Verifier:
    """The transaction coordinator's answer: the partitions in each producer's open
    transaction; ``gate`` holds every answer until set."""

    def __init__(self) -> None:
        self.open: set[tuple[int, str, int]] = set()
        self.gate = asyncio.Event()
        self.gate.set()
        self.asked = 0

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     topic: str, partition: int) -> None:
        self.asked += 1
        await self.gate.wait()
        if (producer_id, topic, partition) not in self.open:
            raise InvalidTxnStateError(f"{topic}-{partition} is not in the transaction")


def coordinator_on(log: MemoryLog, verifier: Verifier) -> ShardCoordinator:
    return ShardCoordinator(SHARD, log, topics(**TOPICS), initial_rebalance_delay_ms=50,
                            verifier=verifier)


async def txn_commit(coordinator: ShardCoordinator, offsets: dict[tuple[str, int], int],
                     producer_id: int = 7, member_id: str = "", generation: int = -1
                     ) -> ErrorCode:
    return await coordinator.txn_commit(
        "tx-1", producer_id, 0, "g", member_id, generation, None,
        {tp: OffsetValue(o) for tp, o in offsets.items()})


def offsets(coordinator: ShardCoordinator) -> dict[tuple[str, int], int]:
    return {tp: v.offset for tp, v in coordinator.fetch("g", None).items()}


def test_a_txn_offset_commit_outside_the_transaction_stores_nothing() -> None:
    async def scenario() -> None:
        log, verifier = MemoryLog(), Verifier()
        coordinator = coordinator_on(log, verifier)
        with pytest.raises(InvalidTxnStateError):
            await txn_commit(coordinator, {("orders", 0): 10})
        assert log.records == [] and coordinator.unstable("g") == set()

    run(scenario())


def test_pending_offsets_survive_a_take_over_and_commit_there() -> None:
    async def scenario() -> None:
        log, verifier = MemoryLog(), Verifier()
        verifier.open.add((7, GROUP_TOPIC, SHARD))
        first = coordinator_on(log, verifier)
        await first.commit("g", "", -1, None, {("orders", 0): OffsetValue(5)})
        assert await txn_commit(first, {("orders", 0): 10, ("orders", 1): 20}) == ErrorCode.NONE
        assert offsets(first) == {("orders", 0): 5}  # pending is not committed
        assert first.unstable("g") == {("orders", 0), ("orders", 1)}
        await first.stop()

        second = coordinator_on(log, verifier)
        await second.load()
        assert second.unstable("g") == {("orders", 0), ("orders", 1)}
        assert await second.complete_txn(7, 0, 1, commit=True) == 2
        assert offsets(second) == {("orders", 0): 10, ("orders", 1): 20}
        assert second.unstable("g") == set()
        written = len(log.records)
        assert await second.complete_txn(7, 0, 1, commit=True) == 0  # a repeat
        assert len(log.records) == written

        third = coordinator_on(log, verifier)
        await third.load()
        assert offsets(third) == {("orders", 0): 10, ("orders", 1): 20}
        assert third.unstable("g") == set()

    run(scenario())


def test_an_abort_leaves_the_committed_offset() -> None:
    async def scenario() -> None:
        log, verifier = MemoryLog(), Verifier()
        verifier.open.add((7, GROUP_TOPIC, SHARD))
        coordinator = coordinator_on(log, verifier)
        await coordinator.commit("g", "", -1, None, {("orders", 0): OffsetValue(5)})
        await txn_commit(coordinator, {("orders", 0): 10})
        assert await coordinator.complete_txn(7, 0, 1, commit=False) == 1
        assert offsets(coordinator) == {("orders", 0): 5}
        assert coordinator.unstable("g") == set()

    run(scenario())


def test_a_completion_waits_for_a_txn_offset_commit_being_verified() -> None:
    async def scenario() -> None:
        log, verifier = MemoryLog(), Verifier()
        verifier.open.add((7, GROUP_TOPIC, SHARD))
        coordinator = coordinator_on(log, verifier)
        verifier.gate.clear()
        commit = asyncio.ensure_future(txn_commit(coordinator, {("orders", 0): 10}))
        while not verifier.asked:
            await asyncio.sleep(0.001)
        completion = asyncio.ensure_future(coordinator.complete_txn(7, 0, 1, commit=True))
        await asyncio.sleep(0.01)
        assert not completion.done()  # the producer's TxnOffsetCommit is still going
        verifier.gate.set()
        assert await commit == ErrorCode.NONE
        assert await completion == 1
        assert offsets(coordinator) == {("orders", 0): 10}
        assert coordinator.unstable("g") == set()  # nothing left pending forever

    run(scenario())


class GatedLog(MemoryLog):
    """An in-memory shard log whose appends wait for ``gate``."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.gate.set()
        self.waiting = 0

    async def append(self, records: Sequence[Record], *, hold_s: float = 0.0) -> None:
        self.waiting += 1
        await self.gate.wait()
        await super().append(records, hold_s=hold_s)


def test_a_txn_offset_commit_whose_caller_left_still_holds_off_the_completion() -> None:
    """The client's deadline cancels a TxnOffsetCommit while its write is on its way;
    the transaction is aborted meanwhile. The completion must wait for that write and
    end what it stored: run between the write and its apply, it would find nothing
    pending, and the offsets would stay pending (unstable) for ever."""
    async def scenario() -> None:
        log, verifier = GatedLog(), Verifier()
        verifier.open.add((7, GROUP_TOPIC, SHARD))
        coordinator = coordinator_on(log, verifier)
        await coordinator.commit("g", "", -1, None, {("orders", 0): OffsetValue(5)})
        log.gate.clear()
        log.waiting = 0
        commit = asyncio.ensure_future(txn_commit(coordinator, {("orders", 0): 10}))
        while not log.waiting:
            await asyncio.sleep(0.001)
        commit.cancel()  # the caller went away; its write is still on its way
        with pytest.raises(asyncio.CancelledError):
            await commit
        completion = asyncio.ensure_future(coordinator.complete_txn(7, 1, 1, commit=False))
        await asyncio.sleep(0.01)
        assert not completion.done()  # waits for the write left behind
        log.gate.set()
        assert await completion == 1
        assert coordinator.unstable("g") == set()
        assert offsets(coordinator) == {("orders", 0): 5}

    run(scenario())


def test_a_txn_offset_commit_arriving_after_its_transaction_ended_is_fenced() -> None:
    async def scenario() -> None:
        log, verifier = MemoryLog(), Verifier()
        verifier.open.add((7, GROUP_TOPIC, SHARD))
        coordinator = coordinator_on(log, verifier)
        assert await coordinator.complete_txn(7, 1, 1, commit=False) == 0  # aborted, epoch 1
        with pytest.raises(ProducerFencedError):
            await txn_commit(coordinator, {("orders", 0): 10})  # epoch 0: late
        assert coordinator.unstable("g") == set() and log.records == []

    run(scenario())


def test_a_member_of_an_older_generation_is_refused() -> None:
    async def scenario() -> None:
        log, verifier = MemoryLog(), Verifier()
        verifier.open.add((7, GROUP_TOPIC, SHARD))
        coordinator = coordinator_on(log, verifier)
        coordinator.start()
        member_id = await member(coordinator)
        joined = await coordinator.join("g", member_id, None, "c", "consumer",
                                        RANGE, 10_000, 2_000)
        assert joined.error == ErrorCode.NONE
        assert await txn_commit(coordinator, {("orders", 0): 1}, member_id=member_id,
                                generation=joined.generation + 1) == ErrorCode.ILLEGAL_GENERATION
        assert await txn_commit(coordinator, {("orders", 0): 1}, member_id="ghost",
                                generation=joined.generation) == ErrorCode.UNKNOWN_MEMBER_ID
        assert coordinator.unstable("g") == set()
        # The producer without the consumer's group metadata is not checked (KIP-447).
        assert await txn_commit(coordinator, {("orders", 0): 1}) == ErrorCode.NONE
        await coordinator.stop()

    run(scenario())


def test_a_group_with_pending_offsets_is_not_deleted() -> None:
    async def scenario() -> None:
        log, verifier = MemoryLog(), Verifier()
        verifier.open.add((7, GROUP_TOPIC, SHARD))
        coordinator = coordinator_on(log, verifier)
        await txn_commit(coordinator, {("orders", 0): 10})
        with pytest.raises(GroupNotEmptyError, match="pending"):
            await coordinator.delete("g")
        await coordinator.complete_txn(7, 0, 1, commit=False)
        assert await coordinator.delete("g") == ErrorCode.NONE

    run(scenario())
