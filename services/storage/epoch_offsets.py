"""OffsetForLeaderEpoch: where a leader epoch ends in the leader's log.

After a leader change a consumer asks the new leader for the end of the epoch of the
last record it read (KIP-320): an end offset below the consumer's position means the
records it read past that offset were truncated away, and it resets instead of
silently skipping or re-reading. Only the leader answers; the client's
``current_leader_epoch`` is checked as a fetch's is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.storage.disk import DiskExecutor
from services.storage.leader_lookups import on_leaders
from services.storage.replica import Replica
from services.storage.replica_manager import ReplicaManager
from strand.errors import FencedLeaderEpochError, UnknownLeaderEpochError
from strand.log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_OFFSET

__all__ = ["EpochEndAnswer", "EpochEndLookup", "EpochEndQuery"]


@dataclass(frozen=True, slots=True)
class EpochEndQuery:
    topic: str
    partition: int
    current_leader_epoch: int  # -1: the client does not know it (no check)
    leader_epoch: int  # the epoch whose end is asked for


@dataclass(slots=True)
class EpochEndAnswer:
    topic: str
    partition: int
    error_code: int = 0
    error_message: str = ""
    leader_epoch: int = UNDEFINED_EPOCH
    end_offset: int = UNDEFINED_OFFSET


def check_current_epoch(query: EpochEndQuery, current: int) -> None:
    """The client's view of the leader epoch against this leader's (as Kafka's)."""
    known = query.current_leader_epoch
    name = f"{query.topic}-{query.partition}"
    if 0 <= known < current:
        raise FencedLeaderEpochError(
            f"leader epoch {known} of {name} is older than the current one ({current}): "
            "refresh the metadata")
    if known > current:
        raise UnknownLeaderEpochError(
            f"leader epoch {known} of {name} is newer than this leader knows ({current})")


class EpochEndLookup:
    def __init__(self, manager: ReplicaManager, disk: DiskExecutor) -> None:
        self.manager = manager
        self.disk = disk

    async def end_offsets(self, queries: Sequence[EpochEndQuery]) -> list[EpochEndAnswer]:
        """One answer per query, in the same order."""
        answers = [EpochEndAnswer(q.topic, q.partition) for q in queries]

        def lookup(answer: EpochEndAnswer, query: EpochEndQuery, replica: Replica) -> None:
            answer.leader_epoch, answer.end_offset = replica.log.end_offset_for_epoch(
                query.leader_epoch)

        await on_leaders(self.manager, self.disk, queries, answers,
                         lambda query, replica: check_current_epoch(
                             query, replica.record.leader_epoch),
                         lookup, "offset for leader epoch")
        return answers
