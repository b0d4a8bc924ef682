"""A coordinator that lost its shard cannot write to it any more
(strand.coordination.shard_fence, shard_log): the new owner's fence makes the
partition refuse the old owner's batches, whatever the old owner still has on its
way, and the old writer reports itself lost so its process gives the shard up.
Against a real cluster, with two writers for one shard as two owners would have."""

from __future__ import annotations

import asyncio

import pytest

from strand import Admin, NewTopic
from strand.client.channel import AioChannels
from strand.cluster.gateway_calls import GatewayProducer
from strand.coordination.shard_fence import EPOCHS_PER_ID, shard_writer_ids
from strand.coordination.shard_log import GatewayShardLog, Record
from strand.errors import NotCoordinatorError
from tests.support.cluster import SdkCluster


def _writer(cluster: SdkCluster, gateway: GatewayProducer, topic: str, epoch: int,
            lost: list[int]) -> GatewayShardLog:
    writer, previous = shard_writer_ids("groups", 0, epoch)
    return GatewayShardLog(gateway, cluster.bootstrap, topic, 0, writer, previous,
                           on_lost=lambda: lost.append(epoch))


def _records(*names: bytes) -> list[Record]:
    return [Record(b'{"k": "%s"}' % name, name) for name in names]


@pytest.mark.parametrize("epochs", [(1, 2), (EPOCHS_PER_ID - 1, EPOCHS_PER_ID)],
                         ids=["same-id", "generation-switch"])
def test_the_new_owner_fences_the_old_one(sdk_cluster: SdkCluster,
                                          epochs: tuple[int, int]) -> None:
    topic = f"fenced-shard-{epochs[0]}"
    with Admin(sdk_cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    old_epoch, new_epoch = epochs

    async def scenario() -> None:
        channels = AioChannels("test")
        gateway = GatewayProducer(channels, sdk_cluster.bootstrap)
        lost: list[int] = []
        old = _writer(sdk_cluster, gateway, topic, old_epoch, lost)
        try:
            assert await old.read_all() == []
            await old.append(_records(b"a", b"b"))
            await old.append(_records(b"c"))

            new = _writer(sdk_cluster, gateway, topic, new_epoch, lost)
            loaded = await new.read_all()  # fences first, then loads all before it
            assert [v for _, v in loaded] == [b"a", b"b", b"c"]

            with pytest.raises(NotCoordinatorError, match="newer owner has fenced"):
                await old.append(_records(b"late"))
            assert lost == [old_epoch]
            with pytest.raises(NotCoordinatorError):  # and stays lost, without a call
                await old.append(_records(b"later"))

            await asyncio.gather(new.append(_records(b"d")), new.append(_records(b"e")))
            again = _writer(sdk_cluster, gateway, topic, new_epoch + 1, lost)
            assert sorted(v or b"" for _, v in await again.read_all()) == [
                b"a", b"b", b"c", b"d", b"e"]
            assert lost == [old_epoch]
        finally:
            await channels.close()

    asyncio.run(scenario())
