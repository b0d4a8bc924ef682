"""Fetch (key 1): Kafka consumers' fetches through the servicer's Fetch, with
incremental fetch sessions (KIP-227, :mod:`.fetch_sessions`).

The servicer long-polls the partitions' leaders (max wait, min bytes, max bytes,
partition max bytes, isolation level) and checks ACLs and quotas; the stored batches
go back to the client as they are. Versions 13 and later name topics by id.
Preferred read replica: always -1 (read from the leader, through the gateway).
"""

from __future__ import annotations

import uuid
import weakref
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.primitive import Records

from services.gateway.kafka.call import CallRefused, Handler, KafkaCall
from services.gateway.kafka.fetch_sessions import (
    FINAL_EPOCH,
    FetchContext,
    FetchPosition,
    FetchSessionCache,
    FetchSessionError,
    PartitionKey,
    PartitionNews,
)
from services.gateway.kafka.messages import (
    build,
    kafka_error,
    milliseconds,
    response_module,
    timedelta_ms,
    topic_uuid,
)
from strand.errors import ErrorCode
from strand.v1 import common_pb2 as pb

if TYPE_CHECKING:
    from services.gateway.server import GatewayServicer

__all__ = ["HANDLERS", "VERSIONS", "install_session_cache", "session_cache"]

FETCH_KEY = 1
FIRST_TOPIC_ID_VERSION = 13
_NO_REPLICA = -1
_CACHES: weakref.WeakKeyDictionary[GatewayServicer, FetchSessionCache] = (
    weakref.WeakKeyDictionary())


def _isolation(request: Any) -> pb.IsolationLevel:
    return (pb.READ_COMMITTED if getattr(request, "isolation_level", 0) == 1
            else pb.READ_UNCOMMITTED)


def install_session_cache(servicer: GatewayServicer, cache: FetchSessionCache) -> None:
    """Use ``cache`` for the fetch sessions of ``servicer``'s Kafka clients."""
    _CACHES[servicer] = cache


def session_cache(servicer: GatewayServicer) -> FetchSessionCache:
    """The gateway's fetch session cache (one per gateway, Kafka's defaults if none
    was installed)."""
    cache = _CACHES.get(servicer)
    if cache is None:
        cache = _CACHES[servicer] = FetchSessionCache()
    return cache


class _Topics:
    """Topic names of topic ids (Fetch v13+), looked up once per request."""

    def __init__(self, call: KafkaCall) -> None:
        self.by_id: dict[uuid.UUID, str] | None = None
        self.ids: dict[str, uuid.UUID] = {}
        self.call = call

    def name(self, topic: Any) -> str | None:
        if self.call.api_version < FIRST_TOPIC_ID_VERSION:
            return str(topic.topic)
        if self.by_id is None:
            self.by_id = {topic_uuid(record.topic_id): name
                          for name, record in self.call.servicer.cache.topics.items()}
        return self.by_id.get(topic.topic_id)


def _wanted(request: Any, topics: _Topics) -> tuple[
        list[tuple[PartitionKey, FetchPosition]], list[PartitionKey], list[tuple[Any, int]]]:
    """(partitions asked for, forgotten ones, (topic id, partition) of unknown ids)."""
    requested: list[tuple[PartitionKey, FetchPosition]] = []
    unknown: list[tuple[Any, int]] = []
    for topic in request.topics:
        name = topics.name(topic)
        topic_id = getattr(topic, "topic_id", None)
        for part in topic.partitions:
            if name is None:
                unknown.append((topic_id, part.partition))
                continue
            requested.append(((name, part.partition), FetchPosition(
                part.fetch_offset, part.partition_max_bytes,
                getattr(part, "current_leader_epoch", -1), topic_id)))
    forgotten: list[PartitionKey] = []
    for topic in getattr(request, "forgotten_topics_data", ()):
        name = topics.name(topic)
        if name is not None:
            forgotten.extend((name, index) for index in topic.partitions)
    return requested, forgotten, unknown


def _pb_request(request: Any, context: FetchContext) -> pb.FetchRequest:
    by_topic: dict[str, list[pb.PartitionFetchData]] = {}
    for (topic, index), cached in context.partitions.items():
        position = cached.position
        by_topic.setdefault(topic, []).append(pb.PartitionFetchData(
            partition=index, fetch_offset=position.fetch_offset,
            partition_max_bytes=position.partition_max_bytes,
            current_leader_epoch=position.current_leader_epoch))
    return pb.FetchRequest(
        max_wait_ms=milliseconds(request.max_wait), min_bytes=request.min_bytes,
        max_bytes=request.max_bytes, isolation_level=_isolation(request),
        topics=[pb.TopicFetchData(topic=topic, partitions=parts)
                for topic, parts in by_topic.items()])


