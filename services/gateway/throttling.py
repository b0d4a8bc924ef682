"""Client quotas at the gateway (Kafka's ClientQuotaManager): the bytes a client
produces and fetches are metered per user and client id, and a client over its
quota is throttled, not refused: its response is delayed by the throttle time (and
carries it, ``throttle_time_ms``), and its next request waits until the throttle
ends (Kafka mutes the connection meanwhile). The cluster's services are never
throttled. Each gateway meters what it serves, as each Kafka broker does.

A produce request's bytes are known when it arrives, so it is metered then
(:meth:`Throttling.admit`): requests of one client that were waiting for the same
throttle to end are admitted one after the other, each seeing the bytes of the one
before (metered only when answered, concurrent requests would all pass the check
together and push the client past its quota in bursts, then below it). A fetch's
bytes are known when it is answered (:meth:`Throttling.throttle`).

The requests waiting on one meter's throttle take their turns in arrival order (a
queue per meter, :class:`_Turns`), as Kafka serves a muted connection's requests in
order once it unmutes. Left to the event loop's timers, the waiters woken together
would pass in any order: a producer's pipelined batches of one partition would reach
the storage node out of sequence (refused, resent and charged again), and a request
could lose the draw again and again, held past its request and delivery timeouts
however short each throttle. Each throttle is bounded (ClientQuotas.max_throttle_s),
and an answer's ``throttle_time_ms`` is the throttle it was held for."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from services.gateway.access import Caller
from strand.security.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotas,
    QuotaStore,
)

__all__ = ["Admission", "Throttling"]


@dataclass(frozen=True, slots=True)
class Admission:
    """A request admitted: its throttle (s) and when its answer may leave."""

    throttle_s: float = 0.0
    until: float = 0.0


@dataclass(slots=True)
class _Line:
    """The requests queued on one meter: asyncio's Lock wakes its waiters first in,
    first out, and lets no newcomer pass a waiter."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    queued: int = 0


class _Turns:
    """A first-in, first-out line per meter; a line is dropped once empty, so idle
    clients cost nothing (and no lock outlives the event loop it was used on)."""

    def __init__(self) -> None:
        self._lines: dict[Hashable, _Line] = {}

    @asynccontextmanager
    async def turn(self, key: Hashable) -> AsyncIterator[None]:
        """Inside: this request's turn, every request queued before it on ``key``
        having had its own."""
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = _Line()
        line.queued += 1
        try:
            async with line.lock:
                yield
        finally:
            line.queued -= 1
            if line.queued == 0:
                del self._lines[key]

    def __len__(self) -> int:
        """How many lines have requests in them."""
        return len(self._lines)


class Throttling:
    def __init__(self, store: QuotaStore, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.clock = clock
        self.produce = ClientQuotas(store, PRODUCER_BYTE_RATE, clock)
        self.fetch = ClientQuotas(store, CONSUMER_BYTE_RATE, clock)
        # Request handling time (services.gateway.request_time).
        self.requests = ClientQuotas(store, REQUEST_PERCENTAGE, clock)
        self.turns = _Turns()

    def _applies(self, caller: Caller | None) -> bool:
        return caller is not None and not caller.service and len(self.store) > 0

    def has_request_quota(self, caller: Caller | None) -> bool:
        """Whether a request_percentage quota applies to ``caller`` (only then are its
        requests timed)."""
        return (caller is not None and self._applies(caller) and self.store.resolve(
            caller.principal.name, caller.client_id, REQUEST_PERCENTAGE) is not None)

    @asynccontextmanager
    async def _turn(self, quotas: ClientQuotas, caller: Caller) -> AsyncIterator[None]:
        """Inside: the caller's turn on its meter, in arrival order, its meter's last
        throttle over (looked at again after each wait: a quota may have changed)."""
        user, client_id = caller.principal.name, caller.client_id
        meter = quotas.meter_of(user, client_id)
        if meter is None:
            yield
            return
        async with self.turns.turn((quotas.key, meter)):
            while (wait := quotas.throttled_until(user, client_id) - self.clock()) > 0:
                await asyncio.sleep(wait)
            yield

    async def wait_turn(self, quotas: ClientQuotas, caller: Caller | None) -> None:
        """Until the caller's turn: the requests that came before it on its meter
        have had theirs, and its meter's last throttle is over."""
        if caller is None or not self._applies(caller):
            return
        async with self._turn(quotas, caller):
            pass

    async def admit(self, quotas: ClientQuotas, caller: Caller | None,
                    amount: float) -> Admission:
        """Wait the caller's turn, then meter ``amount`` at once, before the next
        request's turn (see the module)."""
        if caller is None or not self._applies(caller):
            return Admission()
        async with self._turn(quotas, caller):
            seconds = quotas.record(caller.principal.name, caller.client_id, amount)
        return Admission(seconds, self.clock() + seconds) if seconds > 0 else Admission()

    async def hold(self, admission: Admission) -> int:
        """Delay the answer until its throttle is over; the throttle time in ms."""
        wait = admission.until - self.clock()
        if wait > 0:
            await asyncio.sleep(wait)
        return int(admission.throttle_s * 1000)

    async def throttle(self, quotas: ClientQuotas, caller: Caller | None,
                       amount: float, already_held_ms: int = 0) -> int:
        """Record ``amount`` for the caller; if that puts it over its quota, wait the
        throttle time, less ``already_held_ms`` (another quota's throttle of the same
        answer: Kafka delays by the larger, not the sum). The throttle time in ms
        (0: within quota)."""
        if caller is None or not self._applies(caller):
            return 0
        seconds = quotas.record(caller.principal.name, caller.client_id, amount)
        if seconds <= 0:
            return 0
        await asyncio.sleep(max(seconds - already_held_ms / 1000, 0.0))
        return int(seconds * 1000)
