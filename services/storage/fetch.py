"""The fetch path: read whole batches of the partitions this node leads, with long
polling, for consumers (Fetch) and follower replicas (ReplicaFetch) alike.

Like Kafka's ``ReplicaManager.fetchMessages``, one path serves both; who fetches
(:class:`~services.storage.fetch_params.FetchParams`) decides only

* how far the read goes: followers up to the log end offset, consumers below the
  high watermark (the last stable offset for ``read_committed``);
* which bytes wake a waiting fetch: appended ones for followers, ones made visible
  by a high watermark move for consumers;
* one extra step before the read, for followers (:mod:`services.storage.replica_fetch`):
  replica check, divergence (KIP-101/320), recording their progress.

A fetch answers at once when it has gathered ``min_bytes`` or any partition has an
error (or a divergence); otherwise it waits until new data may be there or
``max_wait_ms`` passes, then reads again and answers with what there is (Kafka's
DelayedFetch). Waiting is event driven: appends and high watermark moves wake the
fetches registered on their partition, and a wake-up only re-reads the logs when the
bytes that arrived since the first read may reach ``min_bytes`` (counted without
touching the disk).

Sizes follow Kafka (KIP-74): partitions are served in request order, each up to
``partition_max_bytes`` and together up to ``max_bytes``; the first batch of the
first partition with data is returned whole even when it is larger than both, so a
fetcher always progresses.

Every batch read is verified (framing, CRC-32C, offset order:
:func:`strand.log.integrity.verify_batches`) before it is served. Only the valid
batches before a bad one are served; a partition whose first batch is bad answers
KAFKA_STORAGE_ERROR (clients look for the leader again), and the damage is reported
to the repair (:mod:`services.storage.repair`), which moves the leadership away and
fetches the damaged range again from an in-sync replica.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from services.storage.disk import DiskExecutor
from services.storage.errors import (
    FencedLeaderEpochError,
    InvalidFetchSizeError,
    UnknownLeaderEpochError,
    fail_partition,
)
from services.storage.fetch_params import (
    FetchedPartition,
    FetchIsolation,
    FetchParams,
    PartitionFetch,
)
from services.storage.replica import Replica, wait_on_replicas
from services.storage.replica_fetch import FollowerFetchStep, IsrExpansion
from services.storage.replica_manager import ReplicaManager
from strand.errors import StorageError
from strand.log.integrity import verify_batches

log = logging.getLogger(__name__)

# The records of one response stay below the 64 MiB gRPC message limit with room for
# the envelope (a single batch larger than that cannot be sent either way).
MAX_RESPONSE_BYTES = 63 * 1024 * 1024


class DamageReport(Protocol):
    """Told when a stored batch fails verification (the repair)."""

    def damaged(self, replica: Replica, offset: int, detail: str, found_by: str) -> None: ...


@dataclass(frozen=True, slots=True)
class _Damaged:
    replica: Replica
    offset: int  # the first offset of the bad batch, at most
    detail: str


@dataclass(frozen=True, slots=True)
class _Read:
    index: int  # into the request's partitions (and the results)
    replica: Replica
    request: PartitionFetch


class Fetcher:
    def __init__(self, manager: ReplicaManager, disk: DiskExecutor,
                 isr: IsrExpansion | None = None, damage: DamageReport | None = None) -> None:
        self.manager = manager
        self.disk = disk
        self.followers = FollowerFetchStep(manager, isr)
        self.damage = damage

    async def fetch(self, params: FetchParams) -> list[FetchedPartition]:
        """One result per entry of ``params.partitions``, in the same order."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(params.max_wait_ms, 0) / 1000
        reads, results = self._resolve(params)
        readable = _readable_bytes(params)
        # Taken before reading: data arriving during the read counts as new (at worst
        # the fetch answers a little early, never late).
        baseline = {read.replica: readable(read.replica) for read in reads}
        versions = {read.replica: read.replica.state_version for read in reads}
        total = await self._read(params, reads, results)
        if (params.max_wait_ms <= 0 or total >= params.min_bytes or not reads
                or any(r.error_code or r.diverging_epoch is not None for r in results)
                or self.manager.stopping):
            return results
        # Until enough new data may be there (counted without reading), something
        # changed, or the deadline.
        await wait_on_replicas(
            baseline,
            lambda: total + _new_bytes(reads, baseline, readable) >= params.min_bytes,
            deadline, lambda: self.manager.stopping, versions)
        reads, results = self._resolve(params)
        await self._read(params, reads, results)
        return results

    def _resolve(self, params: FetchParams) -> tuple[list[_Read], list[FetchedPartition]]:
        """Which partitions to read here; the others get their error (or, for a
        follower, their divergence)."""
        results = [FetchedPartition(p.topic, p.partition) for p in params.partitions]
        reads: list[_Read] = []
        for index, request in enumerate(params.partitions):
            result = results[index]
            try:
                if params.max_bytes < 0 or request.partition_max_bytes < 0:
                    raise InvalidFetchSizeError(
                        f"max_bytes ({params.max_bytes}) and partition_max_bytes "
                        f"({request.partition_max_bytes}) must not be negative")
                replica = self.manager.leader_replica(request.topic, request.partition)
                _check_leader_epoch(request, replica.record.leader_epoch)
                if params.replica_id is not None and not self.followers.before_read(
                        params.replica_id, replica, request, result):
                    continue
            except Exception as exc:
                fail_partition(result, exc, _what(params))
                continue
            reads.append(_Read(index, replica, request))
        return reads, results

    async def _read(self, params: FetchParams, reads: list[_Read],
                    results: list[FetchedPartition]) -> int:
        if not reads:
            return 0
        budget = min(params.max_bytes, MAX_RESPONSE_BYTES)
        damaged: list[_Damaged] = []
        try:
            total = await self.disk.run(
                lambda: _read_logs(reads, results, budget, params, self.manager.node_id,
                                   damaged),
                [read.replica for read in reads])
        except Exception as exc:  # a replica began closing: report it on every partition
            for read in reads:
                fail_partition(results[read.index], exc, _what(params))
            return 0
        if self.damage is not None:
            for found in damaged:
                self.damage.damaged(found.replica, found.offset, found.detail, _what(params))
        return total


