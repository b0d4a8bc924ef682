"""The coordinator's marker writer over storage_calls and group_calls: any partition
without its marker is a typed error naming it (the coordinator retries); all NONE
returns; the partitions of __consumer_offsets go to the group coordinators, never
to storage as control batches."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import grpc
import pytest

from services.transactions.leader_markers import LeaderMarkerWriter
from strand.cluster.cache import MetadataCache
from strand.cluster.group_calls import GroupOffsetsCompleter
from strand.cluster.keys import KeySpace
from strand.cluster.storage_calls import MarkerError, StorageMarkerWriter
from strand.coordination.txn_verifier import OpenedNext
from strand.errors import ErrorCode, NotLeaderOrFollowerError, StrandError

TopicPartition = tuple[str, int]


def _no_network(address: str) -> grpc.aio.Channel:
    raise AssertionError(f"no call may reach {address}: the answers are given")


class Answers(StorageMarkerWriter):
    """storage_calls' writer with the leaders' answers given (no network)."""

    def __init__(self, answers: dict[TopicPartition, MarkerError]) -> None:
        super().__init__(MetadataCache(KeySpace("test")), _no_network)
        self.answers = answers
        self.asked: list[tuple[int, int, int, bool, list[TopicPartition]]] = []
        self.opened: list[OpenedNext | None] = []

    async def write_markers(self, producer_id: int, producer_epoch: int,
                            coordinator_epoch: int, commit: bool,
                            partitions: Iterable[TopicPartition],
                            opened: OpenedNext | None = None
                            ) -> dict[TopicPartition, MarkerError]:
        asked = list(partitions)
        self.opened.append(opened)
        self.asked.append((producer_id, producer_epoch, coordinator_epoch, commit, asked))
        return {tp: self.answers[tp] for tp in asked}


class GroupAnswers(GroupOffsetsCompleter):
    """group_calls' completer with the group coordinators' answers given."""

    def __init__(self, answers: dict[TopicPartition, MarkerError] | None = None) -> None:
        super().__init__(MetadataCache(KeySpace("test")), _no_network)
        self.answers = answers or {}
        self.asked: list[tuple[int, int, int, bool, list[TopicPartition]]] = []
        self.opened: list[OpenedNext | None] = []

    async def complete(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                       commit: bool, partitions: Iterable[TopicPartition]
                       ) -> dict[TopicPartition, MarkerError]:
        asked = list(partitions)
        self.asked.append((producer_id, producer_epoch, coordinator_epoch, commit, asked))
        return {tp: self.answers[tp] for tp in asked}


def writer_of(storage: Answers, groups: GroupAnswers | None = None) -> LeaderMarkerWriter:
    return LeaderMarkerWriter(storage, groups if groups is not None else GroupAnswers())


OK = MarkerError(ErrorCode.NONE, "")


def test_every_partition_written_returns() -> None:
    writer = Answers({("a", 0): OK, ("b", 1): OK})
    asyncio.run(writer_of(writer).write_markers(7, 2, 3, True, [("a", 0), ("b", 1)]))
    assert writer.asked == [(7, 2, 3, True, [("a", 0), ("b", 1)])]


def test_a_partition_without_its_marker_is_a_typed_error_naming_it() -> None:
    writer = Answers({("a", 0): OK, ("b", 1): MarkerError(
        ErrorCode.NOT_LEADER_OR_FOLLOWER, "leader moved to 3")})
    with pytest.raises(NotLeaderOrFollowerError) as raised:
        asyncio.run(writer_of(writer).write_markers(
            7, 2, 3, False, [("a", 0), ("b", 1)]))
    message = str(raised.value)
    assert "b-1: NOT_LEADER_OR_FOLLOWER (leader moved to 3)" in message
    assert "ABORT" in message and "1 of 2 partitions" in message and "a-0" not in message


def test_a_final_refusal_is_an_error_too() -> None:
    writer = Answers({("a", 0): MarkerError(ErrorCode.INVALID_PRODUCER_EPOCH, "old epoch")})
    with pytest.raises(StrandError) as raised:
        asyncio.run(writer_of(writer).write_markers(7, 2, 3, True, [("a", 0)]))
    assert raised.value.code is ErrorCode.INVALID_PRODUCER_EPOCH


def test_offsets_partitions_are_completed_by_their_group_coordinators() -> None:
    storage = Answers({("a", 0): OK})
    groups = GroupAnswers({("__consumer_offsets", 4): OK})
    asyncio.run(writer_of(storage, groups).write_markers(
        7, 2, 3, True, [("a", 0), ("__consumer_offsets", 4)]))
    assert storage.asked == [(7, 2, 3, True, [("a", 0)])]
    assert groups.asked == [(7, 2, 3, True, [("__consumer_offsets", 4)])]


def test_an_offsets_shard_not_completed_is_a_typed_error_naming_it() -> None:
    groups = GroupAnswers({("__consumer_offsets", 4): MarkerError(
        ErrorCode.COORDINATOR_NOT_AVAILABLE, "no group coordinator owns shard 4")})
    with pytest.raises(StrandError) as raised:
        asyncio.run(writer_of(Answers({}), groups).write_markers(
            7, 2, 3, False, [("__consumer_offsets", 4)]))
    assert raised.value.code is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert "__consumer_offsets-4" in str(raised.value)
