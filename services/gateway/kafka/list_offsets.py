"""ListOffsets (key 2): the earliest offset, the latest, or the first at or after a
timestamp, through the servicer's ListOffsets (leaders answer; read_committed stops
at the last stable offset).

Versions 1 to 6: version 7 brings the max-timestamp query (-3, KIP-734) and 8, 9 the
tiered-storage ones, which the storage nodes do not answer; a client that needs
them sees they are not offered and does not ask.
"""

from __future__ import annotations

from typing import Any

from services.gateway.kafka.call import CallRefused, Handler, KafkaCall
from services.gateway.kafka.messages import build, kafka_error, response_module, timedelta_ms
from strand.v1 import common_pb2 as pb

__all__ = ["HANDLERS", "VERSIONS"]

LIST_OFFSETS_KEY = 2


def _isolation(request: Any) -> pb.IsolationLevel:
    return (pb.READ_COMMITTED if getattr(request, "isolation_level", 0) == 1
            else pb.READ_UNCOMMITTED)


def _refused(request: pb.ListOffsetsRequest, refused: CallRefused) -> pb.ListOffsetsResponse:
    return pb.ListOffsetsResponse(topics=[pb.TopicListOffsetsResponse(
        topic=topic.topic, partitions=[pb.PartitionListOffsetsResponse(
            partition=part.partition, error_code=pb.ErrorCode.Value(refused.code.name),
            error_message=refused.message, offset=-1, timestamp=-1, leader_epoch=-1)
            for part in topic.partitions]) for topic in request.topics])


async def list_offsets(request: Any, call: KafkaCall) -> Any:
    pb_request = pb.ListOffsetsRequest(
        isolation_level=_isolation(request),
        topics=[pb.TopicListOffsets(topic=topic.name, partitions=[
            pb.PartitionListOffsets(partition=part.partition_index, timestamp=part.timestamp)
            for part in topic.partitions]) for topic in request.topics])
    try:
        answer = await call.servicer.ListOffsets(pb_request, call.context)
    except CallRefused as refused:
        answer = _refused(pb_request, refused)
    module = response_module(LIST_OFFSETS_KEY, call.api_version)
    return build(module, "ListOffsetsResponse", throttle_time=timedelta_ms(0), topics=tuple(
        build(module, "ListOffsetsTopicResponse", name=topic.topic, partitions=tuple(
            build(module, "ListOffsetsPartitionResponse", partition_index=part.partition,
                  error_code=kafka_error(part.error_code), timestamp=part.timestamp,
                  offset=part.offset, leader_epoch=part.leader_epoch)
            for part in topic.partitions)) for topic in answer.topics))


HANDLERS: dict[int, Handler] = {LIST_OFFSETS_KEY: list_offsets}
VERSIONS: dict[int, tuple[int, int]] = {LIST_OFFSETS_KEY: (1, 6)}
