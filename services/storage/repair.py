"""Repair of a replica whose stored bytes fail verification (docs/architecture.md §4,
"Storage integrity").

A bad batch is found by the fetch path, before it would be served or replicated
(:mod:`services.storage.fetch`), or by the background scrub
(:mod:`services.storage.scrub`). Either reports it here, and for that partition:

1. The replica is marked damaged: it stops following its leader, so the leader
   cannot take it back into the ISR with the damaged copy; the fetch path serves
   nothing past the last valid batch (clients get KAFKA_STORAGE_ERROR and look for
   the leader again).
2. The first bad batch is located by re-reading the log from the suspect offset
   (the fetch path knows only an offset; a re-read also tells a lasting fault from a
   passing one). Nothing found: the mark goes, nothing else changes.
3. The controller is asked to fence the replica (FenceReplicas): out of the ISR and,
   if it led, leadership to another in-sync replica. Asked again until the metadata
   shows it done. A replica that is the only in-sync copy keeps leading (nobody else
   has the data): it serves everything but the bad batch and asks again on every
   metadata change, in case another replica caught up meanwhile.
4. Out of the ISR and not leading, it cuts its log at the bad batch (every later
   segment goes too) and follows its leader again: the leader sends the rest, and
   proposes it back into the ISR once it has caught up (the usual ISR expansion).

The mark lives in memory: a node restarted mid-repair finds the damage again (its
scrub starts at once, and every read is verified).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from services.storage.disk import DiskExecutor
from services.storage.replica import Replica
from services.storage.replica_manager import ReplicaManager
from strand.log.integrity import Damage, find_damage
from strand.service.telemetry import meter

log = logging.getLogger(__name__)

FENCE_RETRY_S = 2.0


class ReplicaFencing(Protocol):
    """Reaches the active controller (gRPC lives in services.storage.peers)."""

    async def fence_replicas(self, broker_id: int, broker_epoch: int,
                             partitions: Sequence[tuple[str, int]], reason: str) -> None: ...


class ReplicaRepair:
    def __init__(self, manager: ReplicaManager, disk: DiskExecutor, controller: ReplicaFencing,
                 broker_epoch: Callable[[], int]) -> None:
        self.manager = manager
        self.disk = disk
        self.controller = controller
        self.broker_epoch = broker_epoch
        self._tasks: dict[Replica, asyncio.Task[None]] = {}
        source = meter()
        self.corrupt_batches = source.create_counter(
            "strand.storage.corrupt_batches", unit="{batch}",
            description="stored batches that failed verification, by who found them")
        self.repairs = source.create_counter(
            "strand.storage.replica_repairs", unit="{repair}",
            description="damaged replicas cut back to re-fetch from their leader, by outcome")

    def report(self, replica: Replica, offset: int, detail: str, found_by: str) -> None:
        """A batch at or after ``offset`` failed verification (``found_by``: fetch,
        replica fetch or scrub). Starts the repair unless one is under way."""
        self.corrupt_batches.add(1, {"found_by": found_by})
        if replica.closing or replica in self._tasks:
            return
        log.error("stored batch failed verification; repairing the replica from an "
                  "in-sync replica", extra={
                      "topic": replica.topic, "partition": replica.partition,
                      "offset": offset, "found_by": found_by, "detail": detail})
        replica.damaged_from = offset
        if self.manager.followers is not None:
            self.manager.followers.unfollow(replica)
        task = asyncio.create_task(self._repair(replica, offset),
                                   name=f"repair-{replica.topic}-{replica.partition}")
        self._tasks[replica] = task

    @property
    def repairing(self) -> int:
        return len(self._tasks)

    async def _repair(self, replica: Replica, offset: int) -> None:
        outcome = "failed"
        try:
            damage = await self.disk.run(lambda: find_damage(replica.log, offset), [replica])
            if damage is None:
                outcome = "not confirmed"
                log.warning("a re-read found no damaged batch; the replica goes on as it is",
                            extra={"topic": replica.topic, "partition": replica.partition,
                                   "offset": offset})
                return
            if not await self._fence(replica, damage):
                outcome = "abandoned"
                return
            async with replica.append_lock:
                before = replica.log.log_end_offset
                end = await self.disk.run(lambda: replica.log.truncate_at_damage(
                    damage.segment_base_offset, damage.position), [replica])
            outcome = "repaired"
            log.warning("damaged log cut; fetching the rest again from the leader", extra={
                "topic": replica.topic, "partition": replica.partition,
                "damage": damage.describe(), "from": before, "to": end,
                "leader": replica.record.leader})
        except Exception:
            if not replica.closing:
                log.exception("repairing a damaged replica failed", extra={
                    "topic": replica.topic, "partition": replica.partition})
        finally:
            self.repairs.add(1, {"outcome": outcome})
            replica.damaged_from = None
            self._tasks.pop(replica, None)
            if not self.manager.stopping:
                await self.manager.refresh_role(replica)

    async def _fence(self, replica: Replica, damage: Damage) -> bool:
        """Until the metadata shows the replica out of the ISR and not leading; False
        when the replica closes or the node stops first."""
        me = self.manager.node_id
        alone = False
        while not replica.closing and not self.manager.stopping:
            record = replica.record
            if record.leader != me and me not in record.isr:
                return True
            if record.isr == (me,) and not alone:
                alone = True
                log.error("the only in-sync replica is damaged: nothing to repair it from; "
                          "serving everything but the damaged batch", extra={
                              "topic": replica.topic, "partition": replica.partition,
                              "damage": damage.describe()})
            try:
                await self.controller.fence_replicas(
                    me, self.broker_epoch(), [(replica.topic, replica.partition)],
                    damage.describe())
            except Exception as exc:
                log.warning("fencing the damaged replica failed; retrying", extra={
                    "topic": replica.topic, "partition": replica.partition,
                    "error": str(exc), "retry_s": FENCE_RETRY_S})
            # The controller's change reaches this node through the etcd watch.
            await self.manager.cache.wait_changed(FENCE_RETRY_S)
        return False

    async def shutdown(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
