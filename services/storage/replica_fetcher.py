"""The follower's side of replication: one fetcher per leader node (docs/architecture.md §3).

Each fetcher pulls every partition this node follows on one leader, in one
long-polling ReplicaFetch call at a time, and for each partition of the answer:

* appends the batches as they came (``append_as_follower``: offsets and epochs are
  the leader's), then sets its high watermark to min(leader's HW, its own end);
* on a divergence answer truncates to where the logs agree (KIP-101) and goes on;
* on OFFSET_OUT_OF_RANGE starts over at the leader's log start (retention ran
  ahead of it) or cuts back to the leader's end (it holds more than the leader);
* on a stale or unknown leader epoch, or a leader that no longer leads, backs off
  until the metadata (the etcd watch) says whom to follow.

A partition's state carries the leader epoch it follows under; answers for an older
leadership are dropped, so a role change never races an append. Appends and
truncations take the replica's append lock and run in disk threads.

Replicas being added by a reassignment copy at most ``throttle_bytes_per_s`` (one
token bucket for the node), so moving a partition does not starve the traffic of
the partitions already in sync.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from services.storage.append_traces import replica_append_spans
from services.storage.disk import DiskExecutor
from services.storage.fetch_params import FetchedPartition, FetchParams, PartitionFetch
from services.storage.replica import Replica
from services.storage.replica_manager import ReplicaManager
from strand.errors import ErrorCode
from strand.log.log import PartitionLog
from strand.service.aio import wait_event

log = logging.getLogger(__name__)

MAX_WAIT_MS = 500
MAX_BYTES = 16 * 1024 * 1024
PARTITION_MAX_BYTES = 4 * 1024 * 1024
DEFAULT_THROTTLE_BYTES_PER_S = 50 * 1024 * 1024
RETRY_BACKOFF_S = 0.2
RETRY_BACKOFF_MAX_S = 2.0
_RETRY_LATER = frozenset((ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                          ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                          ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.LEADER_NOT_AVAILABLE))


class ReplicaFetchClient(Protocol):
    """Sends a ReplicaFetch to a leader node (gRPC lives in services.storage.peers)."""

    async def replica_fetch(self, leader: int,
                            params: FetchParams) -> Sequence[FetchedPartition]: ...


class ByteRateThrottle:
    """A token bucket of bytes per second (burst: one second's worth)."""

    def __init__(self, bytes_per_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = bytes_per_s
        self._clock = clock
        self._tokens = bytes_per_s
        self._at = clock()

    def available(self) -> float:
        now = self._clock()
        self._tokens = min(self.rate, self._tokens + (now - self._at) * self.rate)
        self._at = now
        return self._tokens

    def consume(self, size: int) -> None:
        self.available()
        self._tokens -= size

    def seconds_until_available(self) -> float:
        return max(0.0, -self.available() / self.rate) + 0.01


@dataclass(slots=True)
class _Followed:
    replica: Replica
    leader_epoch: int
    retry_at: float = 0.0  # loop time before which the partition is left out


class LeaderFetcher:
    """Pulls the partitions this node follows on one leader node."""

    def __init__(self, owner: ReplicaFetchers, leader: int) -> None:
        self.owner = owner
        self.leader = leader
        self.partitions: dict[tuple[str, int], _Followed] = {}
        self.changed = asyncio.Event()
        self.task = asyncio.create_task(self._run(), name=f"replica-fetcher-{leader}")

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = RETRY_BACKOFF_S
        while self.partitions:
            now = loop.time()
            throttle = self.owner.throttle
            node = self.owner.manager.node_id
            wanted, requests, throttled = [], [], False
            for f in self.partitions.values():
                if f.retry_at > now:
                    continue
                limit = PARTITION_MAX_BYTES
                if node in f.replica.record.adding:  # copying for a reassignment
                    allowance = throttle.available()
                    if allowance <= 0:
                        f.retry_at = now + throttle.seconds_until_available()
                        continue
                    limit = max(1, min(limit, int(allowance)))
                    throttled = True
                wanted.append(f)
                requests.append(self._request(f, limit))
            if not wanted:
                soonest = min(f.retry_at for f in self.partitions.values())
                self.changed.clear()
                await wait_event(self.changed, max(0.0, soonest - now))
                continue
            params = FetchParams.from_follower(
                node, max_wait_ms=MAX_WAIT_MS, min_bytes=1, max_bytes=MAX_BYTES,
                partitions=requests)
            try:
                results = await self.owner.client.replica_fetch(self.leader, params)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("replica fetch failed", extra={
                    "leader": self.leader, "error": str(exc), "retry_s": backoff})
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
                continue
            backoff = RETRY_BACKOFF_S
            followed = {(f.replica.topic, f.replica.partition): f for f in wanted}
            if throttled:
                throttle.consume(sum(len(r.records) for r in results
                                     if (r.topic, r.partition) in followed and node in
                                     followed[(r.topic, r.partition)].replica.record.adding))
            await asyncio.gather(*(
                self._handle(followed[(r.topic, r.partition)], r) for r in results
                if (r.topic, r.partition) in followed))

    @staticmethod
    def _request(followed: _Followed, max_bytes: int) -> PartitionFetch:
        replica = followed.replica
        partition_log = replica.log
        return PartitionFetch(
            topic=replica.topic, partition=replica.partition,
            fetch_offset=partition_log.log_end_offset,
            current_leader_epoch=followed.leader_epoch,
            last_fetched_epoch=partition_log.last_epoch,
            partition_max_bytes=max_bytes,
            log_start_offset=partition_log.log_start_offset)

    def _current(self, followed: _Followed) -> bool:
        tp = (followed.replica.topic, followed.replica.partition)
        return self.partitions.get(tp) is followed and not followed.replica.closing

    async def _handle(self, followed: _Followed, result: FetchedPartition) -> None:
        replica = followed.replica
        disk = self.owner.disk
        try:
            async with replica.append_lock:
                if not self._current(followed):
                    return  # the leadership changed while the call was out
                partition_log = replica.log
                if result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    await disk.run(lambda: _reset_out_of_range(partition_log, result), [replica])
                    return
                if result.error_code != ErrorCode.NONE:
                    self._retry_later(followed, result)
                    return
                if result.diverging_epoch is not None:
                    epoch, end = result.diverging_epoch
                    await disk.run(lambda: _truncate(partition_log, epoch, end), [replica])
                    return
                if result.records:
                    with replica_append_spans(replica.topic, replica.partition,
                                              self.owner.manager.node_id, result.traces):
                        info = await disk.run(
                            lambda: partition_log.append_as_follower(result.records),
                            [replica])
                    replica.appended(info.last_offset + 1, info.size_bytes)
                high_watermark = min(result.high_watermark, partition_log.log_end_offset)
                if high_watermark > partition_log.high_watermark:
                    replica.high_watermark_moved(
                        partition_log.update_high_watermark(high_watermark))
        except Exception as exc:
            self.owner.manager.storage_failed(replica, exc)
            if not replica.closing:
                log.exception("applying a replica fetch failed", extra={
                    "topic": replica.topic, "partition": replica.partition,
                    "leader": self.leader})
                followed.retry_at = asyncio.get_running_loop().time() + RETRY_BACKOFF_MAX_S

    def _retry_later(self, followed: _Followed, result: FetchedPartition) -> None:
        code = result.error_code
        level = logging.INFO if code in _RETRY_LATER else logging.WARNING
        log.log(level, "leader refused a replica fetch", extra={
            "topic": result.topic, "partition": result.partition, "leader": self.leader,
            "error": ErrorCode(code).name if code in ErrorCode._value2member_map_ else code,
            "detail": result.error_message})
        followed.retry_at = asyncio.get_running_loop().time() + RETRY_BACKOFF_S * 5


def _truncate(partition_log: PartitionLog, epoch: int, end: int) -> None:
    offset = partition_log.truncation_offset(epoch, end)
    before = partition_log.log_end_offset
    partition_log.truncate_to(offset)
    log.info("truncated a diverging follower log", extra={
        "directory": str(partition_log.directory), "leader_epoch": epoch,
        "leader_end_offset": end, "from": before, "to": partition_log.log_end_offset})


def _reset_out_of_range(partition_log: PartitionLog,
                        result: FetchedPartition) -> None:
    end = partition_log.log_end_offset
    if result.log_start_offset > end:
        log.info("follower behind the leader's log start: starting over there", extra={
            "directory": str(partition_log.directory), "offset": result.log_start_offset})
        partition_log.truncate_fully_and_start_at(result.log_start_offset)
    elif 0 <= result.log_end_offset < end:
        log.warning("follower holds more than the leader: cutting back", extra={
            "directory": str(partition_log.directory), "from": end,
            "to": result.log_end_offset})
        partition_log.truncate_to(result.log_end_offset)


class ReplicaFetchers:
    """The follower role of the replica manager: which replicas follow whom."""

    def __init__(self, manager: ReplicaManager, disk: DiskExecutor,
                 client: ReplicaFetchClient, *,
                 throttle_bytes_per_s: float = DEFAULT_THROTTLE_BYTES_PER_S) -> None:
        self.manager = manager
        self.disk = disk
        self.client = client
        self.throttle = ByteRateThrottle(throttle_bytes_per_s)
        self.fetchers: dict[int, LeaderFetcher] = {}
        self._following: dict[tuple[str, int], tuple[int, _Followed]] = {}

    def follow(self, replica: Replica) -> None:
        tp = (replica.topic, replica.partition)
        leader, epoch = replica.record.leader, replica.record.leader_epoch
        current = self._following.get(tp)
        if current is not None:
            current_leader, followed = current
            if (current_leader == leader and followed.leader_epoch == epoch
                    and followed.replica is replica):
                return
            self.unfollow(replica)
        followed = _Followed(replica, epoch)
        fetcher = self.fetchers.get(leader)
        if fetcher is None or fetcher.task.done():
            fetcher = self.fetchers[leader] = LeaderFetcher(self, leader)
        fetcher.partitions[tp] = followed
        fetcher.changed.set()
        self._following[tp] = (leader, followed)
        log.info("following partition", extra={
            "topic": replica.topic, "partition": replica.partition, "leader": leader,
            "leader_epoch": epoch, "log_end_offset": replica.log.log_end_offset})

    def unfollow(self, replica: Replica) -> None:
        tp = (replica.topic, replica.partition)
        current = self._following.pop(tp, None)
        if current is None:
            return
        fetcher = self.fetchers.get(current[0])
        if fetcher is not None:
            fetcher.partitions.pop(tp, None)
            fetcher.changed.set()
            if not fetcher.partitions:
                del self.fetchers[current[0]]  # its loop ends with its last partition

    async def shutdown(self) -> None:
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        self._following.clear()
        for fetcher in fetchers:
            fetcher.task.cancel()
        await asyncio.gather(*(f.task for f in fetchers), return_exceptions=True)
