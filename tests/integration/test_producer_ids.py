"""Producer-id blocks granted by real controllers from a real etcd (issue 12, point 1).

The callers are transaction coordinator instances registered the way they register
(strand.coordination.ownership: ``txn-coordinators/<id>`` under a lease), asking through
the services' controller client and the ProducerIdManager a transaction coordinator
uses. A SIGKILLed controller's successor continues from ``pid-block``; stale or
unknown callers get nothing; concurrent callers never share an id.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc

from strand.cluster.cache import MetadataCache
from strand.cluster.controller_calls import allocate_producer_ids
from strand.cluster.etcd import EtcdServices, MetadataWatcher, connect
from strand.cluster.model import (
    MAX_PRODUCER_ID,
    CoordinatorRecord,
    ProducerIdBlockRecord,
    ProducerIdsBlock,
)
from strand.coordination.ownership import ShardOwnership, ShardSpace
from strand.coordination.producer_ids import ProducerIdManager
from strand.errors import ErrorCode, StaleBrokerEpochError
from strand.launcher import EtcdServer, ServiceProcess
from strand.v1 import controller_pb2 as pb_ctl
from strand.v1 import controller_pb2_grpc
from tests.support.controllers import KEYS, LEASE_TTL, active_controller, split


@dataclass
class Instance:
    """A coordinator instance as the controller sees it: a live registration."""

    instance_id: str
    cache: MetadataCache
    ownership: ShardOwnership

    @property
    def epoch(self) -> int:
        return self.ownership.epoch

    async def allocate(self) -> ProducerIdsBlock:
        return await allocate_producer_ids(self.cache, self.instance_id, self.epoch)


async def _nothing(shard: int) -> None:
    return None


@contextlib.asynccontextmanager
async def running(endpoint: str) -> AsyncIterator[tuple[EtcdServices, MetadataCache]]:
    etcd = await connect([endpoint])
    cache = MetadataCache(KEYS)
    watcher = MetadataWatcher(etcd, cache)
    await watcher.start()
    try:
        yield etcd, cache
    finally:
        await watcher.stop()
        await etcd.close()


@contextlib.asynccontextmanager
async def instance(etcd: EtcdServices, cache: MetadataCache, instance_id: str,
                   groups: bool = False) -> AsyncIterator[Instance]:
    """A registered transaction coordinator instance (a group coordinator with
    ``groups``), owning no shard: there is no shard count."""
    space = (ShardSpace.groups if groups else ShardSpace.transactions)(KEYS, cache)
    ownership = ShardOwnership(
        etcd, KEYS, cache, CoordinatorRecord(instance_id, "127.0.0.1:1"),
        space, lambda: None, LEASE_TTL, _nothing, _nothing)
    task = asyncio.create_task(ownership.run())
    try:
        async with asyncio.timeout(10):
            while not ownership.epoch or instance_id not in space.instances():
                await asyncio.sleep(0.02)
        yield Instance(instance_id, cache, ownership)
    finally:
        ownership.stop()
        await task


async def ask(address: str, coordinator_id: str,
              epoch: int) -> pb_ctl.AllocateProducerIdsResponse:
    async with grpc.aio.insecure_channel(address) as channel:
        response: pb_ctl.AllocateProducerIdsResponse = await controller_pb2_grpc.ControllerStub(
            channel).AllocateProducerIds(pb_ctl.AllocateProducerIdsRequest(
                coordinator_id=coordinator_id, coordinator_epoch=epoch), timeout=10)
        return response


async def pid_block(etcd: EtcdServices) -> ProducerIdBlockRecord | None:
    response = await etcd.kv.get(KEYS.pid_block)
    return ProducerIdBlockRecord.from_json(response.kvs[0].value) if response.kvs else None


def assert_disjoint(blocks: list[ProducerIdsBlock]) -> None:
    ordered = sorted(blocks, key=lambda b: b.first)
    for earlier, later in itertools.pairwise(ordered):
        assert later.first > earlier.last, f"{earlier} overlaps {later}"


def test_a_new_controller_continues_from_pid_block_after_a_sigkill(
        controllers: list[ServiceProcess], etcd: EtcdServer) -> None:
    active, standby = split(controllers, etcd.endpoint)

    async def scenario() -> tuple[list[ProducerIdsBlock], list[ProducerIdsBlock]]:
        async with running(etcd.endpoint) as (client, cache), \
                instance(client, cache, "txn-a") as txn:
            before = [await txn.allocate() for _ in range(3)]
            refused = await ask(standby.address, "txn-a", txn.epoch)
            assert ErrorCode(refused.error_code) == ErrorCode.NOT_CONTROLLER, refused
            active.kill()  # SIGKILL: no resignation, its lease expires
            after = [await txn.allocate() for _ in range(2)]
            assert cache.controller is not None
            assert cache.controller.address == standby.address
            stored = await pid_block(client)
            assert stored == ProducerIdBlockRecord(after[-1].next_first, "txn-a", txn.epoch)
            return before, after

    before, after = asyncio.run(scenario())
    assert [(b.first, b.size) for b in before] == [(0, 1000), (1000, 1000), (2000, 1000)]
    # The standby continued from the stored pointer: no id again, none skipped.
    assert [(b.first, b.size) for b in after] == [(3000, 1000), (4000, 1000)]
    assert_disjoint(before + after)


def test_stale_unknown_and_bad_callers_are_refused_and_nothing_is_written(
        controllers: list[ServiceProcess], etcd: EtcdServer) -> None:
    record = active_controller(etcd.endpoint)
    assert record is not None
    address = record.address

    async def scenario() -> None:
        async with running(etcd.endpoint) as (client, cache):
            async with instance(client, cache, "txn-b") as txn:
                epoch = txn.epoch
                for who, their_epoch, code in [
                        ("nobody", epoch, ErrorCode.STALE_BROKER_EPOCH),  # not registered
                        ("txn-b", epoch + 1, ErrorCode.STALE_BROKER_EPOCH),  # another lease
                        ("txn-b", 0, ErrorCode.INVALID_REQUEST),
                        ("", epoch, ErrorCode.INVALID_REQUEST),
                        ("../brokers/1", epoch, ErrorCode.INVALID_REQUEST)]:
                    response = await ask(address, who, their_epoch)
                    assert ErrorCode(response.error_code) == code, (who, their_epoch, response)
                    assert response.error_message
                    assert response.count == 0
                # A group coordinator, live under its lease, is no transaction coordinator.
                async with instance(client, cache, "groups-x", groups=True) as group:
                    response = await ask(address, "groups-x", group.epoch)
                    assert ErrorCode(response.error_code) == ErrorCode.STALE_BROKER_EPOCH, \
                        response
                assert await pid_block(client) is None  # nothing granted, nothing written
                assert (await txn.allocate()).first == 0
            # The instance stopped: its lease was revoked, its registration is gone.
            refused = await ask(address, "txn-b", epoch)
            assert ErrorCode(refused.error_code) == ErrorCode.STALE_BROKER_EPOCH, refused
            assert "txn-b" in refused.error_message
            # Registered again (a new incarnation): the old epoch stays refused.
            async with instance(client, cache, "txn-b") as again:
                assert again.epoch != epoch
                refused = await ask(address, "txn-b", epoch)
                assert ErrorCode(refused.error_code) == ErrorCode.STALE_BROKER_EPOCH, refused
                try:
                    await allocate_producer_ids(cache, "txn-b", epoch)
                except StaleBrokerEpochError:
                    pass
                else:
                    raise AssertionError("the client let a stale epoch through")
                assert (await again.allocate()).first == 1000
                assert await pid_block(client) == ProducerIdBlockRecord(2000, "txn-b",
                                                                        again.epoch)
                # Exhaustion: a pointer too close to 2^63 - 1 grants nothing, clearly.
                last = ProducerIdBlockRecord(MAX_PRODUCER_ID - 500)
                await client.kv.put(KEYS.pid_block, last.to_json())
                response = await ask(address, "txn-b", again.epoch)
                assert ErrorCode(response.error_code) == ErrorCode.UNKNOWN_SERVER_ERROR, response
                assert "producer ids exhausted" in response.error_message
                assert await pid_block(client) == last

    asyncio.run(scenario())


def test_concurrent_callers_never_share_an_id(controllers: list[ServiceProcess],
                                              etcd: EtcdServer) -> None:
    async def scenario() -> tuple[list[ProducerIdsBlock], list[list[int]]]:
        async with running(etcd.endpoint) as (client, cache), \
                instance(client, cache, "txn-1") as one, \
                instance(client, cache, "txn-2") as two, \
                instance(client, cache, "txn-3") as three:
            callers = [one, two, three]
            blocks = await asyncio.gather(*(callers[i % 3].allocate() for i in range(30)))
            # Then each instance's manager, 1500 concurrent requests each (two blocks).
            managers = [ProducerIdManager(c.allocate) for c in callers]
            ids = await asyncio.gather(*(asyncio.gather(
                *(m.generate() for _ in range(1500))) for m in managers))
            for manager in managers:
                await manager.close()
            return list(blocks), [list(i) for i in ids]

    blocks, ids = asyncio.run(scenario())
    assert_disjoint(blocks)
    assert sorted(b.first for b in blocks) == list(range(0, 30_000, 1000))
    everything = [pid for per_instance in ids for pid in per_instance]
    assert len(set(everything)) == len(everything) == 4500
    assert min(everything) >= 30_000  # after the blocks granted before
    for per_instance in ids:
        # Each instance used its first block whole before its second one.
        ordered = sorted(per_instance)
        assert ordered[:1000] == list(range(ordered[0], ordered[0] + 1000))
