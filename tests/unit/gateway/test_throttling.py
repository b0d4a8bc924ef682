"""The gateway's throttling (services/gateway/throttling.py) on a simulated clock: a
client over its quota is held back to it whatever the number of its concurrent
requests; its answers carry the throttle; services and unquoted clients pass."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from services.gateway.access import Caller
from services.gateway.throttling import Throttling
from strand.security.principal import Principal
from strand.security.quotas import QuotaEntity, QuotaStore, QuotaValues

QUOTA = 1_000_000.0
REQUEST = 100_000


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    """asyncio.sleep advances the simulated clock (sleepers wake in time order)."""
    fake = Clock()
    real_sleep = asyncio.sleep
    wakeups: list[float] = []

    async def sleep(seconds: float) -> None:
        wake = fake.now + seconds
        wakeups.append(wake)
        while min(wakeups) < wake or fake.now < wake:
            if min(wakeups) >= wake:
                fake.now = wake
                break
            await real_sleep(0)
        wakeups.remove(wake)

    monkeypatch.setattr("services.gateway.throttling.asyncio.sleep", sleep)
    yield fake


def quota_on(client_id: str) -> QuotaStore:
    store = QuotaStore()
    store.put(QuotaEntity(client_id=client_id), QuotaValues(producer_byte_rate=QUOTA))
    return store


def caller(client_id: str, service: bool = False) -> Caller:
    return Caller(Principal("User", "ANONYMOUS"), "10.0.0.1", service, client_id)


async def produce_for(throttling: Throttling, who: Caller, clock: Clock, seconds: float,
                      concurrent: int) -> tuple[int, int]:
    """(bytes answered, throttled answers) of ``concurrent`` request loops."""
    answered, throttled = 0, 0

    async def loop() -> None:
        nonlocal answered, throttled
        while clock.now < seconds:
            admission = await throttling.admit(throttling.produce, who, REQUEST)
            throttle_ms = await throttling.hold(admission)
            answered += REQUEST
            throttled += throttle_ms > 0
            await asyncio.sleep(0.001)  # the produce itself

    await asyncio.gather(*(loop() for _ in range(concurrent)))
    return answered, throttled


@pytest.mark.parametrize("concurrent", [1, 3, 8])
def test_a_client_is_held_to_its_quota_whatever_its_concurrency(
        clock: Clock, concurrent: int) -> None:
    throttling = Throttling(quota_on("etl"), clock)
    answered, throttled = asyncio.run(produce_for(throttling, caller("etl"), clock, 120,
                                                  concurrent))
    # the first 11 windows let a burst through (Kafka's too); the long run is the quota
    assert 0.95 <= answered / 120 / QUOTA <= 1.12
    assert throttled > 0


def test_others_and_services_are_not_throttled(clock: Clock) -> None:
    throttling = Throttling(quota_on("etl"), clock)
    for who in (caller("other"), caller("etl", service=True)):
        answered, throttled = asyncio.run(produce_for(throttling, who, clock,
                                                      clock.now + 5, 2))
        assert throttled == 0 and answered / 5 > 10 * QUOTA


def test_no_quota_at_all_costs_nothing(clock: Clock) -> None:
    throttling = Throttling(QuotaStore(), clock)
    admission = asyncio.run(throttling.admit(throttling.produce, caller("etl"), 1e12))
    assert admission.throttle_s == 0 and len(throttling.produce) == 0
