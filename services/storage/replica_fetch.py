"""The leader's side of replication: answer followers' ReplicaFetch (DESIGN §5).

One request carries every partition a follower node follows on this node. Per
partition the leader

* checks the follower's leader epoch (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH)
  and that it is a replica at all;
* checks for divergence (KIP-101 / KIP-320): the end offset of the follower's last
  epoch in the leader's log must not be below the follower's fetch offset, else
  the answer names (epoch, end offset) to truncate to and carries no records;
* records the follower's progress — its fetch offset is its log end offset — which
  may move the high watermark (completing acks=all appends) and let it rejoin the
  ISR;
* returns whole batches from the fetch offset up to the log end offset (followers
  read past the high watermark; consumers never do), as stored, byte for byte.

With nothing to return it waits, like a consumer fetch, until an append wakes it
or ``max_wait_ms`` passes (no polling).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from services.storage.disk import DiskExecutor
from services.storage.errors import (
    FencedLeaderEpochError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
    fail_partition,
)
from services.storage.fetch import MAX_RESPONSE_BYTES
from services.storage.replica import Replica, wait_on_replicas
from services.storage.replica_manager import ReplicaManager
from strand.log.log import PartitionLog

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReplicaFetchPartition:
    topic: str
    partition: int
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    partition_max_bytes: int
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class ReplicaFetchParams:
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partitions: Sequence[ReplicaFetchPartition]


@dataclass(slots=True)
class ReplicaFetchResult:
    topic: str
    partition: int
    error_code: int = 0
    error_message: str = ""
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset)
    records: bytes = b""


class IsrExpansion(Protocol):
    """Told when a follower of a led partition made progress (it may rejoin the ISR)."""

    def follower_progressed(self, replica: Replica, broker: int) -> None: ...


@dataclass(slots=True)
class _Read:
    index: int
    replica: Replica
    request: ReplicaFetchPartition


class ReplicaFetchHandler:
    def __init__(self, manager: ReplicaManager, disk: DiskExecutor,
                 isr: IsrExpansion | None = None) -> None:
        self.manager = manager
        self.disk = disk
        self.isr = isr

    async def fetch(self, params: ReplicaFetchParams) -> list[ReplicaFetchResult]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(params.max_wait_ms, 0) / 1000
        reads, results = self._resolve(params)
        baseline = {read.replica: read.replica.appended_bytes for read in reads}
        versions = {read.replica: read.replica.state_version for read in reads}
        total = await self._read(params, reads, results)
        if (params.max_wait_ms <= 0 or total >= params.min_bytes or not reads
                or any(r.error_code or r.diverging_epoch for r in results)
                or self.manager.stopping):
            return results
        await wait_on_replicas(
            baseline, lambda: any(r.appended_bytes != n for r, n in baseline.items()),
            deadline, lambda: self.manager.stopping, versions)
        reads, results = self._resolve(params)
        await self._read(params, reads, results)
        return results

    def _resolve(self, params: ReplicaFetchParams) -> tuple[list[_Read], list[ReplicaFetchResult]]:
        """Check each partition, detect divergence, record the follower's progress."""
        results = [ReplicaFetchResult(p.topic, p.partition) for p in params.partitions]
        reads: list[_Read] = []
        follower = params.replica_id
        for index, request in enumerate(params.partitions):
            result = results[index]
            try:
                replica = self.manager.leader_replica(request.topic, request.partition)
                _check_epoch(request, replica.record.leader_epoch)
                if follower not in replica.record.replicas or follower == self.manager.node_id:
                    raise NotLeaderOrFollowerError(
                        f"broker {follower} is not a follower of "
                        f"{request.topic}-{request.partition}")
                partition_log = replica.log
                result.log_end_offset = partition_log.log_end_offset
                result.log_start_offset = partition_log.log_start_offset
                diverging = diverging_epoch(partition_log, request.last_fetched_epoch,
                                            request.fetch_offset)
                if diverging is not None:
                    result.diverging_epoch = diverging
                    result.high_watermark = partition_log.high_watermark
                    log.info("follower log diverges", extra={
                        "topic": request.topic, "partition": request.partition,
                        "follower": follower, "fetch_offset": request.fetch_offset,
                        "last_fetched_epoch": request.last_fetched_epoch,
                        "epoch": diverging[0], "end_offset": diverging[1]})
                    continue
                self._record_progress(replica, follower, request.fetch_offset)
                result.high_watermark = partition_log.high_watermark
            except Exception as exc:
                fail_partition(result, exc, "replica fetch")
                continue
            reads.append(_Read(index, replica, request))
        return reads, results

    def _record_progress(self, replica: Replica, follower: int, fetch_offset: int) -> None:
        state = replica.leader_state
        if state is None or fetch_offset > replica.log.log_end_offset:
            return  # out of range: the read answers OFFSET_OUT_OF_RANGE
        state.update_follower(follower, fetch_offset, replica.log.log_end_offset,
                              self.manager.clock())
        self.manager.maybe_advance_high_watermark(replica)
        if self.isr is not None:
            self.isr.follower_progressed(replica, follower)

    async def _read(self, params: ReplicaFetchParams, reads: list[_Read],
                    results: list[ReplicaFetchResult]) -> int:
        if not reads:
            return 0
        budget = min(params.max_bytes, MAX_RESPONSE_BYTES)

        def read_all() -> int:
            remaining, total, first = budget, 0, True
            for read in reads:
                result = results[read.index]
                limit = max(0, min(read.request.partition_max_bytes, remaining))
                try:
                    data = read.replica.log.read(read.request.fetch_offset, limit,
                                                 min_one_batch=first)
                except Exception as exc:
                    fail_partition(result, exc, "replica fetch")
                    continue
                if data:
                    result.records = data
                    first = False
                    remaining -= len(data)
                    total += len(data)
            return total

        try:
            return await self.disk.run(read_all, [read.replica for read in reads])
        except Exception as exc:  # a replica began closing
            for read in reads:
                fail_partition(results[read.index], exc, "replica fetch")
            return 0


def _check_epoch(request: ReplicaFetchPartition, current: int) -> None:
    name = f"{request.topic}-{request.partition}"
    if request.current_leader_epoch < current:
        raise FencedLeaderEpochError(
            f"leader epoch {request.current_leader_epoch} of {name} is older than {current}")
    if request.current_leader_epoch > current:
        raise UnknownLeaderEpochError(
            f"leader epoch {request.current_leader_epoch} of {name} is newer than {current}")


def diverging_epoch(leader_log: PartitionLog, last_fetched_epoch: int,
                    fetch_offset: int) -> tuple[int, int] | None:
    """(epoch, end offset) when a follower whose last batch has ``last_fetched_epoch``
    and whose log ends at ``fetch_offset`` diverges from ``leader_log``, else None."""
    if last_fetched_epoch < 0:
        return None
    epoch, end = leader_log.end_offset_for_epoch(last_fetched_epoch)
    if epoch < 0 or end < fetch_offset or epoch < last_fetched_epoch:
        return epoch, end
    return None