def _what(params: FetchParams) -> str:
    """How logs name the request."""
    return "replica fetch" if params.is_from_follower else "fetch"


def _readable_bytes(params: FetchParams) -> Callable[[Replica], int]:
    """The running count of bytes this fetch could read in a replica: every appended
    byte for a follower, only those below the high watermark for a consumer (below
    the last stable offset for a read_committed one)."""
    if params.is_from_follower:
        return lambda replica: replica.appended_bytes
    if params.isolation is FetchIsolation.TXN_COMMITTED:
        return lambda replica: replica.stable_bytes
    return lambda replica: replica.visible_bytes


def _new_bytes(reads: list[_Read], baseline: dict[Replica, int],
               readable: Callable[[Replica], int]) -> int:
    """Bytes readable since the first read, each partition capped at its limit."""
    total = 0
    for read in reads:
        arrived = readable(read.replica) - baseline[read.replica]
        limit = read.request.partition_max_bytes
        total += min(arrived, limit) if limit > 0 else arrived
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


def _upper_bound(result: FetchedPartition, isolation: FetchIsolation) -> int | None:
    """The offset (exclusive) a fetch of ``isolation`` reads up to; None: the log end."""
    if isolation is FetchIsolation.LOG_END:
        return None
    if isolation is FetchIsolation.TXN_COMMITTED:
        return result.last_stable_offset
    return result.high_watermark


def _read_logs(reads: list[_Read], results: list[FetchedPartition], budget: int,
               params: FetchParams, node_id: int, damaged: list[_Damaged]) -> int:
    """Runs in a disk thread: read every partition within the size limits, verified
    (a bad batch is added to ``damaged`` and never served)."""
    remaining = budget
    first_batch_whole = True  # until some partition returned data (KIP-74)
    total = 0
    for read in reads:
        result = results[read.index]
        partition_log = read.replica.log
        result.high_watermark = partition_log.high_watermark
        result.last_stable_offset = partition_log.last_stable_offset
        result.log_start_offset = partition_log.log_start_offset
        result.log_end_offset = partition_log.log_end_offset
        limit = max(0, min(read.request.partition_max_bytes, remaining))
        try:
            data = partition_log.read(
                read.request.fetch_offset, limit,
                max_offset=_upper_bound(result, params.isolation),
                min_one_batch=first_batch_whole)
            data, end = _verified(read, data, node_id, damaged)
            if data and params.is_from_follower and read.replica.append_traces:
                result.traces = read.replica.append_traces.covering(
                    read.request.fetch_offset, end)
            if data and params.isolation is FetchIsolation.TXN_COMMITTED:
                # The consumer drops the records of these (Kafka's FetchResponse
                # aborted_transactions): those overlapping what is returned.
                result.aborted_transactions = [
                    (txn.producer_id, txn.first_offset) for txn in
                    partition_log.aborted_transactions(read.request.fetch_offset, end)]
        except Exception as exc:
            fail_partition(result, exc, _what(params))
            continue
        if data:
            result.records = data
            first_batch_whole = False
            remaining -= len(data)
            total += len(data)
    return total


def _verified(read: _Read, data: bytes, node_id: int,
              damaged: list[_Damaged]) -> tuple[bytes, int]:
    """The valid batches at the start of ``data`` and the offset after them;
    StorageError if there is none."""
    checked = verify_batches(data)
    if checked.error is None:
        return data, checked.next_offset
    offset = checked.next_offset if checked.batches else read.request.fetch_offset
    damaged.append(_Damaged(read.replica, offset, checked.error))
    if checked.batches:
        return data[:checked.valid_bytes], checked.next_offset
    request = read.request
    raise StorageError(
        f"the stored batch at offset {offset} of {request.topic}-{request.partition} on node "
        f"{node_id} fails verification ({checked.error}): it is not served, and this copy "
        "is being repaired from an in-sync replica; retry (the leadership moves)")
