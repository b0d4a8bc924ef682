"""Kafka's committed-offset APIs on the gateway's Kafka listener: OffsetCommit and
OffsetFetch (and the translation TxnOffsetCommit shares with OffsetCommit).

Topics are named (OffsetCommit up to v9, OffsetFetch up to v9); the topic-id forms
(v10) are not served, so clients use the named ones. OffsetFetch from v8 names several
groups: each is asked of its own coordinator, concurrently. ``require_stable`` (v7+)
gives KIP-447's answer: a partition with transactional offsets pending is answered
UNSTABLE_OFFSET_COMMIT, and the client retries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from services.gateway.kafka.call import CallRefused, Handler, KafkaCall
from services.gateway.kafka.messages import build, kafka_error
from services.gateway.kafka.replies import NO_THROTTLE, ask, module_of, pb_code, strand_code
from strand.errors import ErrorCode
from strand.v1 import groups_pb2 as pb

__all__ = ["HANDLERS", "VERSIONS", "commit_partitions", "commit_refused", "commit_response"]

OFFSET_COMMIT, OFFSET_FETCH = 8, 9
NO_LEADER_EPOCH = -1


def commit_partitions(topics: Iterable[Any]) -> list[pb.OffsetCommitPartition]:
    """The partitions of an OffsetCommit or TxnOffsetCommit request."""
    return [pb.OffsetCommitPartition(
        topic=topic.name, partition=p.partition_index, offset=p.committed_offset,
        leader_epoch=getattr(p, "committed_leader_epoch", NO_LEADER_EPOCH),
        metadata=p.committed_metadata or "")
        for topic in topics for p in topic.partitions]


def commit_refused(exc: CallRefused) -> pb.OffsetCommitResponse:
    return pb.OffsetCommitResponse(error_code=pb_code(exc.code), error_message=exc.message)


def commit_response(request: Any, answer: pb.OffsetCommitResponse) -> Any:
    """The (Txn)OffsetCommit response: every partition asked, with its own answer or the
    group's error (the whole commit was refused)."""
    module = module_of(request)
    name = type(request).__name__.removesuffix("Request") + "Response"
    answered = {(p.topic, p.partition): strand_code(p.error_code) for p in answer.partitions}
    group_code = strand_code(answer.error_code)
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            code = (group_code if group_code is not ErrorCode.NONE
                    else answered.get((topic.name, p.partition_index),
                                      ErrorCode.UNKNOWN_SERVER_ERROR))
            partitions.append(build(module, f"{name}Partition", partition_index=p.partition_index,
                                    error_code=kafka_error(code)))
        topics.append(build(module, f"{name}Topic", name=topic.name,
                            partitions=tuple(partitions)))
    return build(module, name, throttle_time=NO_THROTTLE, topics=tuple(topics))


async def offset_commit(request: Any, call: KafkaCall) -> Any:
    pb_request = pb.OffsetCommitRequest(
        group_id=request.group_id, member_id=request.member_id,
        generation_id=request.generation_id_or_member_epoch,
        group_instance_id=getattr(request, "group_instance_id", None) or "",
        partitions=commit_partitions(request.topics))
    answer = await ask(call.servicer.OffsetCommit, pb_request, call, commit_refused)
    return commit_response(request, answer)


# -- OffsetFetch ---------------------------------------------------------------------------------

async def _fetch_group(call: KafkaCall, group_id: str, topics: tuple[Any, ...] | None,
                       require_stable: bool) -> pb.OffsetFetchResponse:
    partitions = [pb.OffsetFetchRequest.Partition(topic=t.name, partition=index)
                  for t in topics or () for index in t.partition_indexes]
    if topics is not None and not partitions:
        return pb.OffsetFetchResponse()  # asked for no partition: none answered
    return await ask(call.servicer.OffsetFetch, pb.OffsetFetchRequest(
        group_id=group_id, partitions=partitions, require_stable=require_stable), call,
        lambda exc: pb.OffsetFetchResponse(error_code=pb_code(exc.code),
                                           error_message=exc.message))


def _fetched_topics(module: ModuleType, topic_name: str, partition_name: str,
                    answer: pb.OffsetFetchResponse) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for p in answer.partitions:
        by_topic.setdefault(p.topic, []).append(build(
            module, partition_name, partition_index=p.partition,
            committed_offset=p.offset,
            committed_leader_epoch=p.leader_epoch if p.offset >= 0 else NO_LEADER_EPOCH,
            metadata=p.metadata, error_code=kafka_error(p.error_code)))
    return tuple(build(module, topic_name, name=name, partitions=tuple(parts))
                 for name, parts in by_topic.items())


async def offset_fetch(request: Any, call: KafkaCall) -> Any:
    module = module_of(request)
    require_stable = bool(getattr(request, "require_stable", False))
    if request.__version__ < 8:
        answer = await _fetch_group(call, request.group_id, request.topics, require_stable)
        topics = _fetched_topics(module, "OffsetFetchResponseTopic",
                                 "OffsetFetchResponsePartition", answer)
        if request.__version__ < 2 and strand_code(answer.error_code) is not ErrorCode.NONE:
            # v1 has no group-level error: every partition asked carries it.
            topics = tuple(build(
                module, "OffsetFetchResponseTopic", name=t.name, partitions=tuple(
                    build(module, "OffsetFetchResponsePartition",
                          partition_index=i, committed_offset=-1, metadata="",
                          error_code=kafka_error(answer.error_code))
                    for i in t.partition_indexes)) for t in request.topics)
        return build(module, "OffsetFetchResponse", throttle_time=NO_THROTTLE, topics=topics,
                     error_code=kafka_error(answer.error_code))
    answers = await asyncio.gather(*(
        _fetch_group(call, group.group_id, group.topics, require_stable)
        for group in request.groups))
    groups = tuple(build(
        module, "OffsetFetchResponseGroup", group_id=group.group_id,
        topics=_fetched_topics(module, "OffsetFetchResponseTopics",
                               "OffsetFetchResponsePartitions", answer),
        error_code=kafka_error(answer.error_code))
        for group, answer in zip(request.groups, answers, strict=True))
    return build(module, "OffsetFetchResponse", throttle_time=NO_THROTTLE, groups=groups)


HANDLERS: dict[int, Handler] = {
    OFFSET_COMMIT: offset_commit,
    OFFSET_FETCH: offset_fetch,
}

VERSIONS: dict[int, tuple[int, int]] = {
    OFFSET_COMMIT: (2, 9),
    OFFSET_FETCH: (1, 9),
}
