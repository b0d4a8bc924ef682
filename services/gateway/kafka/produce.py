"""Produce (key 0): record batches, as the client built them, into the servicer's Produce.

The batches pass through untouched (the storage node validates and stamps them in
place); ACLs, quotas and routing are the servicer's. With acks=0 nothing is answered,
as Kafka does (the handler returns None).
"""

from __future__ import annotations

import datetime
from typing import Any

from services.gateway.kafka.call import CallRefused, Handler, KafkaCall
from services.gateway.kafka.messages import (
    build,
    kafka_error,
    milliseconds,
    response_module,
    timedelta_ms,
)
from strand.v1 import common_pb2 as pb

__all__ = ["HANDLERS", "VERSIONS"]

PRODUCE_KEY = 0


def _request(request: Any) -> pb.ProduceRequest:
    return pb.ProduceRequest(
        acks=request.acks, timeout_ms=milliseconds(request.timeout),
        transactional_id=request.transactional_id or "",
        topics=[pb.TopicProduceData(topic=topic.name, partitions=[
            pb.PartitionProduceData(partition=part.index, records=part.records or b"")
            for part in topic.partition_data]) for topic in request.topic_data])


def _refused(request: pb.ProduceRequest, refused: CallRefused) -> pb.ProduceResponse:
    return pb.ProduceResponse(topics=[pb.TopicProduceResponse(topic=topic.topic, partitions=[
        pb.PartitionProduceResponse(
            partition=part.partition, error_code=pb.ErrorCode.Value(refused.code.name),
                                    error_message=refused.message, base_offset=-1,
                                    log_append_time_ms=-1, log_start_offset=-1)
        for part in topic.partitions]) for topic in request.topics])


def _append_time(ms: int) -> datetime.datetime | None:
    return None if ms < 0 else datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)


async def produce(request: Any, call: KafkaCall) -> Any:
    pb_request = _request(request)
    try:
        answer = await call.servicer.Produce(pb_request, call.context)
    except CallRefused as refused:
        answer = _refused(pb_request, refused)
    if request.acks == 0:
        return None
    module = response_module(PRODUCE_KEY, call.api_version)
    return build(module, "ProduceResponse", throttle_time=timedelta_ms(answer.throttle_time_ms),
                 responses=tuple(build(module, "TopicProduceResponse", name=topic.topic,
                                       partition_responses=tuple(
            build(module, "PartitionProduceResponse", index=part.partition,
                  error_code=kafka_error(part.error_code), base_offset=part.base_offset,
                  log_append_time=_append_time(part.log_append_time_ms),
                  log_start_offset=part.log_start_offset, record_errors=(),
                  error_message=part.error_message or None)
            for part in topic.partitions)) for topic in answer.topics))


HANDLERS: dict[int, Handler] = {PRODUCE_KEY: produce}
# 3..11: Kafka 4.0 serves 3..12, where 12 only tells a client the broker verifies
# transactions itself (KIP-890 part 2), which Strand's coordinator does not promise.
VERSIONS: dict[int, tuple[int, int]] = {PRODUCE_KEY: (3, 11)}