def _refused(request: pb.FetchRequest, refused: CallRefused) -> pb.FetchResponse:
    return pb.FetchResponse(topics=[pb.TopicFetchResponse(topic=topic.topic, partitions=[
        pb.PartitionFetchResponse(
            partition=part.partition, error_code=pb.ErrorCode.Value(refused.code.name),
                                  error_message=refused.message, high_watermark=-1,
                                  last_stable_offset=-1, log_start_offset=-1)
        for part in topic.partitions]) for topic in request.topics])


async def fetch(request: Any, call: KafkaCall) -> Any:
    module = response_module(FETCH_KEY, call.api_version)
    requested, forgotten, unknown = _wanted(request, _Topics(call))
    sessions = session_cache(call.servicer)
    epoch = getattr(request, "session_epoch", FINAL_EPOCH)
    try:
        context = sessions.context(getattr(request, "session_id", 0), epoch, requested,
                                   forgotten)
    except FetchSessionError as exc:
        return build(module, "FetchResponse", throttle_time=timedelta_ms(0),
                     error_code=KafkaErrorCode(exc.code), session_id=0, responses=())
    read_committed = getattr(request, "isolation_level", 0) == 1
    answers: dict[PartitionKey, pb.PartitionFetchResponse] = {}
    throttle_ms = 0
    if context.partitions:
        pb_request = _pb_request(request, context)
        try:
            answer = await call.servicer.Fetch(pb_request, call.context)
        except CallRefused as refused:
            answer = _refused(pb_request, refused)
        throttle_ms = answer.throttle_time_ms
        answers = {(topic.topic, part.partition): part
                   for topic in answer.topics for part in topic.partitions}
    news = {key: PartitionNews(part.error_code, part.high_watermark, part.last_stable_offset,
                               part.log_start_offset, bool(part.records))
            for key, part in answers.items()}
    chosen = sessions.news(context, news)
    by_topic: dict[str, list[Any]] = {}
    for key in chosen:
        cached = context.partitions[key]
        by_topic.setdefault(key[0], []).append(
            _partition(module, key[1], answers[key], cached.high_watermark,
                       cached.last_stable_offset, cached.log_start_offset, read_committed))
    topic_ids: dict[str, Any] = {key[0]: cached.position.topic_id
                                 for key, cached in context.partitions.items()}
    responses = [build(module, "FetchableTopicResponse", topic=name, topic_id=topic_ids[name],
                       partitions=tuple(parts)) for name, parts in by_topic.items()]
    for topic_id, index in unknown:
        responses.append(build(module, "FetchableTopicResponse", topic_id=topic_id,
                               partitions=(_unknown_topic_id(module, index),)))
    return build(module, "FetchResponse", throttle_time=timedelta_ms(throttle_ms),
                 error_code=KafkaErrorCode.none, session_id=context.session_id,
                 responses=tuple(responses))


def _partition(module: Any, index: int, part: pb.PartitionFetchResponse, high_watermark: int,
               last_stable_offset: int, log_start_offset: int, read_committed: bool) -> Any:
    # A node that lost the long-poll race reports -1s: the client is told the last known.
    return build(module, "PartitionData", partition_index=index,
                 error_code=kafka_error(part.error_code),
                 high_watermark=part.high_watermark if part.high_watermark >= 0
                 else high_watermark,
                 last_stable_offset=part.last_stable_offset if part.last_stable_offset >= 0
                 else last_stable_offset,
                 log_start_offset=part.log_start_offset if part.log_start_offset >= 0
                 else log_start_offset,
                 aborted_transactions=tuple(
                     build(module, "AbortedTransaction", producer_id=aborted.producer_id,
                           first_offset=aborted.first_offset)
                     for aborted in part.aborted_transactions) if read_committed else None,
                 preferred_read_replica=_NO_REPLICA, records=Records(part.records))


def _unknown_topic_id(module: Any, index: int) -> Any:
    return build(module, "PartitionData", partition_index=index,
                 error_code=kafka_error(ErrorCode.UNKNOWN_TOPIC_ID), high_watermark=-1,
                 last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                 preferred_read_replica=_NO_REPLICA, records=Records(b""))


HANDLERS: dict[int, Handler] = {FETCH_KEY: fetch}
# 4..17: what Kafka 4.0 serves (sessions from 7, topic ids from 13).
VERSIONS: dict[int, tuple[int, int]] = {FETCH_KEY: (4, 17)}
