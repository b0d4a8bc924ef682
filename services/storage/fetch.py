"""The fetch path: read whole batches of the partitions this node leads, with long polling.

A fetch answers at once when it has gathered ``min_bytes`` or any partition has an
error; otherwise it waits until new data becomes visible in one of its partitions or
``max_wait_ms`` passes, then reads again and answers with what there is (Kafka's
DelayedFetch). Waiting is event driven: appends wake the fetches registered on their
partition, and a wake-up only re-reads the logs when the bytes appended since the
first read may reach ``min_bytes`` (counted without touching the disk).

Sizes follow Kafka (KIP-74): partitions are served in request order, each up to
``partition_max_bytes`` and together up to ``max_bytes``; the first batch of the
first partition with data is returned whole even when it is larger than both, so a
consumer always progresses. Consumers read only below the high watermark (the last
stable offset for ``read_committed``, the same until transactions land).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from services.storage.disk import DiskExecutor
from services.storage.errors import (
    FencedLeaderEpochError,
    InvalidFetchSizeError,
    UnknownLeaderEpochError,
    fail_partition,
)
from services.storage.replica import Replica, wait_on_replicas
from services.storage.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

# The records of one response stay below the 64 MiB gRPC message limit with room for
# the envelope (a single batch larger than that cannot be sent either way).
MAX_RESPONSE_BYTES = 63 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1  # -1: the client does not know it


@dataclass(frozen=True, slots=True)
class FetchParams:
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    read_committed: bool
    partitions: Sequence[PartitionFetch]


@dataclass(slots=True)
class FetchedPartition:
    topic: str
    partition: int
    error_code: int = 0
    error_message: str = ""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes = b""


@dataclass(frozen=True, slots=True)
class _Read:
    index: int  # into the request's partitions (and the results)
    replica: Replica
    request: PartitionFetch


class Fetcher:
    def __init__(self, manager: ReplicaManager, disk: DiskExecutor) -> None:
        self.manager = manager
        self.disk = disk

    async def fetch(self, params: FetchParams) -> list[FetchedPartition]:
        """One result per entry of ``params.partitions``, in the same order."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(params.max_wait_ms, 0) / 1000
        reads, results = self._resolve(params)
        # Taken before reading: data appended during the read counts as new (at worst
        # the fetch answers a little early, never late).
        baseline = {read.replica: read.replica.visible_bytes for read in reads}
        versions = {read.replica: read.replica.state_version for read in reads}
        total = await self._read(params, reads, results)
        if (params.max_wait_ms <= 0 or total >= params.min_bytes or not reads
                or any(result.error_code for result in results) or self.manager.stopping):
            return results
        # Until enough new data may be there (counted without reading), something
        # changed, or the deadline.
        await wait_on_replicas(
            baseline, lambda: total + _new_bytes(reads, baseline) >= params.min_bytes,
            deadline, lambda: self.manager.stopping, versions)
        reads, results = self._resolve(params)
        await self._read(params, reads, results)
        return results

    def _resolve(self, params: FetchParams) -> tuple[list[_Read], list[FetchedPartition]]:
        """Which partitions can be read here; the others get their error."""
        results = [FetchedPartition(p.topic, p.partition) for p in params.partitions]
        reads: list[_Read] = []
        for index, request in enumerate(params.partitions):
            try:
                if params.max_bytes < 0 or request.partition_max_bytes < 0:
                    raise InvalidFetchSizeError(
                        f"max_bytes ({params.max_bytes}) and partition_max_bytes "
                        f"({request.partition_max_bytes}) must not be negative")
                replica = self.manager.leader_replica(request.topic, request.partition)
                _check_leader_epoch(request, replica.record.leader_epoch)
            except Exception as exc:
                fail_partition(results[index], exc, "fetch")
                continue
            reads.append(_Read(index, replica, request))
        return reads, results

    async def _read(self, params: FetchParams, reads: list[_Read],
                    results: list[FetchedPartition]) -> int:
        if not reads:
            return 0
        budget = min(params.max_bytes, MAX_RESPONSE_BYTES)
        try:
            return await self.disk.run(
                lambda: _read_logs(reads, results, budget, params.read_committed),
                [read.replica for read in reads])
        except Exception as exc:  # a replica began closing: report it on every partition
            for read in reads:
                fail_partition(results[read.index], exc, "fetch")
            return 0

def _new_bytes(reads: list[_Read], baseline: dict[Replica, int]) -> int:
    """Bytes made visible since the first read, each partition capped at its limit."""
    total = 0
    for read in reads:
        appended = read.replica.visible_bytes - baseline[read.replica]
        limit = read.request.partition_max_bytes
        total += min(appended, limit) if limit > 0 else appended
    return total


def _check_leader_epoch(request: PartitionFetch, current: int) -> None:
    requested = request.current_leader_epoch
    if requested < 0:
        return
    name = f"{request.topic}-{request.partition}"
    if requested < current:
        raise FencedLeaderEpochError(
            f"leader epoch {requested} of {name} is older than the current one ({current})")
    if requested > current:
        raise UnknownLeaderEpochError(
            f"leader epoch {requested} of {name} is newer than this node knows ({current})")




def _read_logs(reads: list[_Read], results: list[FetchedPartition], budget: int,
               read_committed: bool) -> int:
    """Runs in a disk thread: read every partition within the size limits."""
    remaining = budget
    first_batch_whole = True  # until some partition returned data (KIP-74)
    total = 0
    for read in reads:
        result = results[read.index]
        partition_log = read.replica.log
        high_watermark = partition_log.high_watermark
        last_stable_offset = high_watermark  # no transactions yet
        result.high_watermark = high_watermark
        result.last_stable_offset = last_stable_offset
        result.log_start_offset = partition_log.log_start_offset
        limit = max(0, min(read.request.partition_max_bytes, remaining))
        try:
            data = partition_log.read(
                read.request.fetch_offset, limit,
                max_offset=last_stable_offset if read_committed else high_watermark,
                min_one_batch=first_batch_whole)
        except Exception as exc:
            fail_partition(result, exc, "fetch")
            continue
        if data:
            result.records = data
            first_batch_whole = False
            remaining -= len(data)
            total += len(data)
    return total
