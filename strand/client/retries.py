"""Retrying a blocking client call until its deadline, as Kafka's clients do for
calls bounded by ``default.api.timeout.ms`` (``partitionsFor``, the admin client's
reads): a gateway that is restarting, or briefly unreachable, costs the caller a
short wait instead of an error.

Only failures a retry may cure are retried (:func:`transient`: no answer came back
and the gRPC status says the gateway was unavailable); each attempt gets the time
that is left, and the waits between attempts grow from ``initial_s`` to ``max_s``
(Kafka's ``retry.backoff.ms`` and ``retry.backoff.max.ms``). When the deadline
comes first, the last failure is raised, so the caller still learns why.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from strand.client.channel import TransportError
from strand.errors import StrandError

__all__ = ["Backoff", "transient", "until_deadline"]

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    initial_s: float = 0.1
    max_s: float = 1.0

    def after(self, attempts: int) -> float:
        """The wait after the ``attempts``-th failed attempt (1, 2, …)."""
        return min(self.max_s, self.initial_s * 2.0 ** (attempts - 1))


def transient(error: StrandError) -> bool:
    """A call that got no answer because the gateway could not be reached (or the
    channel broke under it): trying again may succeed."""
    return isinstance(error, TransportError) and error.retriable


def until_deadline(attempt: Callable[[float], T], timeout_s: float, *,
                   retriable: Callable[[StrandError], bool] = transient,
                   backoff: Backoff = Backoff(),
                   clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> T:
    """``attempt(seconds_left)`` until it returns, raises an error ``retriable`` does
    not accept, or ``timeout_s`` has passed (then its last error)."""
    deadline = clock() + timeout_s
    attempts = 0
    while True:
        try:
            return attempt(max(deadline - clock(), 0.001))
        except StrandError as exc:
            attempts += 1
            wait = backoff.after(attempts)
            if not retriable(exc) or clock() + wait >= deadline:
                raise
        sleep(wait)
