"""Background care of every hosted log, by one task for the whole node.

Every ``interval`` seconds, log after log: retention (``delete_old_segments``),
compaction when the log needs it (``cleanup.policy=compact``), the ``flush.ms``
flush of logs that were not appended to lately, the expiry of idle producer ids
(``producer.id.expiration.ms``), and the offsets checkpoint when the
high watermark or the log start offset moved (so a restart after a crash starts
from recent offsets). Logs are handled one at a time in a disk thread: a long
compaction delays the next log's turn, never an append or a fetch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from services.storage.disk import DiskExecutor
from services.storage.replica import Replica
from services.storage.replica_manager import ReplicaManager
from strand.log.cleaner import LogCleaner, needs_cleaning
from strand.log.log import PartitionLog, wall_clock_ms
from strand.service.aio import wait_event

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MaintenanceResult:
    deleted_segments: int
    cleaned: bool
    flushed: bool
    expired_producers: int
    checkpointed: tuple[int, int]  # (high watermark, log start offset) now on disk


def maintain(partition_log: PartitionLog, cleaner: LogCleaner, now_ms: int,
             checkpointed: tuple[int, int]) -> MaintenanceResult:
    """One round for one log (blocking: runs in a disk thread)."""
    deleted = partition_log.delete_old_segments()
    cleaned = False
    if needs_cleaning(partition_log, now_ms):
        cleaned = cleaner.clean(partition_log, now_ms) is not None
    flushed = partition_log.flush_if_due()
    expired = len(partition_log.remove_expired_producers())
    offsets = (partition_log.high_watermark, partition_log.log_start_offset)
    if offsets != checkpointed:
        partition_log.checkpoint()
    return MaintenanceResult(deleted, cleaned, flushed, expired, offsets)


class LogMaintenance:
    def __init__(self, manager: ReplicaManager, disk: DiskExecutor, interval_s: float,
                 *, clock: Callable[[], int] = wall_clock_ms) -> None:
        if interval_s <= 0:
            raise ValueError("the maintenance interval must be positive")
        self.manager = manager
        self.disk = disk
        self.interval_s = interval_s
        self.cleaner = LogCleaner()
        self._clock = clock
        self._stop = asyncio.Event()

    async def run(self) -> None:
        while True:
            await wait_event(self._stop, self.interval_s)
            if self._stop.is_set():
                return
            for replica in list(self.manager.replicas.values()):
                if self._stop.is_set():
                    return
                if not replica.closing:
                    await self._maintain(replica)

    async def _maintain(self, replica: Replica) -> None:
        partition_log, checkpointed = replica.log, replica.checkpointed
        now = self._clock()
        try:
            result = await self.disk.run(
                lambda: maintain(partition_log, self.cleaner, now, checkpointed), [replica])
        except Exception as exc:
            self.manager.storage_failed(replica, exc)
            if not replica.closing:
                log.exception("log maintenance failed", extra={
                    "topic": replica.topic, "partition": replica.partition})
            return
        replica.checkpointed = result.checkpointed
        if result.deleted_segments or result.cleaned or result.expired_producers:
            log.info("log maintenance", extra={
                "topic": replica.topic, "partition": replica.partition,
                "deleted_segments": result.deleted_segments, "cleaned": result.cleaned,
                "expired_producers": result.expired_producers,
                "log_start_offset": partition_log.log_start_offset})

    def stop(self) -> None:
        """Finish the log in hand, then return from :meth:`run`."""
        self._stop.set()
