"""The order and the length of the waits a throttled client sees at the gateway
(services/gateway/throttling.py), on asyncio's own scheduler with a simulated clock
(waiting for the next timer moves the clock to it): requests queued on one meter are
admitted in arrival order; what one request is held is bounded by the quota's window,
and its answer says how long; a request that gives up leaves the line."""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from services.gateway.access import Caller
from services.gateway.throttling import Throttling
from strand.security.principal import Principal
from strand.security.quotas import QuotaEntity, QuotaStore, QuotaValues

T = TypeVar("T")
QUOTA = 1_000_000.0  # bytes per second
FULL_WINDOW_S = 11.0  # the meter's 11 windows of 1 s


class SimulatedClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _FastForward(selectors.DefaultSelector):
    """Instead of blocking until the next timer, moves the clock to it."""

    def __init__(self, clock: SimulatedClock) -> None:
        super().__init__()
        self.clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise RuntimeError("every task waits and no timer is set: a deadlock")
        self.clock.now += max(timeout, 0.0)
        return super().select(0)


class _SimulatedLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: SimulatedClock) -> None:
        super().__init__(_FastForward(clock))
        self._simulated = clock

    def time(self) -> float:
        return self._simulated.now


def run(clock: SimulatedClock, main: Callable[[], Awaitable[T]]) -> T:
    async def wrapped() -> T:
        return await main()

    with asyncio.Runner(loop_factory=lambda: _SimulatedLoop(clock)) as runner:
        return runner.run(wrapped())


def throttled_client() -> tuple[Throttling, Caller, SimulatedClock]:
    store = QuotaStore()
    store.put(QuotaEntity(client_id="etl"), QuotaValues(producer_byte_rate=QUOTA))
    clock = SimulatedClock()
    caller = Caller(Principal("User", "ANONYMOUS"), "10.0.0.1", False, "etl")
    return Throttling(store, clock), caller, clock


def test_requests_waiting_on_a_throttle_are_admitted_in_arrival_order() -> None:
    """A producer's pipelined requests (one partition's batches, in sequence) wait on
    its throttle; they must reach storage in the order they came, one per turn."""
    throttling, caller, clock = throttled_client()
    admitted: list[tuple[int, float]] = []

    async def request(number: int) -> None:
        await throttling.admit(throttling.produce, caller, 100_000)
        admitted.append((number, clock.now))

    async def main() -> None:
        await throttling.admit(throttling.produce, caller, 12 * QUOTA)  # over its quota
        requests = []
        for number in range(15):
            requests.append(asyncio.create_task(request(number)))
            await asyncio.sleep(0.013)
        await asyncio.gather(*requests)

    run(clock, main)
    assert [number for number, _ in admitted] == list(range(15))
    times = [at for _, at in admitted]
    assert times == sorted(times) and times[0] > 1.0  # each after the throttle before it
    assert len(throttling.turns) == 0


def test_a_burst_is_held_at_most_the_full_window_and_its_answer_says_so() -> None:
    """A request of 200 s worth of quota (Kafka's throttle: 190 s), after a long idle
    time: its answer is held the meter's whole span, 11 s, and says 11000 ms; the
    next request waits for that throttle only, and is throttled for its own bytes."""
    throttling, caller, clock = throttled_client()
    seen: dict[str, float] = {}

    async def main() -> None:
        await throttling.admit(throttling.produce, caller, 1.0)
        await asyncio.sleep(3600.0 - 1.0)  # idle: the meter's windows are all dropped
        start = clock.now
        admission = await throttling.admit(throttling.produce, caller, 200 * QUOTA)
        seen["first_ms"] = await throttling.hold(admission)
        seen["first_held"] = clock.now - start
        start = clock.now
        admission = await throttling.admit(throttling.produce, caller, 12 * QUOTA)
        seen["second_wait"] = clock.now - start
        seen["second_ms"] = await throttling.hold(admission)
        seen["second_total"] = clock.now - start

    run(clock, main)
    assert seen["first_held"] == pytest.approx(FULL_WINDOW_S)
    assert seen["first_ms"] == 11_000
    assert seen["second_wait"] == pytest.approx(0.0)  # the first throttle was held
    assert seen["second_ms"] == pytest.approx(2000, abs=1)  # (1.2 - 1) / 1 * 10 s
    assert seen["second_total"] == pytest.approx(seen["second_ms"] / 1000, abs=0.001)


def test_a_request_that_gives_up_leaves_the_line() -> None:
    """A client's deadline passes while its request waits its turn: the request is
    not metered, the ones behind it move up, and no line is left behind."""
    throttling, caller, clock = throttled_client()
    admitted: list[str] = []

    async def request(name: str) -> None:
        await throttling.admit(throttling.produce, caller, 100_000)
        admitted.append(name)

    async def main() -> Any:
        await throttling.admit(throttling.produce, caller, 12 * QUOTA)
        first = asyncio.create_task(request("first"))
        await asyncio.sleep(0.01)
        impatient = asyncio.create_task(asyncio.wait_for(request("impatient"), 0.5))
        await asyncio.sleep(0.01)
        last = asyncio.create_task(request("last"))
        return await asyncio.gather(first, impatient, last, return_exceptions=True)

    results = run(clock, main)
    assert isinstance(results[1], TimeoutError)
    assert admitted == ["first", "last"]
    assert len(throttling.turns) == 0


def test_fetches_wait_their_turn_in_order_too() -> None:
    """A consumer's fetches (metered when answered) wait for its throttle in the
    order they came as well."""
    store = QuotaStore()
    store.put(QuotaEntity(client_id="etl"), QuotaValues(consumer_byte_rate=QUOTA))
    clock = SimulatedClock()
    throttling = Throttling(store, clock)
    caller = Caller(Principal("User", "ANONYMOUS"), "10.0.0.1", False, "etl")
    served: list[int] = []

    async def fetch(number: int) -> None:
        await throttling.wait_turn(throttling.fetch, caller)
        served.append(number)
        await throttling.throttle(throttling.fetch, caller, 200_000)

    async def main() -> None:
        assert await throttling.throttle(throttling.fetch, caller, 12 * QUOTA) > 0
        fetches = []
        for number in range(8):
            fetches.append(asyncio.create_task(fetch(number)))
            await asyncio.sleep(0.007)
        await asyncio.gather(*fetches)

    run(clock, main)
    assert served == list(range(8))
    assert len(throttling.turns) == 0
