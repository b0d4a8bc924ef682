"""Replicas this node cannot write: out of service until their disk recovers (Kafka's
handling of a failed log directory, plus the recovery Kafka leaves to a restart).

A write to a replica's log that fails on disk (a full or failing disk: LogWriteError,
KAFKA_STORAGE_ERROR to the client) has already been undone by the log, which now
refuses further writes. Then, for that replica:

1. Hand over. A replica this node leads keeps serving its followers (and consumers),
   no longer producers, until every in-sync follower has the whole log or
   ``handover_timeout_s`` passes: records acknowledged with acks=1 then live on the
   replica that takes over. A replica it follows stops fetching at once.
2. Report. The replica is listed in this node's registration (``offline_replicas``);
   the controller moves its leadership to an in-sync replica and takes it out of
   every ISR, which it may not rejoin while listed. A sole in-sync leader keeps its
   leadership (nobody else has its records) and answers KAFKA_STORAGE_ERROR meanwhile.
3. Probe. Every ``probe_interval_s`` a probe file of ``probe_bytes`` is written to the
   data directory and fsynced; once that works, each offline replica's log is
   recovered (``PartitionLog.recover_from_failure``: cut to the last complete batch,
   indexes and checkpoints written again).
4. Rejoin. The replica leaves the list and takes its role again: as a follower it
   truncates what the leader does not have (KIP-101 divergence), catches up and is
   proposed back into the ISR by the leader. No restart is needed.

``report`` is the one entry: anything that finds a replica's log failed (produce,
replica fetch, maintenance, a new leadership) calls it through
``ReplicaManager.storage_failed``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from services.storage.disk import DiskExecutor
from services.storage.replica import Replica
from services.storage.replica_manager import ReplicaManager, TopicPartition

log = logging.getLogger(__name__)

DEFAULT_PROBE_INTERVAL_S = 2.0
DEFAULT_PROBE_BYTES = 1 << 20
PROBE_FILE = ".storage-probe"
# How often a handing-over leader looks at its followers' progress (a short, bounded
# wait on a rare path; their fetches arrive every few hundred ms at most).
HANDOVER_CHECK_S = 0.05

Publish = Callable[[tuple[TopicPartition, ...]], Awaitable[None]]


def probe_disk(directory: Path, size: int) -> None:
    """Write and fsync ``size`` bytes in ``directory``, then remove them: raises OSError
    while the disk cannot take that much (full, read-only, failing)."""
    path = directory / PROBE_FILE
    try:
        with open(path, "wb", buffering=0) as f:
            chunk = bytes(min(size, 1 << 16))
            remaining = size
            while remaining > 0:
                remaining -= f.write(chunk[:remaining])
            os.fsync(f.fileno())
    finally:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


class OfflineReplicas:
    """The node's :class:`~services.storage.replica_manager.StorageFailures` role."""

    def __init__(self, manager: ReplicaManager, disk: DiskExecutor, publish: Publish, *,
                 probe_interval_s: float = DEFAULT_PROBE_INTERVAL_S,
                 probe_bytes: int = DEFAULT_PROBE_BYTES,
                 handover_timeout_s: float | None = None) -> None:
        if probe_interval_s <= 0 or probe_bytes < 0:
            raise ValueError("the disk probe needs a positive interval and a size >= 0")
        self.manager = manager
        self.disk = disk
        self.publish = publish  # lists the offline replicas in the registration
        self.probe_interval_s = probe_interval_s
        self.probe_bytes = probe_bytes
        self.handover_timeout_s = (manager.replica_lag_time_max_ms / 1000
                                   if handover_timeout_s is None else handover_timeout_s)
        self.offline: dict[TopicPartition, Replica] = {}  # reported to the controller
        self._published: tuple[TopicPartition, ...] = ()
        self._tasks: set[asyncio.Task[None]] = set()

    # -- taking replicas out ------------------------------------------------------------------

    def report(self, replica: Replica, error: BaseException) -> None:
        """``replica``'s log failed on disk (``error``): take it out of service."""
        if replica.offline is not None or replica.closing:
            return
        replica.offline = str(error)
        log.error("replica out of service: its log cannot be written", extra={
            "topic": replica.topic, "partition": replica.partition, "error": str(error),
            "leading": replica.leader_state is not None})
        if replica.leader_state is None and self.manager.followers is not None:
            self.manager.followers.unfollow(replica)
        task = asyncio.create_task(self._take_out(replica), name="replica-offline")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _take_out(self, replica: Replica) -> None:
        if replica.leader_state is not None:
            await self._hand_over(replica)
        if replica.closing:
            return
        self.offline[(replica.topic, replica.partition)] = replica
        await self._publish()

    async def _hand_over(self, replica: Replica) -> None:
        """Until every in-sync follower has fetched the whole log (or the timeout)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.handover_timeout_s
        while loop.time() < deadline and not replica.closing:
            state = replica.leader_state
            end = replica.log.log_end_offset
            if state is None or all(
                    follower.log_end_offset >= end for broker, follower in state.followers.items()
                    if broker in state.isr):
                return
            await asyncio.sleep(HANDOVER_CHECK_S)
        log.warning("handing a failed replica over timed out; followers may lack records",
                    extra={"topic": replica.topic, "partition": replica.partition})

    async def _publish(self) -> None:
        wanted = tuple(sorted(self.offline))
        if wanted == self._published:
            return
        try:
            await self.publish(wanted)
        except Exception as exc:  # etcd unreachable: the probe loop publishes again
            log.warning("cannot list the offline replicas in the registration",
                        extra={"error": repr(exc), "offline": [list(tp) for tp in wanted]})
            return
        self._published = wanted
        log.info("offline replicas listed in the registration",
                 extra={"offline": [list(tp) for tp in wanted]})

    # -- bringing them back -------------------------------------------------------------------

    async def run(self) -> None:
        """Probe the disk every ``probe_interval_s`` while replicas are offline."""
        while True:
            await asyncio.sleep(self.probe_interval_s)
            try:
                await self.probe_and_recover()
            except Exception:  # keep probing: the next round may work
                log.exception("recovering offline replicas failed")

    async def probe_and_recover(self) -> list[Replica]:
        """One probe round; returns the replicas back in service."""
        for tp, replica in list(self.offline.items()):
            if replica.closing or self.manager.replicas.get(tp) is not replica:
                del self.offline[tp]  # no longer hosted here (deleted, moved away)
        if not self.offline:
            await self._publish()
            return []
        try:
            await self.disk.run(lambda: probe_disk(self.manager.data_dir, self.probe_bytes))
        except OSError as exc:
            log.info("disk still failing; replicas stay offline", extra={
                "error": str(exc), "offline": len(self.offline)})
            await self._publish()
            return []
        recovered = []
        for tp, replica in list(self.offline.items()):
            partition_log = replica.log
            try:
                await self.disk.run(partition_log.recover_from_failure, [replica])
            except Exception as exc:
                log.warning("replica log not recovered yet", extra={
                    "topic": tp[0], "partition": tp[1], "error": str(exc)})
                continue
            del self.offline[tp]
            recovered.append(replica)
        # Unlisted first, so that the leader may take them back into the ISR.
        await self._publish()
        for replica in recovered:
            replica.offline = None
            log.info("replica back in service", extra={
                "topic": replica.topic, "partition": replica.partition,
                "log_end_offset": replica.log.log_end_offset})
            await self.manager.reapply_role(replica)
        return recovered

    async def shutdown(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
