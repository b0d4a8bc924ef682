"""The background scrub: every batch of every sealed segment verified, at a bounded rate
(docs/architecture.md §4, "Storage integrity").

Bytes at rest can go bad without anybody reading them (a flipped bit, a firmware
bug, a hand-edited file): found only when a consumer or follower reads them, the
damage may by then be the last copy. So one task per node walks every hosted log,
sealed segment by sealed segment, in steps of about 1 MiB
(:func:`strand.log.integrity.scan_segment`, in a disk thread), and verifies each
batch's framing, CRC-32C and offset order. A bad batch goes to the repair
(:mod:`services.storage.repair`).

The rate is bounded (``--scrub-rate``, MiB/s, like Kafka's
``log.cleaner.io.max.bytes.per.second``), so the scrub never competes with produce
and fetch for the disk; a pass starts at most every ``--scrub-interval`` seconds.
The active segment is left out: it is being written, recovery checks it after an
unclean shutdown, and the fetch path verifies whatever it serves.

Metrics: ``strand.storage.scrub.batches`` and ``strand.storage.scrub.bytes``
verified, and (from the repair) ``strand.storage.corrupt_batches`` by finder.
"""

from __future__ import annotations

import asyncio
import functools
import logging

from services.storage.disk import DiskExecutor
from services.storage.fetch import DamageReport
from services.storage.replica import Replica
from services.storage.replica_manager import ReplicaManager
from strand.log.integrity import scan_segment
from strand.log.segment import LogSegment
from strand.service.aio import wait_event
from strand.service.telemetry import meter

log = logging.getLogger(__name__)

DEFAULT_SCRUB_BYTES_PER_S = 8 * 1024 * 1024
DEFAULT_SCRUB_INTERVAL_S = 3600.0


class LogScrubber:
    def __init__(self, manager: ReplicaManager, disk: DiskExecutor, damage: DamageReport, *,
                 bytes_per_s: float = DEFAULT_SCRUB_BYTES_PER_S,
                 interval_s: float = DEFAULT_SCRUB_INTERVAL_S) -> None:
        if bytes_per_s <= 0 or interval_s < 0:
            raise ValueError("the scrub rate must be positive and its interval not negative")
        self.manager = manager
        self.disk = disk
        self.damage = damage
        self.bytes_per_s = bytes_per_s
        self.interval_s = interval_s
        self.passes = 0
        self._stop = asyncio.Event()
        source = meter()
        self.batches = source.create_counter(
            "strand.storage.scrub.batches", unit="{batch}",
            description="stored batches the scrub verified")
        self.bytes = source.create_counter(
            "strand.storage.scrub.bytes", unit="By", description="stored bytes the scrub verified")

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stop.is_set():
            started = loop.time()
            batches = await self.scrub_once()
            self.passes += 1
            log.info("scrub pass done", extra={"batches": batches,
                                               "seconds": round(loop.time() - started, 1)})
            await wait_event(self._stop, max(0.0, started + self.interval_s - loop.time()))

    async def scrub_once(self) -> int:
        """One pass over every hosted log; returns how many batches it verified."""
        total = 0
        for replica in list(self.manager.replicas.values()):
            for segment in replica.log.segments[:-1]:
                verified, go_on = await self._scrub_segment(replica, segment)
                total += verified
                if not go_on:
                    break
            if self._stop.is_set():
                break
        return total

    async def _scrub_segment(self, replica: Replica, segment: LogSegment) -> tuple[int, bool]:
        """(batches verified, whether to go on with the replica's next segment)."""
        loop = asyncio.get_running_loop()
        position, min_offset, verified = 0, segment.base_offset, 0
        attributes = {"topic": replica.topic}
        while position < segment.size:
            if self._stop.is_set() or replica.closing or replica.out_of_service is not None:
                return verified, False
            started = loop.time()
            try:
                step = await self.disk.run(
                    functools.partial(scan_segment, segment, position, min_offset), [replica])
            except Exception as exc:  # the replica is closing, or the file went away
                log.info("scrub skipped a segment", extra={
                    "topic": replica.topic, "partition": replica.partition,
                    "segment": segment.base_offset, "error": str(exc)})
                return verified, False
            verified += step.batches
            self.batches.add(step.batches, attributes)
            self.bytes.add(step.bytes, attributes)
            if step.damage is not None:
                # A segment deleted or compacted away meanwhile is no damage of the log.
                if segment in replica.log.segments:
                    self.damage.damaged(replica, step.damage.offset, step.damage.describe(),
                                       "scrub")
                return verified, False
            if step.next_position == position:
                return verified, True
            position, min_offset = step.next_position, step.next_offset
            delay = step.bytes / self.bytes_per_s - (loop.time() - started)
            if delay > 0:
                await wait_event(self._stop, delay)
        return verified, True

    def stop(self) -> None:
        """Finish the step in hand, then return from :meth:`run`."""
        self._stop.set()
