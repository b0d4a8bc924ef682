"""Metadata (key 3): the gateways as the one broker, the topics and their partitions.

Answered from the gateway servicer's Metadata (the metadata cache, with its ACL
checks: a listing leaves out what the caller may not describe). Topics are never
created by a Metadata request (Kafka's auto.create.topics.enable=false): an unknown
topic is UNKNOWN_TOPIC_OR_PARTITION, an unknown topic id UNKNOWN_TOPIC_ID.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode

from services.gateway.kafka.brokers import NO_LEADER, broker_entries
from services.gateway.kafka.call import Handler, KafkaCall
from services.gateway.kafka.messages import (
    ZERO_UUID,
    build,
    kafka_error,
    response_module,
    timedelta_ms,
    topic_uuid,
)
from strand.v1 import common_pb2 as pb

__all__ = ["HANDLERS", "VERSIONS"]

METADATA_KEY = 3
# Kafka's "authorized operations not asked for" (KIP-430).
_NOT_ASKED = -2147483648


def _requested(request: Any, call: KafkaCall) -> tuple[list[str] | None, list[Any]]:
    """(topic names to describe, None for every topic; answers for unknown topic ids)."""
    topics = request.topics
    if topics is None or (call.api_version == 0 and not topics):
        return None, []  # v0: an empty list means every topic, later versions: null
    names: list[str] = []
    unknown: list[Any] = []
    by_id: dict[Any, str] | None = None
    for topic in topics:
        name = topic.name
        topic_id = getattr(topic, "topic_id", None)
        if name is None and topic_id is not None and topic_id != ZERO_UUID:
            if by_id is None:
                by_id = {topic_uuid(record.topic_id): topic_name for topic_name, record
                         in call.servicer.cache.topics.items()}
            name = by_id.get(topic_id)
            if name is None:
                unknown.append(topic_id)
                continue
        if name is not None:
            names.append(name)
    return names, unknown


async def metadata(request: Any, call: KafkaCall) -> Any:
    module = response_module(METADATA_KEY, call.api_version)
    names, unknown_ids = _requested(request, call)
    answer = (await call.servicer.Metadata(pb.MetadataRequest(topics=names or ()),
                                           call.context)
              if names is None or names else pb.MetadataResponse())
    registered = {broker.node_id for broker in answer.brokers}
    topics = [_topic(module, topic, registered, call.broker_id) for topic in answer.topics]
    topics.extend(build(module, "MetadataResponseTopic",
                        error_code=KafkaErrorCode.unknown_topic_id, name=None,
                        topic_id=topic_id, is_internal=False, partitions=(),
                        topic_authorized_operations=_NOT_ASKED)
                  for topic_id in unknown_ids)
    return build(module, "MetadataResponse", throttle_time=timedelta_ms(0),
                 brokers=broker_entries(module, "MetadataResponseBroker", call),
                 cluster_id=answer.cluster_id or call.servicer.cache.keys.prefix.strip("/"),
                 controller_id=call.broker_id, topics=tuple(topics),
                 cluster_authorized_operations=_NOT_ASKED)


def _topic(module: Any, topic: pb.TopicMetadata, registered: set[int], leader: int) -> Any:
    partitions = tuple(
        build(module, "MetadataResponsePartition",
              error_code=kafka_error(part.error_code), partition_index=part.partition,
              # Every partition is led, for Kafka clients, by the gateways' broker.
              leader_id=NO_LEADER if part.leader < 0 else leader,
              leader_epoch=part.leader_epoch, replica_nodes=tuple(part.replicas),
              isr_nodes=tuple(part.isr),
              offline_replicas=tuple(r for r in part.replicas if r not in registered))
        for part in sorted(topic.partitions, key=lambda p: p.partition))
    return build(module, "MetadataResponseTopic", error_code=kafka_error(topic.error_code),
                 name=topic.name, topic_id=topic_uuid(topic.topic_id) if topic.topic_id
                 else ZERO_UUID, is_internal=topic.is_internal, partitions=partitions,
                 topic_authorized_operations=_NOT_ASKED)


HANDLERS: dict[int, Handler] = {METADATA_KEY: metadata}
# 0..12: what Kafka 4.0 serves; v13 (4.1) only adds a top-level error code.
VERSIONS: dict[int, tuple[int, int]] = {METADATA_KEY: (0, 12)}
