"""The one fetch path of a storage node (services/storage/fetch.py) for its two kinds
of fetchers: consumers read below the high watermark, followers up to the log end
offset; a follower's fetch also records its progress and answers divergence; a
waiting consumer wakes for committed bytes, a waiting follower for appended ones.

A real partition log and replica, led by node 1 with follower 2; no processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from services.storage.disk import DiskExecutor
from services.storage.fetch import Fetcher
from services.storage.fetch_params import (
    FetchedPartition,
    FetchIsolation,
    FetchParams,
    PartitionFetch,
)
from services.storage.leader_state import LeaderState
from services.storage.replica import Replica
from services.storage.replica_manager import ReplicaManager
from strand.cluster.cache import MetadataCache
from strand.cluster.keys import KeySpace
from strand.cluster.model import PartitionRecord
from strand.errors import ErrorCode
from strand.log import PartitionLog
from strand.log.config import LogConfig
from strand.log.producer_state import AppendOrigin
from strand.records import BatchBuilder
from strand.records.control import ControlType, build_end_txn_marker

LEADER, FOLLOWER, STRANGER = 1, 2, 3
EPOCH = 4
TOPIC = "t"


def batch(*values: bytes) -> bytes:
    builder = BatchBuilder()
    for value in values:
        builder.append(value, timestamp=1_700_000_000_000)
    return builder.build()


class Leadership:
    """Node 1 leading ``t-0`` (replicas 1 and 2, both in sync) through a real manager."""

    def __init__(self, tmp: Path, disk: DiskExecutor) -> None:
        self.manager = ReplicaManager(LEADER, tmp, MetadataCache(KeySpace("test")), disk)
        record = PartitionRecord(TOPIC, 0, (LEADER, FOLLOWER), LEADER, EPOCH,
                                 (LEADER, FOLLOWER))
        self.log = PartitionLog.open(tmp / "t-0", LogConfig())
        start = self.log.begin_leader_epoch(EPOCH)
        self.replica = Replica("topic-id", record, self.log)
        self.replica.leader_state = LeaderState.begin(
            LEADER, record.replicas, record.isr, EPOCH, 0, start, self.manager.clock())
        self.manager.replicas[(TOPIC, 0)] = self.replica
        self.fetcher = Fetcher(self.manager, disk)

    def append(self, *values: bytes) -> int:
        """Append one batch as the leader (not yet replicated); returns its size."""
        info = self.log.append_as_leader(batch(*values), EPOCH)
        self.replica.appended(info.last_offset + 1, info.size_bytes)
        return info.size_bytes

    def commit(self, high_watermark: int) -> None:
        self.replica.high_watermark_moved(self.log.update_high_watermark(high_watermark))

    async def consume(self, offset: int, *, max_wait_ms: int = 0, min_bytes: int = 1,
                      read_committed: bool = False) -> FetchedPartition:
        (result,) = await self.fetcher.fetch(FetchParams.from_consumer(
            max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
            read_committed=read_committed,
            partitions=[PartitionFetch(TOPIC, 0, offset, 1 << 20, EPOCH)]))
        return result

    async def replicate(self, offset: int, *, broker: int = FOLLOWER, max_wait_ms: int = 0,
                        last_fetched_epoch: int = -1) -> FetchedPartition:
        (result,) = await self.fetcher.fetch(FetchParams.from_follower(
            broker, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
            partitions=[PartitionFetch(TOPIC, 0, offset, 1 << 20, EPOCH,
                                       last_fetched_epoch=last_fetched_epoch)]))
        return result


def with_leadership(tmp: Path, body: Callable[[Leadership], Awaitable[None]]) -> None:
    async def main() -> None:
        disk = DiskExecutor(2)
        leadership = Leadership(tmp, disk)
        try:
            await body(leadership)
        finally:
            leadership.log.close()
            disk.shutdown()

    asyncio.run(main())


def offsets_of(records: bytes) -> int:
    """How many batches ``records`` holds (each test batch is one)."""
    count, view = 0, memoryview(records)
    while view:
        size = int.from_bytes(view[8:12], "big") + 12
        view = view[size:]
        count += 1
    return count


# ---------------------------------------------------------------- params


def test_who_fetches_decides_the_isolation() -> None:
    parts = [PartitionFetch(TOPIC, 0, 0, 100)]
    consumer = FetchParams.from_consumer(max_wait_ms=0, min_bytes=1, max_bytes=100,
                                         read_committed=False, partitions=parts)
    committed = FetchParams.from_consumer(max_wait_ms=0, min_bytes=1, max_bytes=100,
                                          read_committed=True, partitions=parts)
    follower = FetchParams.from_follower(FOLLOWER, max_wait_ms=0, min_bytes=1,
                                         max_bytes=100, partitions=parts)
    assert (consumer.is_from_follower, consumer.isolation) == (
        False, FetchIsolation.HIGH_WATERMARK)
    assert committed.isolation is FetchIsolation.TXN_COMMITTED
    assert (follower.is_from_follower, follower.replica_id, follower.isolation) == (
        True, FOLLOWER, FetchIsolation.LOG_END)
    with pytest.raises(ValueError):
        FetchParams(0, 1, 100, parts, None, FetchIsolation.LOG_END)
    with pytest.raises(ValueError):
        FetchParams(0, 1, 100, parts, FOLLOWER, FetchIsolation.HIGH_WATERMARK)


# ---------------------------------------------------------------- bounds


def test_consumers_read_below_the_high_watermark_followers_to_the_log_end(tmp_path: Path) -> None:
    async def body(leading: Leadership) -> None:
        for value in (b"a", b"b", b"c"):
            leading.append(value)
        leading.commit(1)
        for read_committed in (False, True):
            consumed = await leading.consume(0, read_committed=read_committed)
            assert consumed.error_code == ErrorCode.NONE
            assert offsets_of(consumed.records) == 1
            assert (consumed.high_watermark, consumed.last_stable_offset) == (1, 1)
        replicated = await leading.replicate(0)
        assert replicated.error_code == ErrorCode.NONE
        assert offsets_of(replicated.records) == 3
        assert (replicated.high_watermark, replicated.log_end_offset) == (1, 3)
        assert replicated.diverging_epoch is None

    with_leadership(tmp_path, body)


def test_a_consumer_at_the_high_watermark_gets_nothing_yet(tmp_path: Path) -> None:
    async def body(leading: Leadership) -> None:
        leading.append(b"a")
        consumed = await leading.consume(0)
        assert (consumed.error_code, consumed.records, consumed.high_watermark) == (
            ErrorCode.NONE, b"", 0)

    with_leadership(tmp_path, body)


# ---------------------------------------------------------------- the follower's step


def test_a_follower_fetch_records_its_progress_and_moves_the_high_watermark(tmp_path: Path) -> None:
    async def body(leading: Leadership) -> None:
        leading.append(b"a")
        leading.append(b"b")
        assert leading.log.high_watermark == 0
        caught_up = await leading.replicate(2)
        assert caught_up.records == b""
        assert caught_up.high_watermark == 2 == leading.log.high_watermark
        assert offsets_of((await leading.consume(0)).records) == 2

    with_leadership(tmp_path, body)


def test_a_diverging_follower_gets_where_to_truncate_and_no_records(tmp_path: Path) -> None:
    async def body(leading: Leadership) -> None:
        leading.append(b"a")  # epoch 4 ends at 1 in the leader's log
        diverged = await leading.replicate(3, last_fetched_epoch=EPOCH)
        assert diverged.error_code == ErrorCode.NONE
        assert diverged.diverging_epoch == (EPOCH, 1)
        assert diverged.records == b""
        assert leading.replica.leader_state is not None
        assert leading.replica.leader_state.followers[FOLLOWER].log_end_offset != 3

    with_leadership(tmp_path, body)


def test_a_broker_that_is_no_replica_is_refused(tmp_path: Path) -> None:
    async def body(leading: Leadership) -> None:
        leading.append(b"a")
        refused = await leading.replicate(0, broker=STRANGER)
        assert refused.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert refused.records == b""
        itself = await leading.replicate(0, broker=LEADER)
        assert itself.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    with_leadership(tmp_path, body)


def test_a_stale_leader_epoch_is_fenced_for_both(tmp_path: Path) -> None:
    async def body(leading: Leadership) -> None:
        stale = PartitionFetch(TOPIC, 0, 0, 100, EPOCH - 1)
        for params in (
                FetchParams.from_consumer(max_wait_ms=0, min_bytes=1, max_bytes=100,
                                          read_committed=False, partitions=[stale]),
                FetchParams.from_follower(FOLLOWER, max_wait_ms=0, min_bytes=1, max_bytes=100,
                                          partitions=[stale])):
            (result,) = await leading.fetcher.fetch(params)
            assert result.error_code == ErrorCode.FENCED_LEADER_EPOCH

    with_leadership(tmp_path, body)


# ---------------------------------------------------------------- long poll


def test_an_append_wakes_a_waiting_follower_but_not_a_waiting_consumer(tmp_path: Path) -> None:
    async def body(leading: Leadership) -> None:
        consumer = asyncio.create_task(leading.consume(0, max_wait_ms=10_000))
        follower = asyncio.create_task(leading.replicate(0, max_wait_ms=10_000))
        await asyncio.sleep(0.05)
        assert not consumer.done() and not follower.done()
        leading.append(b"a")
        replicated = await asyncio.wait_for(follower, 5)
        assert offsets_of(replicated.records) == 1
        await asyncio.sleep(0.05)
        assert not consumer.done()  # appended, not committed: nothing a consumer may read
        leading.commit(1)
        consumed = await asyncio.wait_for(consumer, 5)
        assert offsets_of(consumed.records) == 1

    with_leadership(tmp_path, body)


def test_a_consumer_waits_until_min_bytes_are_committed(tmp_path: Path) -> None:
    async def body(leading: Leadership) -> None:
        size = leading.append(b"x" * 100)
        leading.commit(1)
        consumer = asyncio.create_task(leading.consume(1, max_wait_ms=10_000,
                                                       min_bytes=2 * size))
        await asyncio.sleep(0.05)
        leading.append(b"y" * 100)
        leading.commit(2)
        await asyncio.sleep(0.05)
        assert not consumer.done()  # one batch of the two it waits for
        leading.append(b"z" * 100)
        leading.commit(3)
        consumed = await asyncio.wait_for(consumer, 5)
        assert offsets_of(consumed.records) == 2

    with_leadership(tmp_path, body)


def test_a_read_committed_consumer_waits_for_the_last_stable_offset(tmp_path: Path) -> None:
    """Transactional data below the high watermark is not readable by a
    read_committed consumer while its transaction is open: it keeps waiting (an early
    empty answer would make it poll again at once, for every append), and wakes
    when the COMMIT marker moves the last stable offset."""
    async def body(leading: Leadership) -> None:
        waiting = asyncio.create_task(leading.consume(0, max_wait_ms=10_000,
                                                      read_committed=True))
        uncommitted = asyncio.create_task(leading.consume(0, max_wait_ms=10_000))
        await asyncio.sleep(0.05)
        builder = BatchBuilder(producer_id=7, producer_epoch=0, base_sequence=0,
                               transactional=True)
        builder.append(b"in-txn", timestamp=1_700_000_000_000)
        info = leading.log.append_as_leader(builder.build(), EPOCH)
        leading.replica.appended(info.last_offset + 1, info.size_bytes)
        leading.commit(1)
        assert offsets_of((await asyncio.wait_for(uncommitted, 5)).records) == 1
        await asyncio.sleep(0.1)
        assert not waiting.done()  # below the HW, above the LSO: nothing to read yet
        marker = leading.log.append_as_leader(build_end_txn_marker(
            ControlType.COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=0,
            timestamp=1_700_000_000_000), EPOCH, origin=AppendOrigin.COORDINATOR)
        leading.replica.appended(marker.last_offset + 1, marker.size_bytes)
        leading.commit(2)
        consumed = await asyncio.wait_for(waiting, 5)
        assert consumed.last_stable_offset == 2
        assert offsets_of(consumed.records) == 2  # the batch and its marker

    with_leadership(tmp_path, body)
