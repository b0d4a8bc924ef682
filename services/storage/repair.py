"""Replicas this node cannot serve until it repairs them (docs/architecture.md §4,
"Replicas out of service"): one mechanism, two causes.

* **Disk failure.** A write to the replica's log failed on disk (full or failing:
  LogWriteError, KAFKA_STORAGE_ERROR to the client); the log has undone it and takes
  no more writes. Found by produce, replica fetch, maintenance or a new leadership,
  through ``ReplicaManager.storage_failed`` → :meth:`ReplicaRepairs.disk_failed`.
  Repair: probe the disk, then recover the log (Kafka's failed log directory, plus
  the recovery Kafka leaves to a restart).
* **Damage.** A stored batch failed verification (its checksum, framing or offsets),
  found by the fetch path before serving it (:mod:`services.storage.fetch`), the
  background scrub (:mod:`services.storage.scrub`) or a damage mark left by a
  restart. Repair: locate the first bad batch, cut the log there, fetch the rest
  again from the leader (beyond Kafka, which leaves this to an operator).

For either cause, the replica:

1. Stops following at once, and takes no new role while out of service. A damage
   report is confirmed first: the log is re-read from the suspect offset (the fetch
   path knows only an offset; a re-read also tells a lasting fault from a passing
   one); nothing found, and the replica goes on as it was. A confirmed damage is
   marked in the partition directory (``PartitionLog.mark_damaged``), so that a
   restart before the cut does not let the replica rejoin the ISR with it.
2. Hands over, if it leads with a failed disk: it keeps serving its followers (and
   consumers), no longer producers, until every in-sync follower has the whole log
   or ``handover_timeout_s`` passes, so that records acknowledged with acks=1 live
   on the replica that takes over.
3. Is listed in this node's registration (``offline_replicas``). The controller
   moves its leadership to an in-sync replica and takes it out of every ISR, which
   it may not rejoin while listed (election, ISR expansion and AlterPartition all
   honour the list). The listing is fenced by the registration itself: only the
   node's current lease can write it, and a new registration starts empty. A sole
   in-sync leader keeps its leadership (nobody else has its records): with a failed
   disk it answers KAFKA_STORAGE_ERROR, with damage it serves all but the bad batch.
4. Is repaired. Disk: every ``probe_interval_s`` a probe file of ``probe_bytes`` is
   written and fsynced; once that works the log is recovered (cut to the last
   complete batch, indexes and checkpoints written again). Damage: once the metadata
   shows the replica out of the ISR and not leading, the log is cut at the bad batch
   (every later segment goes too) and the mark removed. A cut the disk refuses makes
   it a disk failure first.
5. Rejoins: unlisted, then it takes its role again. As a follower it truncates what
   the leader does not have (KIP-101), catches up, and the leader proposes it back
   into the ISR (the usual expansion). No restart is needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from services.storage.disk import DiskExecutor
from services.storage.replica import Replica
from services.storage.replica_manager import ReplicaManager, TopicPartition
from strand.log.integrity import Damage, find_damage
from strand.service.telemetry import meter

log = logging.getLogger(__name__)

DEFAULT_PROBE_INTERVAL_S = 2.0
DEFAULT_PROBE_BYTES = 1 << 20
PROBE_FILE = ".storage-probe"
# How often a handing-over leader looks at its followers' progress (a short, bounded
# wait on a rare path; their fetches arrive every few hundred ms at most).
HANDOVER_CHECK_S = 0.05
# Longest wait for the metadata to show a damaged replica fenced before looking again
# (the etcd watch wakes it sooner); also the retry of a registration etcd refused.
FENCE_RETRY_S = 2.0

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


@dataclass(slots=True)
class _OutOfService:
    """One replica's repair. ``suspect``: an offset reported damaged, not yet located;
    ``damage``: the located bad batch, not yet cut. A disk failure is the log's own
    state (``PartitionLog.failure``)."""

    replica: Replica
    cause: str  # what took it out first, for the logs and metrics: "disk" or "damage"
    suspect: int | None = None
    damage: Damage | None = None
    repaired: bool = False  # a log recovered or cut (else: a damage not confirmed)
    alone: bool = False  # told already that it is the only in-sync replica


class ReplicaRepairs:
    """The node's ``StorageFailures`` role (services.storage.replica_manager) and the
    ``DamageReport`` of the fetch path and the scrub."""

    def __init__(self, manager: ReplicaManager, disk: DiskExecutor, publish: Publish, *,
                 probe_interval_s: float = DEFAULT_PROBE_INTERVAL_S,
                 probe_bytes: int = DEFAULT_PROBE_BYTES,
                 handover_timeout_s: float | None = None) -> None:
        if probe_interval_s <= 0 or probe_bytes < 0:
            raise ValueError("the disk probe needs a positive interval and a size >= 0")
        self.manager = manager
        self.disk = disk
        self.publish = publish  # lists the replicas out of service in the registration
        self.probe_interval_s = probe_interval_s
        self.probe_bytes = probe_bytes
        self.handover_timeout_s = (manager.replica_lag_time_max_ms / 1000
                                   if handover_timeout_s is None else handover_timeout_s)
        self._repairs: dict[Replica, _OutOfService] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._listed: set[TopicPartition] = set()
        self._published: tuple[TopicPartition, ...] = ()
        self._publish_lock = asyncio.Lock()
        self._probe_lock = asyncio.Lock()
        self._probed: tuple[float, OSError | None] = (float("-inf"), None)
        self._stopping = False
        source = meter()
        self.corrupt_batches = source.create_counter(
            "strand.storage.corrupt_batches", unit="{batch}",
            description="stored batches that failed verification, by who found them")
        self.repairs = source.create_counter(
            "strand.storage.replica_repairs", unit="{repair}",
            description="replicas taken out of service and repaired, by cause and outcome")

    # -- taking replicas out ------------------------------------------------------------------

    def disk_failed(self, replica: Replica, error: BaseException) -> None:
        """``replica``'s log failed on disk (``error``): out of service until it heals."""
        entry = self._repairs.get(replica)
        if replica.closing or self._stopping or (entry is not None and entry.cause == "disk"):
            return
        log.error("replica out of service: its log cannot be written", extra={
            "topic": replica.topic, "partition": replica.partition, "error": str(error),
            "leading": replica.leader_state is not None})
        self._take_out(replica, "disk", str(error))

    def damaged(self, replica: Replica, offset: int, detail: str, found_by: str) -> None:
        """A batch at or after ``offset`` failed verification (``found_by``: fetch,
        replica fetch, scrub or restart): out of service until repaired from an
        in-sync replica."""
        self.corrupt_batches.add(1, {"found_by": found_by})
        if replica.closing or self._stopping:
            return
        entry = self._repairs.get(replica)
        if entry is not None and (entry.suspect is not None or entry.damage is not None):
            return  # one damage repair at a time: the cut re-fetches everything after it
        log.error("stored batch failed verification; repairing the replica from an "
                  "in-sync replica", extra={
                      "topic": replica.topic, "partition": replica.partition,
                      "offset": offset, "found_by": found_by, "detail": detail})
        self._take_out(replica, "damage", detail).suspect = offset

    def _take_out(self, replica: Replica, cause: str, why: str) -> _OutOfService:
        entry = self._repairs.get(replica)
        if entry is not None:
            return entry  # its task takes the new cause in hand too
        entry = self._repairs[replica] = _OutOfService(replica, cause)
        replica.out_of_service = why
        if self.manager.followers is not None:
            self.manager.followers.unfollow(replica)
        task = asyncio.create_task(self._repair(entry),
                                   name=f"repair-{replica.topic}-{replica.partition}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return entry

    @property
    def repairing(self) -> int:
        return len(self._repairs)

    def opened(self, replica: Replica) -> None:
        """A log opened with a damage mark (a restart cut a repair short): repair it
        before the replica takes any role."""
        mark = replica.log.damaged_from
        if mark is not None:
            self.damaged(replica, mark, "marked damaged before a restart", "restart")

    # -- the repair ---------------------------------------------------------------------------

    async def _repair(self, entry: _OutOfService) -> None:
        """Step by step until nothing is left to repair: a failed disk first (nothing
        else can be written before), then locating a reported damage, then cutting it
        once the replica is fenced."""
        replica = entry.replica
        outcome = "abandoned"  # the replica closed or the node stops first
        try:
            if replica.leader_state is not None and replica.log.failure is not None:
                await self._hand_over(replica)
            while self._live(replica):
                if replica.log.failure is not None:
                    await self._list(replica)
                    if await self._recover(replica):
                        entry.repaired = True
                    else:
                        await asyncio.sleep(self.probe_interval_s)
                elif entry.suspect is not None:
                    await self._locate(entry)
                elif entry.damage is not None:
                    await self._list(replica)
                    if self._fenced(entry):
                        await self._cut(entry)
                    else:  # the controller's change arrives through the etcd watch
                        await self.manager.cache.wait_changed(FENCE_RETRY_S)
                else:
                    outcome = "repaired" if entry.repaired else "not confirmed"
                    break
        except Exception:
            outcome = "failed"  # back in service as it is: the next fault reports it again
            if not replica.closing:
                log.exception("repairing a replica failed", extra={
                    "topic": replica.topic, "partition": replica.partition})
        finally:
            self.repairs.add(1, {"cause": entry.cause, "outcome": outcome})
            await self._back_in_service(entry)

    def _live(self, replica: Replica) -> bool:
        return (not replica.closing and not self.manager.stopping and not self._stopping
                and self.manager.replicas.get((replica.topic, replica.partition)) is replica)

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

    async def _recover(self, replica: Replica) -> bool:
        """Probe the disk, then recover the log; whether it takes writes again."""
        error = await self._probe()
        if error is not None:
            log.info("disk still failing; the replica stays out of service", extra={
                "topic": replica.topic, "partition": replica.partition, "error": str(error)})
            return False
        try:
            await self.disk.run(replica.log.recover_from_failure, [replica])
        except Exception as exc:
            log.warning("replica log not recovered yet", extra={
                "topic": replica.topic, "partition": replica.partition, "error": str(exc)})
            return False
        return True

    async def _probe(self) -> OSError | None:
        """One probe per interval for every failed replica of the node (they share it)."""
        async with self._probe_lock:
            loop = asyncio.get_running_loop()
            probed_at, error = self._probed
            if loop.time() - probed_at < self.probe_interval_s / 2:
                return error
            try:
                await self.disk.run(lambda: probe_disk(self.manager.data_dir, self.probe_bytes))
                error = None
            except OSError as exc:
                error = exc
            self._probed = (loop.time(), error)
            return error

    async def _locate(self, entry: _OutOfService) -> None:
        replica, offset = entry.replica, entry.suspect
        assert offset is not None
        damage = await self.disk.run(lambda: find_damage(replica.log, offset), [replica])
        entry.suspect = None
        if damage is None:
            log.warning("a re-read found no damaged batch; the replica goes on as it is",
                        extra={"topic": replica.topic, "partition": replica.partition,
                               "offset": offset})
            if replica.log.damaged_from is not None:
                await self.disk.run(replica.log.clear_damage_mark, [replica])
            return
        # Durably, before it leaves the ISR: a restart before the cut repairs it again.
        await self.disk.run(lambda: replica.log.mark_damaged(damage.offset), [replica])
        entry.damage = damage
        log.warning("damaged batch located; fencing the replica", extra={
            "topic": replica.topic, "partition": replica.partition,
            "damage": damage.describe()})

    def _fenced(self, entry: _OutOfService) -> bool:
        """The metadata shows the replica out of the ISR and not leading."""
        replica = entry.replica
        record, me = replica.record, self.manager.node_id
        if record.leader != me and me not in record.isr:
            return True
        if record.isr == (me,) and not entry.alone:
            entry.alone = True
            log.error("the only in-sync replica is damaged: nothing to repair it from; "
                      "serving everything but the damaged batch", extra={
                          "topic": replica.topic, "partition": replica.partition})
        return False

    async def _cut(self, entry: _OutOfService) -> None:
        replica, damage = entry.replica, entry.damage
        assert damage is not None
        async with replica.append_lock:
            before = replica.log.log_end_offset
            try:
                end = await self.disk.run(lambda: replica.log.truncate_at_damage(
                    damage.segment_base_offset, damage.position), [replica])
            except Exception:
                if replica.log.failure is None:
                    raise
                return  # the disk refused: recovered first, then cut again
        entry.damage, entry.repaired = None, True
        log.warning("damaged log cut; fetching the rest again from the leader", extra={
            "topic": replica.topic, "partition": replica.partition,
            "damage": damage.describe(), "from": before, "to": end,
            "leader": replica.record.leader})

    # -- the registration ---------------------------------------------------------------------

    async def _list(self, replica: Replica) -> None:
        self._listed.add((replica.topic, replica.partition))
        await self._publish()

    async def _publish(self) -> bool:
        """Bring the registration's list up to date; False if etcd refused (the caller
        tries again later; a registration made meanwhile carries the list anyway)."""
        async with self._publish_lock:
            wanted = tuple(sorted(self._listed))
            if wanted == self._published:
                return True
            try:
                await self.publish(wanted)
            except Exception as exc:
                log.warning("cannot list the replicas out of service in the registration",
                            extra={"error": repr(exc), "listed": [list(tp) for tp in wanted]})
                return False
            self._published = wanted
            log.info("replicas out of service listed in the registration",
                     extra={"listed": [list(tp) for tp in wanted]})
            return True

    async def _back_in_service(self, entry: _OutOfService) -> None:
        """Unlisted first, so that the leader may take it back into the ISR; then its role."""
        replica = entry.replica
        self._listed.discard((replica.topic, replica.partition))
        try:
            while not self._stopping and not await self._publish():
                await asyncio.sleep(FENCE_RETRY_S)
        finally:
            self._repairs.pop(replica, None)
            replica.out_of_service = None
        if self._live(replica):
            log.info("replica back in service", extra={
                "topic": replica.topic, "partition": replica.partition,
                "log_end_offset": replica.log.log_end_offset})
            await self.manager.reapply_role(replica)

    async def shutdown(self) -> None:
        self._stopping = True  # a new registration starts with an empty list anyway
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
