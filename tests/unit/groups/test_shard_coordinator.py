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
from services.groups.records import OffsetValue
from services.groups.topics import CacheTopics
from strand.cluster.cache import MetadataCache
from strand.cluster.keys import KeySpace
from strand.cluster.model import TopicRecord
from strand.coordination.shard_log import Record
from strand.errors import (
    ErrorCode,
    NotEnoughReplicasError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from tests.support.shard_log import MemoryLog

RANGE = (Protocol("range", b"topics: orders"),)


KEYS = KeySpace("test")


def set_topic(cache: MetadataCache, name: str, partitions: int | None,
              topic_id: str | None = None) -> None:
    """Create, re-create (another id) or delete (``partitions`` None) a topic, as the
    etcd watch would show it."""
    value = None if partitions is None else TopicRecord(
        name, topic_id or f"{name}-id-{partitions}", partitions, 1).to_json()
    cache.apply(KEYS.topic(name), value)
    cache.notify()


def topics(**counts: int) -> CacheTopics:
    """The real directory over a metadata cache holding these topics (name=partitions)."""
    cache = MetadataCache(KEYS)
    for name, partitions in counts.items():
        set_topic(cache, name, partitions)
    return CacheTopics(cache, wait_s=0.05)


TOPICS = {"orders": 8, "t": 4}


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
        coordinator = ShardCoordinator(0, log, topics(**TOPICS), initial_rebalance_delay_ms=100)
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
        successor = ShardCoordinator(0, log, topics(**TOPICS))
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
        coordinator = ShardCoordinator(0, log, topics(**TOPICS))
        log.fail_next = True
        with pytest.raises(NotEnoughReplicasError):
            await coordinator.commit("g", "", -1, None, {("t", 0): OffsetValue(5)})
        assert coordinator.fetch("g", None) == {}
        assert await coordinator.commit("g", "", -1, None, {("t", 0): OffsetValue(5)}) \
            == ErrorCode.NONE
        assert coordinator.fetch("g", [("t", 0)])[("t", 0)].offset == 5

    run(scenario())


def test_a_commit_whose_caller_went_away_is_still_applied() -> None:
    """A client's deadline cancels its commit while the write is on its way: the
    write lands, so memory must show it too (or it would differ from the log until
    the shard is loaded again)."""
    async def scenario() -> None:
        log = MemoryLog()
        release = asyncio.Event()
        written = log.append

        async def slow_append(records: Sequence[Record], *, hold_s: float = 0.0) -> None:
            await release.wait()
            await written(records)

        log.append = slow_append  # type: ignore[method-assign]
        coordinator = ShardCoordinator(0, log, topics(**TOPICS))
        call = asyncio.ensure_future(
            coordinator.commit("g", "", -1, None, {("t", 0): OffsetValue(5)}))
        await asyncio.sleep(0.05)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        release.set()
        await asyncio.sleep(0.05)
        assert len(log.records) == 1
        assert coordinator.fetch("g", [("t", 0)])[("t", 0)].offset == 5

    run(scenario())


def test_a_silent_member_expires_and_the_other_is_told_to_rejoin() -> None:
    async def scenario() -> None:
        coordinator = ShardCoordinator(0, MemoryLog(), topics(**TOPICS),
                                       initial_rebalance_delay_ms=0)
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
        coordinator = ShardCoordinator(0, log, topics(**TOPICS), initial_rebalance_delay_ms=0)
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
        successor = ShardCoordinator(0, log, topics(**TOPICS))
        await successor.load()
        assert successor.fetch("g", None) == {} and "g" not in successor.groups

    run(scenario())


def test_offsets_of_a_deleted_topic_are_gone_and_stay_gone_after_a_take_over() -> None:
    """Issue 11 point 7: a topic deleted and re-created with fewer partitions starts
    clean for the group; the removal is written to the shard's log (tombstones)."""
    async def scenario() -> None:
        log = MemoryLog()
        directory = topics(orders=3, t=1)
        cache = directory.cache
        coordinator = ShardCoordinator(0, log, directory)
        coordinator.start()
        old_id = directory.current("orders").topic_id  # type: ignore[union-attr]
        await coordinator.commit("g", "", -1, None, {
            ("orders", p): OffsetValue(100 + p, topic_id=old_id) for p in range(3)})
        await coordinator.commit("g", "", -1, None, {("t", 0): OffsetValue(7)})
        assert len(coordinator.fetch("g", None)) == 4

        set_topic(cache, "orders", None)  # deleted ...
        set_topic(cache, "orders", 2, "orders-new")  # ... and re-created, smaller
        # Not served even before the removal has run (the process tells the shard).
        assert set(coordinator.fetch("g", None)) == {("t", 0)}
        # A commit in flight for the old topic is refused, never applied to the new one.
        with pytest.raises(UnknownTopicIdError, match="deleted and re-created"):
            await coordinator.commit("g", "", -1, None, {("orders", 0): OffsetValue(
                500, topic_id=old_id)})
        with pytest.raises(UnknownTopicOrPartitionError, match="has 2 partition"):
            await coordinator.commit("g", "", -1, None, {("orders", 2): OffsetValue(1)})
        with pytest.raises(UnknownTopicOrPartitionError, match="does not exist"):
            await coordinator.commit("g", "", -1, None, {("nosuch", 0): OffsetValue(1)})

        coordinator.topics_changed()
        tombstones = [k for k, v in log.records if v is None]
        for _ in range(100):
            await asyncio.sleep(0.01)
            tombstones = [k for k, v in log.records if v is None]
            if tombstones:
                break
        assert len(tombstones) == 3 and all(b'"orders"' in k for k in tombstones)
        await coordinator.commit("g", "", -1, None, {("orders", 1): OffsetValue(
            4, topic_id="orders-new")})
        await coordinator.stop()

        successor = ShardCoordinator(0, log, directory)
        await successor.load()
        offsets = successor.fetch("g", None)
        assert {tp: v.offset for tp, v in offsets.items()} == {("t", 0): 7, ("orders", 1): 4}
        assert offsets[("orders", 1)].topic_id == "orders-new"

    run(scenario())


def test_offsets_left_by_a_topic_deleted_while_no_coordinator_ran_are_removed_on_load() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        directory = topics(orders=2)
        first = ShardCoordinator(0, log, directory)
        await first.commit("g", "", -1, None, {("orders", 1): OffsetValue(9)})
        set_topic(directory.cache, "orders", 4, "orders-again")  # while nobody watched

        successor = ShardCoordinator(0, log, directory)
        await successor.load()
        assert successor.fetch("g", None) == {}
        successor.start()  # the first round of its timers removes them durably
        for _ in range(100):
            await asyncio.sleep(0.01)
            if log.records[-1][1] is None:
                break
        assert log.records[-1] == (log.records[0][0], None)
        await successor.stop()

    run(scenario())
