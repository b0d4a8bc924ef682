"""The byte-rate throttle of replicas a reassignment adds: a token bucket."""

from __future__ import annotations

import pytest

from services.storage.replica_fetcher import ByteRateThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_full_bucket_allows_one_second_of_bytes() -> None:
    clock = Clock()
    throttle = ByteRateThrottle(1000, clock)
    assert throttle.available() == 1000
    clock.now += 10  # idle time does not pile up beyond one second's worth
    assert throttle.available() == 1000


def test_consuming_more_than_available_means_waiting_it_off() -> None:
    clock = Clock()
    throttle = ByteRateThrottle(1000, clock)
    throttle.consume(3000)  # a fetch may overshoot; the debt is paid in time
    assert throttle.available() == -2000
    assert throttle.seconds_until_available() == pytest.approx(2.01)
    clock.now += 2
    assert throttle.available() == pytest.approx(0)
    clock.now += 0.5
    assert throttle.available() == pytest.approx(500)


def test_the_rate_holds_over_many_fetches() -> None:
    clock = Clock()
    throttle = ByteRateThrottle(10_000, clock)
    moved = 0
    for _ in range(1000):  # a fetcher that takes what it may, every 10 ms
        allowance = throttle.available()
        if allowance > 0:
            chunk = int(min(allowance, 4096))
            throttle.consume(chunk)
            moved += chunk
        clock.now += 0.01
    # 10 s at 10,000 B/s, plus the first second's burst at most.
    assert 100_000 <= moved <= 110_000
