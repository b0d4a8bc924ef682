"""ListOffsets: the earliest offset, the latest one, or the first at or after a timestamp.

Only the leader answers, and only with what consumers may read: "latest" is the high
watermark (the last stable offset for ``read_committed``), and a timestamp search
never finds a record above it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from services.storage.disk import DiskExecutor
from services.storage.leader_lookups import on_leaders
from services.storage.replica import Replica
from services.storage.replica_manager import ReplicaManager
from strand.errors import InvalidRequestError
from strand.log.leader_epoch import UNDEFINED_EPOCH
from strand.log.log import PartitionLog

log = logging.getLogger(__name__)

LATEST = -1
EARLIEST = -2
NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class OffsetQuery:
    topic: str
    partition: int
    timestamp: int  # LATEST, EARLIEST, or a timestamp in ms


@dataclass(slots=True)
class OffsetAnswer:
    topic: str
    partition: int
    error_code: int = 0
    error_message: str = ""
    offset: int = -1
    timestamp: int = NO_TIMESTAMP
    leader_epoch: int = UNDEFINED_EPOCH


class OffsetLookup:
    def __init__(self, manager: ReplicaManager, disk: DiskExecutor) -> None:
        self.manager = manager
        self.disk = disk

    async def list_offsets(self, queries: Sequence[OffsetQuery],
                           read_committed: bool) -> list[OffsetAnswer]:
        """One answer per query, in the same order."""
        answers = [OffsetAnswer(q.topic, q.partition) for q in queries]
        await on_leaders(self.manager, self.disk, queries, answers, _check,
                         lambda answer, query, replica: _lookup(
                             answer, query, replica.log, replica.record.leader_epoch,
                             read_committed), "list offsets")
        return answers


def _check(query: OffsetQuery, replica: Replica) -> None:
    if query.timestamp < EARLIEST:
        raise InvalidRequestError(
            f"timestamp {query.timestamp}: expected -1 (latest), -2 (earliest) "
            "or a timestamp >= 0")


def _lookup(answer: OffsetAnswer, query: OffsetQuery, partition_log: PartitionLog,
            current_epoch: int, read_committed: bool) -> None:
    # read_committed stops at the last stable offset (Kafka's ListOffsets).
    upper = (partition_log.last_stable_offset if read_committed
             else partition_log.high_watermark)
    if query.timestamp == LATEST:
        answer.offset = upper
        answer.leader_epoch = current_epoch
        return
    if query.timestamp == EARLIEST:
        answer.offset = partition_log.log_start_offset
        answer.leader_epoch = _epoch_of(partition_log, answer.offset)
        return
    found = partition_log.offset_for_timestamp(query.timestamp, max_offset=upper)
    if found is not None:
        answer.offset, answer.timestamp = found
        answer.leader_epoch = _epoch_of(partition_log, answer.offset)


def _epoch_of(partition_log: PartitionLog, offset: int) -> int:
    """The leader epoch that wrote ``offset`` (from the leader epoch cache)."""
    epoch = UNDEFINED_EPOCH
    for entry in partition_log.leader_epochs.entries():
        if entry.start_offset > offset:
            break
        epoch = entry.epoch
    return epoch


