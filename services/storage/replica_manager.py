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

Until replication lands the in-sync replica set is just the leader, so the leader's
high watermark is its log end offset (set when it opens or becomes leader, and
after each append).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import shutil
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from services.storage.disk import DiskExecutor
from services.storage.errors import NotLeaderOrFollowerError
from services.storage.layout import (
    is_safe_topic_name,
    parse_partition_dir,
    partition_dir,
    read_topic_id,
    write_topic_id,
)
from services.storage.replica import Replica
from strand.cluster.cache import MetadataCache
from strand.cluster.model import PartitionRecord, TopicRecord
from strand.errors import InvalidConfigError, StorageError, UnknownTopicOrPartitionError
from strand.log.config import LogConfig
from strand.log.log import PartitionLog

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class ReplicaManager:
    def __init__(self, node_id: int, data_dir: Path, cache: MetadataCache,
                 disk: DiskExecutor) -> None:
        self.node_id = node_id
        self.data_dir = data_dir
        self.cache = cache
        self.disk = disk
        self.replicas: dict[TopicPartition, Replica] = {}
        # Assigned partitions whose log could not be opened, and why (retried on every
        # metadata change; clients get KAFKA_STORAGE_ERROR meanwhile).
        self.failed: dict[TopicPartition, str] = {}
        self.stopping = False
        self._reconcile_lock = asyncio.Lock()
        self._follow_task: asyncio.Task[None] | None = None

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
            # The cache's revision grows with every delivered change: one that arrived
            # while reconciling is seen here, so no change is ever missed.
            if self.cache.revision == revision:
                await self.cache.wait_changed()

    # -- lookups ------------------------------------------------------------------------------

    def leader_replica(self, topic: str, partition: int) -> Replica:
        """The replica of a partition this node leads; typed errors otherwise."""
        replica = self.replicas.get((topic, partition))
        if replica is not None and replica.is_leader(self.node_id):
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
        leads = record.leader == self.node_id
        try:
            partition_log = await self.disk.run(
                lambda: _open_log(directory, topic.topic_id, config, leads))
        except Exception as exc:
            log.exception("cannot open partition log", extra={"directory": str(directory)})
            self.failed[(record.topic, record.partition)] = f"{type(exc).__name__}: {exc}"
            return
        replica = Replica(topic.topic_id, record, partition_log)
        self.replicas[(record.topic, record.partition)] = replica
        self.failed.pop((record.topic, record.partition), None)
        log.info("hosting partition", extra={
            "topic": record.topic, "partition": record.partition, "leader": record.leader,
            "leader_epoch": record.leader_epoch, "log_start_offset": partition_log.log_start_offset,
            "log_end_offset": partition_log.log_end_offset})

    async def _update(self, replica: Replica, topic: TopicRecord,
                      record: PartitionRecord) -> None:
        partition_log = replica.log
        config = _log_config(topic, partition_log.config)
        was_leader = replica.is_leader(self.node_id)
        if replica.set_record(record):
            log.info("leadership changed", extra={
                "topic": record.topic, "partition": record.partition,
                "leader": record.leader, "leader_epoch": record.leader_epoch})
        gained = not was_leader and replica.is_leader(self.node_id)
        reconfigure = config != partition_log.config
        if not reconfigure and not gained:
            return

        def apply() -> None:
            if reconfigure:
                partition_log.update_config(config)
            if gained:  # the in-sync replica set is the leader alone
                partition_log.update_high_watermark(partition_log.log_end_offset)

        try:
            await self.disk.run(apply, [replica])
        except Exception:
            log.exception("cannot apply partition changes", extra={
                "topic": record.topic, "partition": record.partition})
            return
        if reconfigure:
            log.info("topic config applied", extra={"topic": record.topic,
                                                    "partition": record.partition})

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


def _open_log(directory: Path, topic_id: str, config: LogConfig, leads: bool) -> PartitionLog:
    existing = read_topic_id(directory) if directory.exists() else None
    if existing is not None and existing != topic_id:
        log.warning("partition directory belongs to an older topic of that name; deleting it",
                    extra={"directory": str(directory), "old_topic_id": existing,
                           "topic_id": topic_id})
        shutil.rmtree(directory)
    partition_log = PartitionLog.open(directory, config)
    if existing != topic_id:
        write_topic_id(directory, topic_id)
    if leads:  # the in-sync replica set is the leader alone
        partition_log.update_high_watermark(partition_log.log_end_offset)
    return partition_log
