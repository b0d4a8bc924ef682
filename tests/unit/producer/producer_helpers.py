"""Shared helpers of the producer tests (a fake millisecond clock, leader maps, polling)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

TopicPartition = tuple[str, int]


class FakeClock:
    """Milliseconds that move only when a test says so."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, ms: float) -> float:
        self.now += ms
        return self.now


def leaders(mapping: Mapping[TopicPartition, int | None]) -> Callable[[TopicPartition], int | None]:
    """A leader_of function from a dict; partitions not in it have no known leader."""
    return lambda tp: mapping.get(tp)


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll ``condition`` (another thread's progress) until true; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)
