"""Kafka's OffsetForLeaderEpoch on the gateway's Kafka listener.

After a leader change a consumer asks where the epoch of the last record it read ends
(KIP-320) and detects a truncated log by it. The gateway's own OffsetForLeaderEpoch
forwards each partition to its leader storage node (as ListOffsets); ACLs (DESCRIBE on
the topic) and the leader-epoch fencing apply there. ``replica_id`` is not used: no
Kafka broker follows Strand's partitions, so every caller is answered as a consumer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.gateway.kafka.call import CallRefused, Handler, KafkaCall
from services.gateway.kafka.messages import build, kafka_error
from services.gateway.kafka.replies import NO_THROTTLE, ask, module_of
from strand.v1 import common_pb2 as pb

__all__ = ["HANDLERS", "VERSIONS"]

OFFSET_FOR_LEADER_EPOCH = 23


def _refused(request: pb.OffsetForLeaderEpochRequest
             ) -> Callable[[CallRefused], pb.OffsetForLeaderEpochResponse]:
    def answer(exc: CallRefused) -> pb.OffsetForLeaderEpochResponse:
        return pb.OffsetForLeaderEpochResponse(topics=[
            pb.TopicOffsetForLeaderEpochResponse(topic=topic.topic, partitions=[
                pb.PartitionOffsetForLeaderEpochResponse(
                    partition=p.partition, error_code=exc.code.name,
                    error_message=exc.message, leader_epoch=-1, end_offset=-1)
                for p in topic.partitions])
            for topic in request.topics])
    return answer


async def offset_for_leader_epoch(request: Any, call: KafkaCall) -> Any:
    asked = pb.OffsetForLeaderEpochRequest(topics=[
        pb.TopicOffsetForLeaderEpoch(topic=topic.topic, partitions=[
            pb.PartitionOffsetForLeaderEpoch(
                partition=p.partition, current_leader_epoch=p.current_leader_epoch,
                leader_epoch=p.leader_epoch) for p in topic.partitions])
        for topic in request.topics])
    answer = await ask(call.servicer.OffsetForLeaderEpoch, asked, call, _refused(asked))
    module = module_of(request)
    return build(module, "OffsetForLeaderEpochResponse", throttle_time=NO_THROTTLE,
                 topics=tuple(build(module, "OffsetForLeaderTopicResult", topic=topic.topic,
                                    partitions=tuple(build(
                                        module, "EpochEndOffset", partition=p.partition,
                                        error_code=kafka_error(p.error_code),
                                        leader_epoch=p.leader_epoch, end_offset=p.end_offset)
                                        for p in topic.partitions))
                              for topic in answer.topics))


HANDLERS: dict[int, Handler] = {OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch}
VERSIONS: dict[int, tuple[int, int]] = {OFFSET_FOR_LEADER_EPOCH: (2, 4)}
