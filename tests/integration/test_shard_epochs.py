"""A coordinator shard's epoch on a real etcd: a counter bumped by one in the very
transaction that takes the shard (not the etcd revision, which outgrows Kafka's
int32 coordinator epoch), shared by group and transaction coordinators."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from strand.cluster.cache import MetadataCache
from strand.cluster.etcd import EtcdServices
from strand.cluster.model import CoordinatorRecord
from strand.coordination.ownership import ShardOwnership, ShardSpace
from strand.launcher import EtcdServer
from tests.integration.test_producer_ids import running
from tests.support.controllers import KEYS, LEASE_TTL

SHARDS = 2


@contextlib.asynccontextmanager
async def owner(etcd: EtcdServices, cache: MetadataCache, instance_id: str,
                groups: bool) -> AsyncIterator[dict[int, int]]:
    """An instance owning every shard; yields the epoch each was taken at."""
    taken: dict[int, int] = {}
    space = (ShardSpace.groups if groups else ShardSpace.transactions)(KEYS, cache)

    async def acquire(shard: int) -> None:
        taken[shard] = ownership.shard_epoch(shard)

    async def release(shard: int) -> None:
        return None

    ownership = ShardOwnership(etcd, KEYS, cache, CoordinatorRecord(instance_id, "h:1"),
                               space, lambda: SHARDS, LEASE_TTL, acquire, release)
    task = asyncio.create_task(ownership.run())
    try:
        async with asyncio.timeout(15):
            while len(taken) < SHARDS or len(space.owners()) < SHARDS:
                await asyncio.sleep(0.02)
        yield taken
    finally:
        ownership.stop()
        await task
        async with asyncio.timeout(15):
            while space.owners():  # released: the next owner may take them
                await asyncio.sleep(0.02)


def test_each_take_over_bumps_the_shard_epoch_by_one(etcd: EtcdServer) -> None:
    async def scenario() -> list[dict[int, int]]:
        seen = []
        async with running(etcd.endpoint) as (client, cache):
            for instance_id in ("a", "b", "a"):
                async with owner(client, cache, instance_id, groups=False) as taken:
                    seen.append(dict(taken))
            # Group shards count their own take-overs.
            async with owner(client, cache, "g", groups=True) as taken:
                seen.append(dict(taken))
            revision = cache.revision
        assert revision > 10  # an etcd revision would not be 1, 2, 3
        return seen

    assert asyncio.run(scenario()) == [{0: 1, 1: 1}, {0: 2, 1: 2}, {0: 3, 1: 3},
                                       {0: 1, 1: 1}]


def test_stop_releases_the_shards_at_once_when_nothing_changes(etcd: EtcdServer) -> None:
    """stop() wakes the idle ownership loop: a coordinator told to stop (SIGTERM) lets
    its shards go at once, not after the loop's next look (up to 5 s later)."""
    async def scenario() -> float:
        async with running(etcd.endpoint) as (client, cache):
            space = ShardSpace.groups(KEYS, cache)
            ownership = ShardOwnership(
                client, KEYS, cache, CoordinatorRecord("quiet", "h:1"), space,
                lambda: SHARDS, LEASE_TTL, lambda shard: asyncio.sleep(0),
                lambda shard: asyncio.sleep(0))
            task = asyncio.create_task(ownership.run())
            async with asyncio.timeout(15):
                while len(ownership.owned) < SHARDS or len(space.owners()) < SHARDS:
                    await asyncio.sleep(0.02)
            await asyncio.sleep(1.0)  # the loop idle, waiting for a change
            started = asyncio.get_running_loop().time()
            ownership.stop()
            async with asyncio.timeout(15):
                await task
            return asyncio.get_running_loop().time() - started

    assert asyncio.run(scenario()) < 1.5


def test_a_lost_lease_ends_a_pass_stuck_in_a_load(etcd: EtcdServer) -> None:
    """A shard whose load never ends (its writer fenced, its partition unreadable)
    must not keep the instance from seeing its lease lost: it drops its shards and
    registers again under a new lease (a fault run once left a transaction
    coordinator unregistered for good this way)."""
    async def scenario() -> tuple[int, set[int]]:
        async with running(etcd.endpoint) as (client, cache):
            space = ShardSpace.transactions(KEYS, cache)
            loads: list[tuple[int, int]] = []  # (lease, shard)

            async def acquire(shard: int) -> None:
                loads.append((ownership.epoch, shard))
                if len(loads) == 1:
                    await asyncio.Event().wait()  # this load never ends

            ownership = ShardOwnership(
                client, KEYS, cache, CoordinatorRecord("stuck", "h:1"), space,
                lambda: SHARDS, LEASE_TTL, acquire, lambda shard: asyncio.sleep(0))
            task = asyncio.create_task(ownership.run())
            try:
                async with asyncio.timeout(15):
                    while not loads:
                        await asyncio.sleep(0.02)
                first = loads[0][0]
                await client.lease.revoke(first)
                async with asyncio.timeout(20):
                    while {s for lease, s in loads if lease not in (0, first)} != {0, 1}:
                        await asyncio.sleep(0.02)
                return first, {lease for lease, _ in loads[1:]}
            finally:
                ownership.stop()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(task, 10)  # cancelled if still stuck

    first, later = asyncio.run(scenario())
    assert first not in later  # taken again under the new lease only
