"""Server-side SCRAM exchanges waiting for their final message.

The two round trips of one SCRAM exchange (first, final) are two independent gRPC
calls, so the gateway keeps its half of the exchange in between under an opaque random
id. Bounded in time (``ttl_s``) and in number (``limit``, the oldest dropped first) so a
flood of first messages cannot grow memory; taking an exchange removes it, so a final
message cannot be played twice against it. Not thread-safe: the gateway runs on one
event loop.
"""

from __future__ import annotations

import math
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["PendingExchanges"]

T = TypeVar("T")


class PendingExchanges(Generic[T]):
    """Server-side exchanges between their first and final message, by an opaque random
    id; each lives at most ttl_s and at most `limit` are kept (the oldest dropped), so a
    flood of first messages cannot grow memory."""

    def __init__(self, ttl_s: float = 30.0, limit: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not (math.isfinite(ttl_s) and ttl_s > 0):
            raise ValueError(f"ttl_s must be a positive number of seconds, not {ttl_s!r}")
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit!r}")
        self.ttl_s = ttl_s
        self.limit = limit
        self._clock = clock
        # Insertion order is deadline order: one ttl for all, and a monotonic clock.
        self._entries: OrderedDict[str, tuple[float, T]] = OrderedDict()

    def add(self, exchange: T) -> str:
        """Keep ``exchange``; its new id (url-safe, unguessable)."""
        now = self._clock()
        self._expire(now)
        while len(self._entries) >= self.limit:
            self._entries.popitem(last=False)
        exchange_id = secrets.token_urlsafe(24)
        self._entries[exchange_id] = (now + self.ttl_s, exchange)
        return exchange_id

    def take(self, exchange_id: str) -> T | None:
        """Remove and return the exchange; None if unknown, already taken or expired."""
        entry = self._entries.pop(exchange_id, None)
        if entry is None:
            return None
        deadline, exchange = entry
        return exchange if self._clock() < deadline else None

    def __len__(self) -> int:
        self._expire(self._clock())
        return len(self._entries)

    def _expire(self, now: float) -> None:
        while self._entries:
            exchange_id = next(iter(self._entries))
            if self._entries[exchange_id][0] > now:
                break
            del self._entries[exchange_id]
