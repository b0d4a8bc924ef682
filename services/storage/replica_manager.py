"""The replicas this node hosts, kept equal to what the cluster metadata assigns it.

The manager follows the :class:`MetadataCache` (it wakes when the etcd watch
delivers a change; it never polls) and, for every partition whose replica list
names this node, keeps a :class:`PartitionLog` open under
``<data-dir>/<topic>-<partition>`` with the topic's configuration. It applies
configuration and leadership changes, and closes and deletes a log when its topic
is deleted or its replica moves away. Logs already on disk are opened again on
start (``PartitionLog.open`` recovers them after an unclean shutdown).

Directories under the data directory that the metadata does not assign to this node
at start ("stray" partitions: the topic was deleted while the node was down, or the
node was pointed at the wrong cluster) are left alone with a warning: deleting data
on the word of metadata that may be the wrong cluster's is not worth the risk.

Roles (docs/architecture.md §3): a replica this node leads gets a :class:`LeaderState` (its
followers' progress, from which the high watermark moves); a replica it follows is
handed to the :class:`FollowerRole` (the replica fetchers); a leaderless one waits.
A new leadership starts its leader epoch at the log end offset. Losing leadership
fails the acks=all appends still waiting for followers (NOT_LEADER_OR_FOLLOWER: the
client retries on the new leader). A replica this node cannot serve until it repairs
it (a full or failing disk, a damaged batch) is handed to the :class:`StorageFailures`
role (services.storage.repair): it follows nobody and takes no new leadership (the
controller gives it none but a sole in-sync one) until that role brings it back.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import shutil
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol

from services.storage.disk import DiskExecutor
from services.storage.errors import NotLeaderOrFollowerError
from services.storage.layout import (
    is_safe_topic_name,
    parse_partition_dir,
    partition_dir,
    read_topic_id,
    write_topic_id,
)
from services.storage.leader_state import LeaderState
from services.storage.replica import Replica
from strand.cluster.cache import MetadataCache
from strand.cluster.model import NO_LEADER, PartitionRecord, TopicRecord
from strand.errors import InvalidConfigError, StorageError, UnknownTopicOrPartitionError
from strand.log.config import LogConfig
from strand.log.log import PartitionLog
from strand.service.aio import wait_event

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
DEFAULT_REPLICA_LAG_TIME_MAX_MS = 10_000.0
ROLE_WAIT_S = 1.0


def monotonic_ms() -> float:
    return time.monotonic() * 1000.0


class FollowerRole(Protocol):
    """The replica fetchers: told which replicas this node follows, and whom."""

    def follow(self, replica: Replica) -> None: ...

    def unfollow(self, replica: Replica) -> None: ...


class StorageFailures(Protocol):
    """Takes replicas out of service until repaired, and back (services.storage.repair)."""

    def disk_failed(self, replica: Replica, error: BaseException) -> None: ...

    def opened(self, replica: Replica) -> None:
        """A log was opened: repair it first if a restart cut its repair short."""


class ReplicaManager:
    def __init__(self, node_id: int, data_dir: Path, cache: MetadataCache,
                 disk: DiskExecutor, *,
                 replica_lag_time_max_ms: float = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
                 clock: Callable[[], float] = monotonic_ms) -> None:
        self.node_id = node_id
        self.data_dir = data_dir
        self.cache = cache
        self.disk = disk
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.clock = clock
        self.followers: FollowerRole | None = None  # set by the replication wiring
        self.storage_failures: StorageFailures | None = None  # set by the wiring too
        # Told (old ISR, new ISR) when a led partition's ISR changes by the metadata
        # (the controller's shrinks of dead nodes, or our own proposals' records).
        self.isr_changed: Callable[[tuple[int, ...], tuple[int, ...]], None] | None = None
        self.replicas: dict[TopicPartition, Replica] = {}
        # Assigned partitions whose log could not be opened, and why (retried on every
        # metadata change; clients get KAFKA_STORAGE_ERROR meanwhile).
        self.failed: dict[TopicPartition, str] = {}
        self.stopping = False
        self._reconcile_lock = asyncio.Lock()
        self._follow_task: asyncio.Task[None] | None = None
        self._roles_changed = asyncio.Event()  # replaced after each set: see _roles_moved

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Open every hosted log (the cache must hold its first snapshot), then follow."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        await self.reconcile()
        self._warn_about_strays()
        self._follow_task = asyncio.create_task(self._follow(), name="replica-manager")

    def begin_shutdown(self) -> None:
        """Answer waiting fetches now (the server is about to stop)."""
        self.stopping = True
        for replica in self.replicas.values():
            replica.wake()

    async def shutdown(self) -> None:
        """Stop following the metadata and close every log cleanly."""
        self.begin_shutdown()
        async with self._reconcile_lock:  # never stop half way through opening a log
            if self._follow_task is not None:
                self._follow_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._follow_task
        replicas = list(self.replicas.values())
        self.replicas.clear()
        await asyncio.gather(*(self._close(replica, delete=False) for replica in replicas))
        log.info("closed every partition log", extra={"partitions": len(replicas)})

    async def _follow(self) -> None:
        while True:
            revision = self.cache.revision
            try:
                await self.reconcile()
            except Exception:  # keep following: the next change may repair it
                log.exception("applying metadata changes failed")
            self._roles_moved()
            # The cache's revision grows with every delivered change: one that arrived
            # while reconciling is seen here, so no change is ever missed.
            if self.cache.revision == revision:
                await self.cache.wait_changed()

    # -- storage failures ---------------------------------------------------------------------

    def storage_failed(self, replica: Replica, error: BaseException) -> None:
        """A disk job on ``replica`` raised ``error``: if its log failed on disk (the log
        says so), the replica goes out of service until its disk recovers."""
        if (self.storage_failures is not None and not replica.closing
                and replica.log.failure is not None):
            self.storage_failures.disk_failed(replica, error)

    async def reapply_role(self, replica: Replica) -> None:
        """Lead or follow ``replica`` again as the metadata says (it is back in service)."""
        async with self._reconcile_lock:
            if self.replicas.get((replica.topic, replica.partition)) is replica:
                await self._apply_role(replica, None)
        self._roles_moved()

    # -- lookups ------------------------------------------------------------------------------

    def leader_replica(self, topic: str, partition: int) -> Replica:
        """The replica of a partition this node leads; typed errors otherwise."""
        replica = self.replicas.get((topic, partition))
        if (replica is not None and replica.is_leader(self.node_id)
                and replica.leader_state is not None):
            return replica
        failure = self.failed.get((topic, partition))
        if failure is not None:
            raise StorageError(f"the log of {topic}-{partition} cannot be opened: {failure}")
        record = self.cache.topics.get(topic)
        if record is None or not 0 <= partition < record.partitions:
            raise UnknownTopicOrPartitionError(
                f"this node knows no partition {partition} of topic {topic!r}")
        current = self.cache.partitions.get((topic, partition))
        leader = current.leader if current is not None else -1
        if leader == self.node_id:  # the metadata just arrived; the log is opening
            raise NotLeaderOrFollowerError(
                f"node {self.node_id} is becoming the leader of {topic}-{partition}")
        raise NotLeaderOrFollowerError(
            f"node {self.node_id} does not lead {topic}-{partition} (the leader is "
            f"{'unknown' if leader < 0 else f'node {leader}'})")

    async def leader_replica_soon(self, topic: str, partition: int,
                                  timeout_s: float = ROLE_WAIT_S) -> Replica:
        """:meth:`leader_replica`, waiting up to ``timeout_s`` when this node is about to
        lead the partition (a topic just created, a leadership just moved here): the
        client's request then succeeds instead of coming back for a retry, which could
        reorder its pipelined batches."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            try:
                return self.leader_replica(topic, partition)
            except (NotLeaderOrFollowerError, UnknownTopicOrPartitionError):
                remaining = deadline - loop.time()
                if remaining <= 0 or self.stopping or not self._may_lead_soon(topic, partition):
                    raise
            changed = self._roles_changed
            await wait_event(changed, remaining)

    def _may_lead_soon(self, topic: str, partition: int) -> bool:
        """The metadata names this node leader, or has not shown the partition yet."""
        record = self.cache.partitions.get((topic, partition))
        return record is None or record.leader == self.node_id

    def _roles_moved(self) -> None:
        event, self._roles_changed = self._roles_changed, asyncio.Event()
        event.set()

    # -- applying the metadata ----------------------------------------------------------------

    def _assigned(self) -> dict[TopicPartition, tuple[TopicRecord, PartitionRecord]]:
        assigned: dict[TopicPartition, tuple[TopicRecord, PartitionRecord]] = {}
        for record in self.cache.hosted_by(self.node_id):
            if not is_safe_topic_name(record.topic) or record.partition < 0:
                log.error("refusing to host a partition with an illegal name",
                          extra={"topic": record.topic, "partition": record.partition})
                continue
            assigned[(record.topic, record.partition)] = (
                self.cache.topics[record.topic], record)
        return assigned

    async def reconcile(self) -> None:
        """Open, update, close and delete logs until they match the metadata."""
        async with self._reconcile_lock:
            if self.stopping:
                return
            assigned = self._assigned()
            self.failed = {tp: why for tp, why in self.failed.items() if tp in assigned}
            for tp, replica in list(self.replicas.items()):
                wanted = assigned.get(tp)
                if wanted is None or wanted[0].topic_id != replica.topic_id:
                    del self.replicas[tp]
                    log.info("removing partition", extra={
                        "topic": tp[0], "partition": tp[1], "topic_id": replica.topic_id})
                    await self._close(replica, delete=True)
            changes: list[Coroutine[Any, Any, None]] = []
            for tp, (topic, record) in assigned.items():
                hosted = self.replicas.get(tp)
                if hosted is None:
                    changes.append(self._open(topic, record))
                else:
                    changes.append(self._update(hosted, topic, record))
            await asyncio.gather(*changes)

    async def _open(self, topic: TopicRecord, record: PartitionRecord) -> None:
        directory = partition_dir(self.data_dir, record.topic, record.partition)
        config = _log_config(topic, None)
        try:
            partition_log = await self.disk.run(
                lambda: _open_log(directory, topic.topic_id, config))
        except Exception as exc:
            log.exception("cannot open partition log", extra={"directory": str(directory)})
            self.failed[(record.topic, record.partition)] = f"{type(exc).__name__}: {exc}"
            return
        replica = Replica(topic.topic_id, record, partition_log)
        self.replicas[(record.topic, record.partition)] = replica
        self.failed.pop((record.topic, record.partition), None)
        if self.storage_failures is not None:
            self.storage_failures.opened(replica)
        await self._apply_role(replica, None)
        log.info("hosting partition", extra={
            "topic": record.topic, "partition": record.partition, "leader": record.leader,
            "leader_epoch": record.leader_epoch, "log_start_offset": partition_log.log_start_offset,
            "log_end_offset": partition_log.log_end_offset})

    async def _update(self, replica: Replica, topic: TopicRecord,
                      record: PartitionRecord) -> None:
        partition_log = replica.log
        config = _log_config(topic, partition_log.config)
        previous = replica.record
        if replica.set_record(record):
            log.info("leadership changed", extra={
                "topic": record.topic, "partition": record.partition,
                "leader": record.leader, "leader_epoch": record.leader_epoch})
        await self._apply_role(replica, previous)
        if config == partition_log.config:
            return
        try:
            await self.disk.run(lambda: partition_log.update_config(config), [replica])
        except Exception:
            log.exception("cannot apply the topic config", extra={
                "topic": record.topic, "partition": record.partition})
            return
        log.info("topic config applied", extra={"topic": record.topic,
                                                "partition": record.partition})

    # -- roles --------------------------------------------------------------------------------

    async def _apply_role(self, replica: Replica, previous: PartitionRecord | None) -> None:
        record = replica.record
        me = self.node_id
        state = replica.leader_state
        out_of_service = replica.out_of_service is not None
        if record.leader == me:
            if (state is not None and previous is not None and previous.leader == me
                    and previous.leader_epoch == record.leader_epoch):
                previous_isr = state.isr
                if state.apply_record(record.replicas, record.isr, record.partition_epoch,
                                      self.clock()):
                    if self.isr_changed is not None:
                        self.isr_changed(previous_isr, state.isr)
                    self.maybe_advance_high_watermark(replica)
                return
            if replica.log.failure is None:  # a failed log cannot start an epoch
                await self._become_leader(replica)
            return
        if state is not None or previous is None or (
                previous.leader, previous.leader_epoch) != (record.leader, record.leader_epoch):
            replica.leader_state = None
            replica.fail_high_watermark_waiters(NotLeaderOrFollowerError(
                f"node {me} no longer leads {record.topic}-{record.partition} (leader "
                f"{record.leader}, epoch {record.leader_epoch}); retry on the new leader"))
        if self.followers is None:
            return
        if record.leader == NO_LEADER or out_of_service:
            self.followers.unfollow(replica)
        else:
            self.followers.follow(replica)  # (again: a new leader or epoch restarts it)

    async def _become_leader(self, replica: Replica) -> None:
        record = replica.record
        if self.followers is not None:
            self.followers.unfollow(replica)
        partition_log = replica.log
        epoch = record.leader_epoch
        try:
            start = await self.disk.run(lambda: partition_log.begin_leader_epoch(epoch),
                                        [replica])
        except Exception as exc:
            log.exception("cannot start the leader epoch", extra={
                "topic": record.topic, "partition": record.partition, "leader_epoch": epoch})
            self.storage_failed(replica, exc)
            return
        if replica.record is not record:  # the metadata moved on meanwhile
            return
        replica.leader_state = LeaderState.begin(
            self.node_id, record.replicas, record.isr, epoch, record.partition_epoch, start,
            self.clock())
        log.info("leading partition", extra={
            "topic": record.topic, "partition": record.partition, "leader_epoch": epoch,
            "epoch_start_offset": start, "isr": list(record.isr),
            "high_watermark": partition_log.high_watermark})
        self.maybe_advance_high_watermark(replica)

    def isr_eligible(self, broker: int, replica: Replica | None = None) -> bool:
        """Alive (registered), not shutting down and (given a replica) not listing its
        replica of that partition as offline: may be in, or join, an ISR."""
        registration = self.cache.brokers.get(broker)
        return (registration is not None and not registration.shutting_down
                and (replica is None
                     or not registration.is_offline(replica.topic, replica.partition)))

    def maybe_advance_high_watermark(self, replica: Replica) -> int:
        """Move a led replica's high watermark as far as its followers allow; wake the
        consumers and acks=all appends that were waiting for it. Returns the HW."""
        partition_log = replica.log
        current = partition_log.high_watermark
        state = replica.leader_state
        if state is None:
            return current
        wanted = state.high_watermark(current, partition_log.log_end_offset, self.clock(),
                                      self.replica_lag_time_max_ms,
                                      functools.partial(self.isr_eligible, replica=replica))
        if wanted > current:
            current = partition_log.update_high_watermark(wanted)
            replica.high_watermark_moved(current)
        return current

    async def _close(self, replica: Replica, *, delete: bool) -> None:
        replica.begin_close()
        await replica.idle()
        action = replica.log.delete if delete else replica.log.close
        try:
            await self.disk.run(action)
        except Exception:
            log.exception("closing a partition log failed", extra={
                "directory": str(replica.log.directory), "delete": delete})

    def _warn_about_strays(self) -> None:
        for path in sorted(self.data_dir.iterdir()):
            parsed = parse_partition_dir(path.name)
            if parsed is not None and path.is_dir() and parsed not in self.replicas:
                log.warning("partition directory not assigned to this node; left in place",
                            extra={"directory": str(path), "topic_id": read_topic_id(path)})


@functools.lru_cache(maxsize=1024)
def _parse_config(properties: tuple[tuple[str, str], ...]) -> LogConfig:
    return LogConfig.from_properties(dict(properties))


def _log_config(topic: TopicRecord, current: LogConfig | None) -> LogConfig:
    try:
        return _parse_config(tuple(sorted(topic.config.items())))
    except InvalidConfigError as exc:
        # The controller validates configs, so this is a bug or a hand-edited record.
        log.error("invalid topic config; keeping the %s one",
                  "current" if current is not None else "default",
                  extra={"topic": topic.name, "error": str(exc)})
        return current if current is not None else LogConfig()


def _open_log(directory: Path, topic_id: str, config: LogConfig) -> PartitionLog:
    existing = read_topic_id(directory) if directory.exists() else None
    if existing is not None and existing != topic_id:
        log.warning("partition directory belongs to an older topic of that name; deleting it",
                    extra={"directory": str(directory), "old_topic_id": existing,
                           "topic_id": topic_id})
        shutil.rmtree(directory)
    partition_log = PartitionLog.open(directory, config)
    if existing != topic_id:
        write_topic_id(directory, topic_id)
    return partition_log
