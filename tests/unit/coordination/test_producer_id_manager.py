"""The coordinator's ProducerIdManager against a fake controller: ids in order, no
duplicate and no gap inside a block under many concurrent callers, the next block
prefetched at 90 %, failures reported and retried, a non-monotonic block refused."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

import pytest

from strand.cluster.model import ProducerIdsBlock
from strand.coordination.producer_ids import ProducerIdManager
from strand.errors import NotControllerError, StaleBrokerEpochError, UnknownServerError


class FakeController:
    """Grants the given blocks in order; records how many ids the manager had handed
    out at each request; optional delay, and failures by call number (from 1)."""

    def __init__(self, blocks: Iterable[ProducerIdsBlock], delay: float = 0.0) -> None:
        self.blocks = list(blocks)
        self.delay = delay
        self.failures: dict[int, Exception] = {}
        self.calls = 0
        self.handed_out_at_call: list[int] = []
        self.handed_out = 0

    async def fetch(self) -> ProducerIdsBlock:
        self.calls += 1
        self.handed_out_at_call.append(self.handed_out)
        await asyncio.sleep(self.delay)
        if self.calls in self.failures:
            raise self.failures[self.calls]
        return self.blocks.pop(0)


def contiguous(first: int, size: int, count: int) -> list[ProducerIdsBlock]:
    return [ProducerIdsBlock(first + i * size, size) for i in range(count)]


async def _take(manager: ProducerIdManager, controller: FakeController, n: int) -> list[int]:
    ids = []
    for _ in range(n):
        ids.append(await manager.generate())
        controller.handed_out += 1
    return ids


def test_ids_come_in_order_across_blocks() -> None:
    controller = FakeController(contiguous(0, 10, 5))

    async def run() -> list[int]:
        return await _take(ProducerIdManager(controller.fetch), controller, 35)

    assert asyncio.run(run()) == list(range(35))


def test_the_next_block_is_fetched_once_90_percent_is_used() -> None:
    controller = FakeController(contiguous(0, 100, 3), delay=0.001)

    async def run() -> None:
        manager = ProducerIdManager(controller.fetch)
        await _take(manager, controller, 89)
        await asyncio.sleep(0.01)
        assert controller.calls == 1  # 89 % used: not yet
        await _take(manager, controller, 1)
        await asyncio.sleep(0.01)
        assert controller.calls == 2  # the 90th id asked for the next block
        await _take(manager, controller, 10)
        assert controller.calls == 2  # the block ran out with the next one already here
        assert await manager.generate() == 100

    asyncio.run(run())
    assert controller.handed_out_at_call == [0, 90]


def test_concurrent_callers_get_every_id_of_each_block_once() -> None:
    # Blocks with holes between them (other coordinators' blocks): inside each block
    # every id is handed out, in order, before the next block is used.
    blocks = [ProducerIdsBlock(first, 100) for first in (0, 300, 1000, 5000, 9000, 20000)]
    controller = FakeController(blocks, delay=0.002)

    async def run() -> list[int]:
        manager = ProducerIdManager(controller.fetch)
        return await asyncio.gather(*(manager.generate() for _ in range(450)))

    ids = asyncio.run(run())
    assert len(set(ids)) == len(ids) == 450
    granted = [pid for block in blocks for pid in range(block.first, block.last + 1)]
    assert sorted(ids) == granted[:450]
    assert controller.calls <= 6


def test_a_failed_fetch_is_raised_to_the_waiting_callers_and_retried() -> None:
    controller = FakeController(contiguous(0, 10, 2), delay=0.001)
    controller.failures = {1: NotControllerError("deposed")}

    async def run() -> None:
        manager = ProducerIdManager(controller.fetch)
        results = await asyncio.gather(*(manager.generate() for _ in range(3)),
                                       return_exceptions=True)
        assert all(isinstance(r, NotControllerError) for r in results), results
        assert controller.calls == 1  # the waiters shared one request
        assert await manager.generate() == 0

    asyncio.run(run())


def test_a_failed_prefetch_is_logged_and_retried_after_the_backoff(
        caplog: pytest.LogCaptureFixture) -> None:
    controller = FakeController(contiguous(0, 10, 2))
    controller.failures = {2: StaleBrokerEpochError("registered again")}
    now = [0.0]

    async def run() -> None:
        manager = ProducerIdManager(controller.fetch, retry_backoff_s=5.0, clock=lambda: now[0])
        await _take(manager, controller, 9)  # the 9th id starts the prefetch, which fails
        await asyncio.sleep(0.01)
        assert controller.calls == 2
        assert "could not fetch a block" in caplog.text
        assert await manager.generate() == 9  # the block still serves; no retry yet
        assert controller.calls == 2
        now[0] = 6.0  # past the backoff: the block is used up, the caller waits for one
        assert await manager.generate() == 10
        assert controller.calls == 3

    with caplog.at_level(logging.WARNING):
        asyncio.run(run())


def test_a_block_that_does_not_follow_the_last_is_refused(
        caplog: pytest.LogCaptureFixture) -> None:
    controller = FakeController([ProducerIdsBlock(1000, 10), ProducerIdsBlock(1005, 10),
                                 ProducerIdsBlock(0, 10), ProducerIdsBlock(2000, 10)])

    async def run() -> list[int]:
        manager = ProducerIdManager(controller.fetch, retry_backoff_s=0.0)
        ids = await _take(manager, controller, 10)
        await asyncio.sleep(0.01)  # the prefetch got 1005..1014: refused
        # The block is used up: a caller waits for the next fetch, which is refused too.
        with pytest.raises(UnknownServerError, match="ids must never repeat"):
            await manager.generate()
        return ids + await _take(manager, controller, 2)

    with caplog.at_level(logging.WARNING):
        assert asyncio.run(run()) == [*range(1000, 1010), 2000, 2001]
    assert any("1005..1014" in getattr(r, "error", "") for r in caplog.records)


def test_a_caller_giving_up_does_not_cancel_the_fetch_others_wait_for() -> None:
    controller = FakeController(contiguous(0, 10, 1), delay=0.05)

    async def run() -> None:
        manager = ProducerIdManager(controller.fetch)
        impatient = asyncio.create_task(manager.generate())
        patient = asyncio.create_task(manager.generate())
        await asyncio.sleep(0.01)
        impatient.cancel()
        assert await patient == 0
        assert controller.calls == 1
        assert await manager.generate() == 1

    asyncio.run(run())


def test_close_stops_a_fetch_under_way() -> None:
    controller = FakeController(contiguous(0, 10, 1), delay=10)

    async def run() -> None:
        manager = ProducerIdManager(controller.fetch)
        waiter = asyncio.create_task(manager.generate())
        await asyncio.sleep(0.01)
        await manager.close()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    asyncio.run(run())
