"""The request-time quota's measure (services/gateway/request_time.py): the CPU time
the gateway's thread spends running a handler, not the time the handler awaits; and
its throttle, which does not add to a byte-rate throttle of the same answer."""

from __future__ import annotations

import asyncio
import time

import pytest

from services.gateway.request_time import run_timed
from services.gateway.throttling import Throttling
from strand.security.quotas import QuotaEntity, QuotaStore, QuotaValues
from tests.unit.gateway.test_throttling import caller


def burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_only_the_handlers_own_cpu_time_counts() -> None:
    async def handler() -> str:
        burn(0.03)
        await asyncio.sleep(0.3)  # waiting on a storage node: not counted
        burn(0.02)
        return "answer"

    async def elsewhere() -> None:  # another task's work meanwhile: not counted either
        await asyncio.sleep(0.05)
        burn(0.1)

    async def main() -> tuple[str, float]:
        other = asyncio.create_task(elsewhere())
        result = await run_timed(handler())
        await other
        return result

    answer, spent = asyncio.run(main())
    assert answer == "answer"
    assert 0.05 <= spent < 0.1


def test_errors_and_cancellation_reach_the_handler() -> None:
    cleaned: list[str] = []

    async def failing() -> None:
        burn(0.01)
        raise ValueError("bad request")

    async def waiting() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.append("cleaned up")

    with pytest.raises(ValueError, match="bad request"):
        asyncio.run(run_timed(failing()))

    async def cancel() -> None:
        task = asyncio.create_task(run_timed(waiting()))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel())
    assert cleaned == ["cleaned up"]


def test_only_clients_with_a_request_quota_are_timed() -> None:
    store = QuotaStore()
    store.put(QuotaEntity(client_id="busy"), QuotaValues(request_percentage=10))
    store.put(QuotaEntity(client_id="bulk"), QuotaValues(producer_byte_rate=1e6))
    throttling = Throttling(store)
    assert throttling.has_request_quota(caller("busy"))
    assert not throttling.has_request_quota(caller("bulk"))
    assert not throttling.has_request_quota(caller("busy", service=True))
    assert not throttling.has_request_quota(None)


def test_a_request_throttle_waits_only_beyond_what_was_already_held() -> None:
    store = QuotaStore()
    store.put(QuotaEntity(client_id="busy"), QuotaValues(request_percentage=1))
    throttling = Throttling(store)

    async def main() -> tuple[int, float]:
        start = time.monotonic()
        # 200 ms of handling against 10 ms/s: throttled by at most one window (1 s).
        throttle_ms = await throttling.throttle(throttling.requests, caller("busy"), 200.0,
                                                already_held_ms=900)
        return throttle_ms, time.monotonic() - start

    throttle_ms, waited = asyncio.run(main())
    assert throttle_ms == 1000
    assert 0.05 <= waited < 0.5  # 1 s less the 900 ms the byte quota already held it
