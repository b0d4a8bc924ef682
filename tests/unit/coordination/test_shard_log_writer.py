"""The shard writer (strand.coordination.shard_log.GatewayShardLog) without a
cluster: concurrent appends are gathered into batches in order, a retry keeps its
sequence, and nothing ever waits for ever — an unexpected failure or an unanswered
write makes the writer lost, and every waiting and later append fails with
NOT_COORDINATOR."""

from __future__ import annotations

import asyncio

import pytest

from strand.coordination.shard_fence import shard_writer_ids
from strand.coordination.shard_log import GatewayShardLog, Record
from strand.errors import NotCoordinatorError, NotEnoughReplicasError, StrandError
from strand.records.batch import iter_batches
from strand.records.reader import RecordBatch

WRITER, _ = shard_writer_ids("groups", 0, 3)


class Gateway:
    """Answers each Produce with the next scripted outcome (None: written)."""

    def __init__(self, *outcomes: StrandError | BaseException | None) -> None:
        self.outcomes = list(outcomes)
        self.batches: list[bytes] = []

    async def produce(self, topic: str, partition: int, batch: bytes,
                      timeout_ms: int) -> StrandError | None:
        self.batches.append(batch)
        await asyncio.sleep(0.01)
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if isinstance(outcome, BaseException) and not isinstance(outcome, StrandError):
            raise outcome
        return outcome


def _log(gateway: Gateway, lost: list[int], timeout_s: float = 5) -> GatewayShardLog:
    return GatewayShardLog(gateway, "unused:1", "t", 0, WRITER,  # type: ignore[arg-type]
                           on_lost=lambda: lost.append(1), write_timeout_s=timeout_s)


def _sequences(gateway: Gateway) -> list[tuple[int, int]]:
    out = []
    for raw in gateway.batches:
        ((_, header),) = iter_batches(raw)
        out.append((header.base_sequence, header.record_count))
    return out


def test_appends_are_batched_in_order_and_retries_keep_their_sequence() -> None:
    async def scenario() -> None:
        gateway = Gateway(None, NotEnoughReplicasError("isr"), None)
        lost: list[int] = []
        log = _log(gateway, lost)
        await log.append([Record(b"a", b"1")])
        await asyncio.gather(*(log.append([Record(b"k%d" % i, b"v")]) for i in range(3)))
        # the first, then the three gathered into one batch, refused once and retried
        assert _sequences(gateway) == [(0, 1), (1, 3), (1, 3)]
        assert gateway.batches[1] == gateway.batches[2] and not lost

    asyncio.run(scenario())


def _keys(gateway: Gateway) -> list[list[bytes | None]]:
    out = []
    for raw in gateway.batches:
        out.append([record.key for record in RecordBatch(raw).records()])
    return out


def test_a_held_append_waits_for_the_next_one_and_shares_its_write() -> None:
    """A coordinator that knows another record follows at once (a completion some
    request waits for) holds its record: one write, in append order."""
    async def scenario() -> None:
        gateway = Gateway()
        log = _log(gateway, [])
        held = asyncio.ensure_future(log.append([Record(b"first", b"1")], hold_s=5))
        await asyncio.sleep(0.02)
        assert gateway.batches == []  # held
        async with asyncio.timeout(1):  # the next append ends the hold, not the 5 s
            await asyncio.gather(held, log.append([Record(b"second", b"2")]))
        assert _keys(gateway) == [[b"first", b"second"]]
        assert _sequences(gateway) == [(0, 2)]

    asyncio.run(scenario())


def test_a_hold_nobody_joins_ends_after_its_time() -> None:
    async def scenario() -> None:
        gateway = Gateway()
        log = _log(gateway, [])
        async with asyncio.timeout(1):
            await log.append([Record(b"alone", b"1")], hold_s=0.05)
        assert _keys(gateway) == [[b"alone"]]

    asyncio.run(scenario())


def test_an_unexpected_failure_loses_the_writer_instead_of_hanging() -> None:
    async def scenario() -> None:
        gateway = Gateway(RuntimeError("boom"))
        lost: list[int] = []
        log = _log(gateway, lost)
        async with asyncio.timeout(5):
            results = await asyncio.gather(log.append([Record(b"a", b"1")]),
                                           log.append([Record(b"b", b"2")]),
                                           return_exceptions=True)
        assert all(isinstance(r, NotCoordinatorError) for r in results), results
        assert lost == [1]
        with pytest.raises(NotCoordinatorError, match="unexpectedly"):
            await log.append([Record(b"c", b"3")])

    asyncio.run(scenario())


def test_a_write_unanswered_past_its_deadline_loses_the_writer() -> None:
    async def scenario() -> None:
        gateway = Gateway(*[NotEnoughReplicasError("isr")] * 100)
        lost: list[int] = []
        log = _log(gateway, lost, timeout_s=0.3)
        with pytest.raises(NotCoordinatorError, match="outcome is unknown"):
            await log.append([Record(b"a", b"1")])
        assert lost == [1]

    asyncio.run(scenario())
