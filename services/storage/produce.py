"""The produce path: validate each partition's batches, append them as leader, answer.

Per partition: the node must lead it; the batches are validated by
``PartitionLog.append_as_leader`` (framing, magic, CRC, size against
``max.message.bytes``, offset deltas), stamped with the leader epoch of the
partition record and appended in a disk thread. A bad batch fails its partition
with a typed error and nothing of that partition's request is written; other
partitions of the request are unaffected. Appends to one partition are serialized
in arrival order; different partitions are appended in parallel.

acks: 0, 1 and -1 (all) are accepted. The in-sync replica set is the leader alone
until replication lands, so all three mean "appended by the leader" and every
answer is sent after the append has completed (with acks=0 Kafka sends no answer at
all; a gRPC call always has one, and it is simply not waited for by such clients).
``timeout_ms`` (how long to wait for the ISR) has nothing to wait for yet.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from services.storage.disk import DiskExecutor
from services.storage.errors import (
    InvalidRequiredAcksError,
    NotLeaderOrFollowerError,
    wire_code,
)
from services.storage.replica_manager import ReplicaManager
from strand.errors import InvalidRecordError
from strand.log.log import AppendInfo, PartitionLog
from strand.records.batch import CONTROL_FLAG, HEADER_SIZE, read_header

log = logging.getLogger(__name__)

VALID_ACKS = frozenset((0, 1, -1))


@dataclass(frozen=True, slots=True)
class PartitionAppend:
    topic: str
    partition: int
    records: bytes


@dataclass(slots=True)
class AppendResult:
    topic: str
    partition: int
    error_code: int = 0
    error_message: str = ""
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1


class Appender:
    def __init__(self, manager: ReplicaManager, disk: DiskExecutor) -> None:
        self.manager = manager
        self.disk = disk

    async def append(self, acks: int, partitions: Sequence[PartitionAppend]) -> list[AppendResult]:
        """One result per entry of ``partitions``, in the same order."""
        if acks not in VALID_ACKS:
            error = InvalidRequiredAcksError(f"acks must be 0, 1 or -1, got {acks}")
            return [AppendResult(p.topic, p.partition, wire_code(error), str(error))
                    for p in partitions]
        # Shielded: once started, an append completes (and wakes waiting fetches) even
        # if the client cancels the call.
        return list(await asyncio.gather(*(
            asyncio.shield(self._append_one(p)) for p in partitions)))

    async def _append_one(self, request: PartitionAppend) -> AppendResult:
        result = AppendResult(request.topic, request.partition)
        try:
            replica = self.manager.leader_replica(request.topic, request.partition)
            async with replica.append_lock:
                # Leadership may have moved while this append queued behind others.
                if self.manager.leader_replica(request.topic, request.partition) is not replica:
                    raise NotLeaderOrFollowerError(
                        f"{request.topic}-{request.partition} was re-created; retry")
                epoch = replica.record.leader_epoch
                partition_log = replica.log
                info, log_start = await self.disk.run(
                    lambda: _append_as_leader(partition_log, request.records, epoch), [replica])
        except Exception as exc:
            _fail(result, exc)
            return result
        replica.made_visible(info.size_bytes)
        result.base_offset = info.first_offset
        result.log_append_time_ms = info.log_append_time
        result.log_start_offset = log_start
        return result


def _fail(result: AppendResult, exc: Exception) -> None:
    result.error_code = wire_code(exc)
    result.error_message = str(exc)
    if result.error_code < 0:
        log.error("append failed", exc_info=exc,
                  extra={"topic": result.topic, "partition": result.partition})


def _append_as_leader(partition_log: PartitionLog, records: bytes,
                      leader_epoch: int) -> tuple[AppendInfo, int]:
    _refuse_control_batches(records)
    info = partition_log.append_as_leader(records, leader_epoch)
    # The in-sync replica set is the leader alone: what it has is committed.
    partition_log.update_high_watermark(info.last_offset + 1)
    return info, partition_log.log_start_offset


def _refuse_control_batches(records: bytes) -> None:
    """Control batches (transaction markers) are written by coordinators, never by
    producers (as in Kafka). Only the headers are read; framing errors are left to
    the full validation of the append."""
    view = memoryview(records)
    pos = 0
    while len(view) - pos >= HEADER_SIZE:
        header = read_header(view, pos)
        if header.attributes & CONTROL_FLAG:
            raise InvalidRecordError("producers may not write control batches")
        if header.size_in_bytes < HEADER_SIZE:
            return
        pos += header.size_in_bytes
