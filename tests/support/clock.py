"""A clock that moves only when a test says so."""

from __future__ import annotations


class FakeClock:
    """Milliseconds (an int, as the log's clock is); call it for the time."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> int:
        self.now_ms += ms
        return self.now_ms
