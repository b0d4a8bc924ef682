"""One partition replica hosted by this node: its open log and its metadata record,
plus what the event loop needs to share the log with disk threads.

Everything here runs on the event loop (no locks). Disk work happens in threads
(:mod:`services.storage.disk`), accounted to the replica so that the log is closed
or deleted only once no thread uses it any more.
"""

from __future__ import annotations

import asyncio

from strand.cluster.model import PartitionRecord
from strand.errors import StorageError
from strand.log.log import PartitionLog


class Replica:
    def __init__(self, topic_id: str, record: PartitionRecord, log: PartitionLog) -> None:
        self.topic_id = topic_id
        self.record = record
        self.log = log
        # Appends to one partition run one at a time and in arrival order.
        self.append_lock = asyncio.Lock()
        self.closing = False
        # Bytes that became readable by consumers since the replica was opened: a cheap
        # measure of new data for waiting fetches (no read needed to know there is some).
        self.visible_bytes = 0
        # Bumped when leadership or epoch change or the replica closes: a waiting
        # fetch answers at once then, with the error its partitions now deserve.
        self.state_version = 0
        # (high watermark, log start offset) last written to the offsets checkpoint.
        self.checkpointed: tuple[int, int] = (-1, -1)
        self._waiters: set[asyncio.Future[None]] = set()
        self._jobs = 0
        self._idle: asyncio.Event | None = None

    @property
    def topic(self) -> str:
        return self.record.topic

    @property
    def partition(self) -> int:
        return self.record.partition

    def is_leader(self, node_id: int) -> bool:
        return not self.closing and self.record.leader == node_id

    # -- metadata -----------------------------------------------------------------------------

    def set_record(self, record: PartitionRecord) -> bool:
        """Adopt a newer record; returns whether leadership or its epoch changed."""
        old = self.record
        self.record = record
        changed = (old.leader, old.leader_epoch) != (record.leader, record.leader_epoch)
        if changed:
            self.state_version += 1
            self.wake()
        return changed

    def begin_close(self) -> None:
        """Refuse new work and wake the fetches that wait on this replica."""
        if not self.closing:
            self.closing = True
            self.state_version += 1
            self.wake()

    # -- waiting fetches ----------------------------------------------------------------------

    def add_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.add(waiter)

    def discard_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.discard(waiter)

    def wake(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def made_visible(self, size_bytes: int) -> None:
        """New data below the high watermark: consumers may read it now."""
        self.visible_bytes += size_bytes
        self.wake()

    # -- disk jobs ----------------------------------------------------------------------------

    def job_started(self) -> None:
        if self.closing:
            raise StorageError(f"{self.topic}-{self.partition} is closing")
        self._jobs += 1

    def job_finished(self) -> None:
        self._jobs -= 1
        if self._jobs == 0 and self._idle is not None:
            self._idle.set()

    async def idle(self) -> None:
        """Return once no disk job uses the log (call after :meth:`begin_close`)."""
        while self._jobs:
            self._idle = asyncio.Event()
            await self._idle.wait()
