"""A producer's Sender driven turn by turn against a fake gateway, without threads or
sockets: each partition is a log with its producer state checked as a leader checks
it (strand.log.producer_state), and the test scripts what happens to each call (the
answer lost after the append, the call dropped before it, a partition refused).

Used to show what the idempotent producer writes when answers go missing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from strand.client.metadata import MetadataCache
from strand.errors import ErrorCode, StrandError
from strand.log.producer_state import AppendOrigin, ProducerStateTable
from strand.producer import RecordAccumulator
from strand.producer.producer_batch import TopicPartition
from strand.producer.sender import Sender, SenderConfig
from strand.producer.transaction_manager import TransactionManager
from strand.records.reader import iter_record_batches
from strand.v1 import common_pb2 as pb
from tests.support.clock import FakeClock

NODE = 1


@dataclass
class PartitionLog:
    """One partition on its leader: the values written, in order, and its producers."""

    values: list[bytes | None] = field(default_factory=list)
    producers: ProducerStateTable = field(default_factory=ProducerStateTable)

    def append(self, data: bytes) -> tuple[ErrorCode, int]:
        """Append every batch of ``data`` (checked as a leader does); a retry of one of
        the last 5 batches is answered with its original offset and not written."""
        base = -1
        for batch in iter_record_batches(data):
            h = batch.header
            entry = self.producers.entry(h.producer_id)
            duplicate = entry.find_duplicate(h.producer_epoch, h.base_sequence,
                                             h.base_sequence + h.record_count - 1) \
                if entry is not None else None
            if duplicate is not None:
                first = duplicate.first_offset
            else:
                first = len(self.values)
                info = self.producers.prepare_update(h.producer_id, AppendOrigin.CLIENT)
                try:
                    info.append_data_batch(
                        epoch=h.producer_epoch, first_seq=h.base_sequence,
                        last_seq=h.base_sequence + h.record_count - 1,
                        max_timestamp=h.max_timestamp, first_offset=first,
                        last_offset=first + h.record_count - 1, transactional=False)
                except StrandError as exc:
                    return exc.code, -1
                self.producers.update(info)
                self.values.extend(r.value for r in batch.records())
            base = first if base < 0 else base
        return ErrorCode.NONE, base


class Fate:
    """What happens to a partition's part of a call."""

    ANSWER = "answered"
    LOSE_ANSWER = "appended, answer lost"  # the call times out after the append
    DROP = "dropped"  # the call times out before it reaches the leader


@dataclass
class FakeGateway:
    logs: dict[TopicPartition, PartitionLog] = field(default_factory=dict)
    # Per partition, the fates of its next calls (then: answered); a whole call is lost
    # when any of its partitions' answers is.
    fates: dict[TopicPartition, list[str]] = field(default_factory=dict)
    refusals: dict[TopicPartition, list[ErrorCode]] = field(default_factory=dict)
    # Partitions whose leader does not answer the gateway: REQUEST_TIMED_OUT, nothing
    # appended (the producer cannot tell: it may have been).
    unreachable: set[TopicPartition] = field(default_factory=set)
    calls: int = 0
    # Every batch that reached the gateway: partition, (producer id, epoch, sequence).
    received: list[tuple[TopicPartition, tuple[int, int, int]]] = field(default_factory=list)

    def log(self, tp: TopicPartition) -> PartitionLog:
        return self.logs.setdefault(tp, PartitionLog())

    def produce(self, request_bytes: bytes, timeout: float) -> Any:
        self.calls += 1
        request = pb.ProduceRequest.FromString(request_bytes)
        response = pb.ProduceResponse()
        lost = False
        for topic in request.topics:
            answer = response.topics.add(topic=topic.topic)
            for part in topic.partitions:
                tp = (topic.topic, part.partition)
                queued = self.fates.get(tp)
                fate = queued.pop(0) if queued else Fate.ANSWER
                self.received.extend(
                    (tp, (b.header.producer_id, b.header.producer_epoch, b.header.base_sequence))
                    for b in iter_record_batches(part.records))
                if tp in self.unreachable:
                    answer.partitions.add(partition=part.partition,
                                          error_code=ErrorCode.REQUEST_TIMED_OUT)
                    continue
                refused = self.refusals.get(tp)
                if fate != Fate.DROP and refused:
                    answer.partitions.add(partition=part.partition, error_code=refused.pop(0))
                    continue
                if fate == Fate.DROP:
                    lost = True
                    continue
                code, base = self.log(tp).append(part.records)
                lost = lost or fate == Fate.LOSE_ANSWER
                answer.partitions.add(partition=part.partition, error_code=code,
                                      base_offset=base)

        async def call() -> pb.ProduceResponse:
            if lost:
                raise grpc.aio.AioRpcError(grpc.StatusCode.DEADLINE_EXCEEDED,
                                           grpc.aio.Metadata(), grpc.aio.Metadata(),
                                           "Deadline Exceeded")
            return response
        return call()


def metadata_for(topic: str, partitions: int) -> MetadataCache:
    cache = MetadataCache()
    cache.update(pb.MetadataResponse(
        brokers=[pb.BrokerMetadata(node_id=NODE, host="127.0.0.1", port=1)],
        topics=[pb.TopicMetadata(name=topic, partitions=[
            pb.PartitionMetadata(partition=p, leader=NODE, replicas=[NODE], isr=[NODE])
            for p in range(partitions)])]))
    return cache


@dataclass
class DrivenProducer:
    """An idempotent producer's accumulator and Sender, turned by hand."""

    clock: FakeClock
    accumulator: RecordAccumulator
    tm: TransactionManager
    sender: Sender
    gateway: FakeGateway

    @classmethod
    def start(cls, topic: str = "t", partitions: int = 2, producer_id: int = 7,
              delivery_timeout_ms: float = 10_000) -> DrivenProducer:
        clock = FakeClock(1_000)
        acc = RecordAccumulator(clock=clock, batch_size=0, linger_ms=0, retry_backoff_ms=10)
        tm = TransactionManager()
        tm.set_producer_id(producer_id, 0)
        acc.transaction_manager = tm
        sender = Sender("fake-gateway", acc, metadata_for(topic, partitions), SenderConfig(
            acks=-1, retry_backoff_ms=10, request_timeout_ms=1_000,
            delivery_timeout_ms=delivery_timeout_ms, client_id="driven"), clock=clock)
        gateway = FakeGateway()
        sender._produce_rpc = gateway.produce
        return cls(clock, acc, tm, sender, gateway)

    def send(self, topic: str, partition: int, value: bytes) -> Any:
        result = self.accumulator.append(topic, partition, None, value, [], None)
        self.sender.note_partition((topic, partition))
        return result.future

    def run(self, until: Callable[[], bool], turns: int = 500, step_ms: int = 10) -> None:
        """Turn the sender (answers handled at once) until ``until()`` holds."""
        async def turning() -> None:
            for _ in range(turns):
                self.sender._run_once(self.clock())
                while self.sender._tasks:
                    await asyncio.gather(*list(self.sender._tasks))
                if until():
                    return
                self.clock.advance(step_ms)
            raise AssertionError(f"not done after {turns} turns")
        asyncio.run(turning())
