"""The shard coordinator with an in-memory __consumer_offsets partition: the join /
sync handshake over real asyncio waits, commits that are durable before they are
answered, take-over by a new coordinator that rebuilds groups and offsets from the
log, session expiry, and deletion."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from services.groups.coordinator import ShardCoordinator
from services.groups.membership import GroupState, Protocol
from services.groups.offset_store import Record
from services.groups.records import OffsetValue
from strand.errors import ErrorCode, NotEnoughReplicasError

RANGE = (Protocol("range", b"topics: orders"),)


class MemoryLog:
    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []
        self.fail_next = False

    async def append(self, records: Sequence[Record]) -> None:
        if self.fail_next:
            self.fail_next = False
            raise NotEnoughReplicasError("ISR too small")
        self.records.extend((r.key, r.value) for r in records)

    async def read_all(self) -> list[tuple[bytes, bytes | None]]:
        return list(self.records)


async def member(coordinator: ShardCoordinator, group: str = "g", session_ms: int = 10_000,
                 instance: str | None = None) -> str:
    first = await coordinator.join(group, "", instance, "client", "consumer", RANGE,
                                   session_ms, 2_000)
    if first.error == ErrorCode.MEMBER_ID_REQUIRED:
        return first.member_id
    return first.member_id


def run(coro: object) -> None:
    asyncio.run(coro)  # type: ignore[arg-type]


def test_two_members_join_sync_commit_and_a_new_coordinator_takes_over() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        coordinator = ShardCoordinator(0, log, initial_rebalance_delay_ms=100)
        coordinator.start()
        a, b = await member(coordinator), await member(coordinator)
        joins = await asyncio.gather(*(coordinator.join(
            "g", m, None, "client", "consumer", RANGE, 10_000, 2_000) for m in (a, b)))
        assert {j.generation for j in joins} == {1}
        leader = joins[0].leader_id
        assert len(next(j for j in joins if j.member_id == leader).members) == 2
        follower = b if leader == a else a
        waiting = asyncio.ensure_future(coordinator.sync("g", follower, 1, None, None))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        mine = await coordinator.sync("g", leader, 1, None, {a: b"A", b: b"B"})
        assert mine == (ErrorCode.NONE, b"A" if leader == a else b"B")
        assert await waiting == (ErrorCode.NONE, b"B" if leader == a else b"A")

        assert await coordinator.commit("g", a, 1, None, {("orders", 0): OffsetValue(42)}) \
            == ErrorCode.NONE
        assert await coordinator.commit("g", a, 0, None, {("orders", 0): OffsetValue(99)}) \
            == ErrorCode.ILLEGAL_GENERATION  # a zombie's commit is refused
        await coordinator.stop()

        # Another instance takes the shard over from the log alone.
        successor = ShardCoordinator(0, log)
        await successor.load()
        successor.start()
        assert successor.fetch("g", None)[("orders", 0)].offset == 42
        group = successor.groups["g"]
        assert group.state == GroupState.STABLE and group.generation == 1
        assert successor.heartbeat("g", a, 1, None) == ErrorCode.NONE  # carries on
        assert await successor.sync("g", b, 1, None, None) == (ErrorCode.NONE, b"B")
        await successor.stop()

    run(scenario())


def test_a_failed_write_is_not_acknowledged_and_changes_nothing() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        coordinator = ShardCoordinator(0, log)
        log.fail_next = True
        with pytest.raises(NotEnoughReplicasError):
            await coordinator.commit("g", "", -1, None, {("t", 0): OffsetValue(5)})
        assert coordinator.fetch("g", None) == {}
        assert await coordinator.commit("g", "", -1, None, {("t", 0): OffsetValue(5)}) \
            == ErrorCode.NONE
        assert coordinator.fetch("g", [("t", 0)])[("t", 0)].offset == 5

    run(scenario())


def test_a_silent_member_expires_and_the_other_is_told_to_rejoin() -> None:
    async def scenario() -> None:
        coordinator = ShardCoordinator(0, MemoryLog(), initial_rebalance_delay_ms=0)
        coordinator.start()
        a = await member(coordinator, session_ms=300)
        b = await member(coordinator, session_ms=300)
        joins = await asyncio.gather(*(coordinator.join(
            "g", m, None, "client", "consumer", RANGE, 300, 2_000) for m in (a, b)))
        await coordinator.sync("g", joins[0].leader_id, 1, None, {})
        for _ in range(8):  # only a keeps heartbeating
            await asyncio.sleep(0.1)
            error = coordinator.heartbeat("g", a, 1, None)
        assert error == ErrorCode.REBALANCE_IN_PROGRESS
        assert b not in coordinator.groups["g"].members
        await coordinator.stop()

    run(scenario())


def test_only_an_empty_group_can_be_deleted_and_deletion_is_durable() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        coordinator = ShardCoordinator(0, log, initial_rebalance_delay_ms=0)
        coordinator.start()
        a = await member(coordinator)
        await coordinator.join("g", a, None, "client", "consumer", RANGE, 10_000, 2_000)
        refused = await coordinator.delete("g")
        assert refused == ErrorCode.GROUP_NOT_EMPTY
        assert coordinator.leave("g", a) == ErrorCode.NONE
        await coordinator.commit("g", "", -1, None, {("t", 0): OffsetValue(1)})
        deleted = await coordinator.delete("g")
        again = await coordinator.delete("g")
        assert (deleted, again) == (ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND)
        await coordinator.stop()
        successor = ShardCoordinator(0, log)
        await successor.load()
        assert successor.fetch("g", None) == {} and "g" not in successor.groups

    run(scenario())
