"""Producer ids for a transaction coordinator instance (Kafka's RPCProducerIdManager).

Ids come in blocks granted by the active controller (``AllocateProducerIds``;
services/controller/producer_ids.py). The manager hands them out one by one, in
order, and asks for the next block once 90 % of the current one is used, so that a
burst of ``InitProducerId`` rarely waits for the controller. How a block is fetched
is injected (:func:`strand.cluster.controller_calls.allocate_producer_ids` in the
service), so this module is pure asyncio and imports no gRPC.

Runs on one event loop: the steps between awaits are atomic, so concurrent callers
never get the same id, and every id of a block is handed out before the next block
is used (no gap inside a block; the rest of a block is lost only with the process,
as in Kafka).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from strand.cluster.model import ProducerIdsBlock
from strand.errors import UnknownServerError

log = logging.getLogger(__name__)

FetchBlock = Callable[[], Awaitable[ProducerIdsBlock]]

PREFETCH_THRESHOLD = 0.9  # as Kafka's RPCProducerIdManager.PID_PREFETCH_THRESHOLD
RETRY_BACKOFF_S = 1.0  # between two failed background prefetches


class ProducerIdManager:
    def __init__(self, fetch: FetchBlock, *, retry_backoff_s: float = RETRY_BACKOFF_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._fetch = fetch
        self._retry_backoff_s = retry_backoff_s
        self._clock = clock
        self._current: ProducerIdsBlock | None = None
        self._next_id = 0
        self._prefetched: ProducerIdsBlock | None = None
        self._fetching: asyncio.Task[None] | None = None
        self._highest_granted = -1  # last id of the newest block accepted
        self._prefetch_after = 0.0  # clock time before which no background fetch starts

    async def generate(self) -> int:
        """The next unused producer id; waits for a block when none is left. Raises
        the fetch's typed error if the block it waited for could not be had (the
        next call tries again)."""
        while True:
            block = self._current
            if block is not None and self._next_id <= block.last:
                producer_id = self._next_id
                self._next_id += 1
                if self._next_id - block.first >= block.size * PREFETCH_THRESHOLD:
                    self._prefetch()
                return producer_id
            if self._prefetched is not None:
                self._current, self._prefetched = self._prefetched, None
                self._next_id = self._current.first
                continue
            task = self._fetching or self._start_fetch()
            # Shielded: a caller that gives up does not cancel the fetch others await.
            await asyncio.shield(task)

    async def close(self) -> None:
        """Stop a fetch under way (the process is stopping)."""
        task, self._fetching = self._fetching, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _prefetch(self) -> None:
        if (self._prefetched is None and self._fetching is None
                and self._clock() >= self._prefetch_after):
            self._start_fetch()

    def _start_fetch(self) -> asyncio.Task[None]:
        task = asyncio.create_task(self._fetch_block(), name="producer-id-block")
        task.add_done_callback(_retrieve)
        self._fetching = task
        return task

    async def _fetch_block(self) -> None:
        try:
            block = await self._fetch()
            if block.first <= self._highest_granted:
                # A controller bug or a reset pid-block: using it could hand out an id
                # twice, which is worse than handing out none.
                raise UnknownServerError(
                    f"the controller granted producer ids {block.first}..{block.last}, not "
                    f"after the last block ({self._highest_granted}): refused, ids must "
                    "never repeat; check the pid-block key in etcd")
        except BaseException:
            self._prefetch_after = self._clock() + self._retry_backoff_s
            raise
        finally:
            self._fetching = None
        self._highest_granted = block.last
        self._prefetched = block
        log.info("producer id block received", extra={"first": block.first, "last": block.last})


def _retrieve(task: asyncio.Task[None]) -> None:
    """Log a failed background prefetch (callers waiting for a block get its error)."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.warning("could not fetch a block of producer ids", extra={"error": str(exc)})
