"""What a sharded coordinator process does with the shards it owns, whatever it
coordinates: the shards served and loading, the lookup of a key's shard (typed
errors for one not served here), and taking a shard over (load, retried until it
succeeds or the process stops, then serve)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from strand.cluster.cache import MetadataCache
from strand.coordination.shards import shard_for
from strand.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    ErrorCode,
    NotCoordinatorError,
    StrandError,
)
from strand.service.aio import wait_event

log = logging.getLogger(__name__)

__all__ = ["LOAD_RETRY_S", "ServedShards", "ShardListing", "ShardServer", "answered"]

LOAD_RETRY_S = 1.0


class ShardServer(Protocol):
    async def load(self) -> None: ...

    def start(self) -> None: ...

    async def stop(self) -> None: ...


C = TypeVar("C", bound=ShardServer)


@dataclass(frozen=True, slots=True)
class ShardListing(Generic[C]):
    """The asked shards of a listing call (ListGroups, ListTransactions), sorted:
    those served here, loaded, and those not available here."""

    served: list[tuple[int, C]]
    loading: list[int]  # being loaded here
    elsewhere: list[int]  # not served here

    def report_unavailable(self, response: object) -> None:
        """Name the unavailable shards in ``response`` and say why in its error:
        COORDINATOR_LOAD_IN_PROGRESS when one is loading here, else NOT_COORDINATOR
        (every listing response has these fields)."""
        if not (self.loading or self.elsewhere):
            return
        response.unavailable_shards.extend(  # type: ignore[attr-defined]
            self.loading + self.elsewhere)
        code = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.loading
                else ErrorCode.NOT_COORDINATOR)
        response.error_code = int(code)  # type: ignore[attr-defined]
        response.error_message = "; ".join(filter(None, (  # type: ignore[attr-defined]
            f"shards {_shard_list(self.loading)} are loading" if self.loading else "",
            f"shards {_shard_list(self.elsewhere)} are not served here"
            if self.elsewhere else "")))


def _shard_list(shards: list[int]) -> str:
    return ", ".join(map(str, shards))


class ServedShards(Generic[C]):
    def __init__(self, cache: MetadataCache, topic: str) -> None:
        self.cache = cache
        self.topic = topic
        self.shards: dict[int, C] = {}
        self.loading: set[int] = set()

    def shard_count(self) -> int | None:
        record = self.cache.topics.get(self.topic)
        return record.partitions if record is not None else None

    def for_key(self, key: str) -> C:
        """The coordinator of ``key``'s shard; NOT_COORDINATOR when this instance does
        not serve it (the caller looks the owner up again), COORDINATOR_LOAD_IN_PROGRESS
        while it loads."""
        count = self.shard_count()
        if count is None:
            raise CoordinatorNotAvailableError(f"{self.topic} does not exist yet; retry")
        shard = shard_for(key, count)
        coordinator = self.shards.get(shard)
        if coordinator is not None:
            return coordinator
        if shard in self.loading:
            raise CoordinatorLoadInProgressError(f"shard {shard} of {self.topic} is loading")
        raise NotCoordinatorError(f"this instance does not serve shard {shard} of {self.topic}")

    def listing(self, asked: Iterable[int]) -> ShardListing[C]:
        """``asked`` (none: every shard served here) split into served, loading and
        not served here."""
        shards = sorted(set(asked)) or sorted(self.shards)
        return ShardListing(
            [(k, self.shards[k]) for k in shards if k in self.shards],
            [k for k in shards if k not in self.shards and k in self.loading],
            [k for k in shards if k not in self.shards and k not in self.loading])

    async def acquire(self, shard: int, coordinator: C, stopping: asyncio.Event) -> None:
        """Load ``coordinator`` (retried: the shard's partition may be moving), then
        serve it; gives up silently when ``stopping`` is set, and when its writer is
        fenced (NOT_COORDINATOR: it has told the ownership to give the shard up)."""
        self.loading.add(shard)
        try:
            while True:
                try:
                    await coordinator.load()
                    break
                except NotCoordinatorError as exc:
                    # Its writer is fenced (a newer owner wrote its own fence): this
                    # take-over can never load; the ownership lets the shard go.
                    log.warning("a newer owner holds the shard: not loading it",
                                extra={"topic": self.topic, "shard": shard, "error": str(exc)})
                    return
                except Exception as exc:
                    log.warning("loading a shard failed; retrying",
                                extra={"topic": self.topic, "shard": shard, "error": str(exc)})
                    if await wait_event(stopping, LOAD_RETRY_S):
                        return
            coordinator.start()
            self.shards[shard] = coordinator
        finally:
            self.loading.discard(shard)

    async def release(self, shard: int) -> None:
        coordinator = self.shards.pop(shard, None)
        if coordinator is not None:
            await coordinator.stop()


async def answered(response: object, work: Callable[[], Awaitable[None]]) -> None:
    """Run ``work``; a typed error becomes the response's error code and message
    (every coordinator response has both fields)."""
    try:
        await work()
    except StrandError as exc:
        response.error_code = int(exc.code)  # type: ignore[attr-defined]
        response.error_message = str(exc)  # type: ignore[attr-defined]
