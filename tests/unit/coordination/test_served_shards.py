"""Taking a shard over (strand.coordination.serving.ServedShards.acquire): a load that
fails is retried (the shard's partition may be moving), but one refused because a
newer owner has fenced this take-over's writer gives the shard up at once. Retried,
it would fail for ever, and the ownership pass waiting on it would never see its
lease lost (seen in a fault run: a transaction coordinator that never registered
again)."""

from __future__ import annotations

import asyncio

from strand.cluster.cache import MetadataCache
from strand.cluster.keys import KeySpace
from strand.coordination.serving import ServedShards
from strand.errors import NotCoordinatorError, NotEnoughReplicasError


class Shard:
    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.loads = 0
        self.started = False

    async def load(self) -> None:
        self.loads += 1
        if self.failures:
            raise self.failures.pop(0)

    def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.started = False


def acquire(shard: Shard) -> ServedShards[Shard]:
    served: ServedShards[Shard] = ServedShards(MetadataCache(KeySpace("t")), "__transaction_state")

    async def scenario() -> None:
        async with asyncio.timeout(10):
            await served.acquire(2, shard, asyncio.Event())

    asyncio.run(scenario())
    return served


def test_a_load_that_fails_is_retried_then_served() -> None:
    shard = Shard([NotEnoughReplicasError("ISR too small")])
    served = acquire(shard)
    assert shard.loads == 2 and shard.started
    assert served.shards == {2: shard} and served.loading == set()


def test_a_fenced_writer_gives_the_shard_up_without_retrying() -> None:
    shard = Shard([NotCoordinatorError("a newer owner has fenced this one")] * 5)
    served = acquire(shard)
    assert shard.loads == 1 and not shard.started
    assert served.shards == {} and served.loading == set()
