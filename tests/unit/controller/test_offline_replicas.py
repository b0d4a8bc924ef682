"""A broker listing a replica as offline in its registration (its disk cannot take
writes) loses that partition's leadership to an in-sync replica and leaves its ISR,
without being taken for a restart (its other partitions stay as they are); it may
not rejoin the ISR until it lists the replica no more (issue 11, point 4)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import cast

import pytest

from services.controller.failover import PartitionStateKeeper
from services.controller.leadership import IsrChange
from services.controller.writer import MetadataWriter
from strand.cluster.cache import MetadataCache
from strand.cluster.keys import KeySpace
from strand.cluster.model import BrokerRegistration, PartitionRecord, TopicRecord
from strand.errors import IneligibleReplicaError

KEYS = KeySpace("test")


class _Writer:
    """Applies the controller's partition writes straight to the cache."""

    def __init__(self, cache: MetadataCache) -> None:
        self.cache = cache
        self.revision = 1000

    async def update_partition(self, record: PartitionRecord, expected_revision: int) -> int:
        self.revision += 1
        self.cache.apply(KEYS.partition(record.topic, record.partition), record.to_json(),
                         revision=self.revision)
        return self.revision


def _register(cache: MetadataCache, registration: BrokerRegistration, revision: int) -> None:
    cache.apply(KEYS.broker(registration.node_id), registration.to_json(), revision=revision)


@pytest.fixture
def cache() -> MetadataCache:
    metadata = MetadataCache(KEYS)
    for node in (1, 2, 3):
        _register(metadata, BrokerRegistration(node, "127.0.0.1", 9000 + node, epoch=node * 7),
                  revision=node)
    for topic in ("full", "fine"):
        metadata.apply(KEYS.topic(topic), TopicRecord(topic, topic, 1, 3).to_json(), revision=10)
        metadata.apply(KEYS.partition(topic, 0), PartitionRecord(
            topic, 0, (1, 2, 3), leader=1, leader_epoch=0, isr=(1, 2, 3)).to_json(), revision=11)
    return metadata


def test_registration_round_trips_its_offline_replicas() -> None:
    registration = BrokerRegistration(1, "h", 1, epoch=5, offline_replicas=(("t", 0),))
    assert BrokerRegistration.from_json(registration.to_json()) == registration
    assert b"offline" not in BrokerRegistration(1, "h", 1).to_json()


def test_an_offline_replica_loses_leadership_and_cannot_rejoin_until_unlisted(
        cache: MetadataCache) -> None:
    async def scenario() -> None:
        keeper = PartitionStateKeeper(cache, asyncio.Lock())
        writer = cast(MetadataWriter, _Writer(cache))
        await keeper.react_to_brokers(writer)  # first look: nothing to change
        node1 = cache.brokers[1]
        # The node re-puts its own registration (same lease, same epoch).
        _register(cache, dataclasses.replace(node1, offline_replicas=(("full", 0),)), 20)
        await keeper.react_to_brokers(writer)
        full, fine = cache.partitions[("full", 0)], cache.partitions[("fine", 0)]
        assert (full.leader, full.isr, full.leader_epoch) == (2, (2, 3), 1)
        assert (fine.leader, fine.isr) == (1, (1, 2, 3))  # not taken for a restart

        back = IsrChange(2, full.leader_epoch, full.partition_epoch, (2, 3, 1))
        with pytest.raises(IneligibleReplicaError):
            await keeper.alter_isr(writer, "full", 0, back)
        _register(cache, node1, 21)  # recovered: unlisted
        rejoined = await keeper.alter_isr(writer, "full", 0, back)
        assert rejoined.isr == (1, 2, 3)

    asyncio.run(scenario())
