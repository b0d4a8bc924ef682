"""Produce N records of S bytes through Strand's Kafka listener with confluent-kafka
(librdkafka), every delivery report awaited, then read them all back with a
confluent-kafka Consumer — what ``strand bench produce`` and ``strand bench consume``
do through the gRPC SDK.

Producer: ``acks=all``, ``enable.idempotence=true`` (set explicitly: librdkafka's
default is false, the SDK's and the Java client's is true, and an idempotent producer
is what the SDK side runs), ``linger.ms=5`` (the SDK's default), no compression, no
key (librdkafka's sticky partitioner fills one partition for
``sticky.partitioning.linger.ms``, 10 ms by default, then moves on). librdkafka closes a
batch at ``batch.size`` or ``batch.num.messages``, whichever comes first; the default
here is ``batch.size=1000000`` (the most librdkafka allows under its default
``message.max.bytes``): every request to the one broker the gateway advertises
carries at most one batch per partition and an idempotent producer keeps at most 5
requests in flight, so the batch size bounds the throughput (measured here: 256 KiB
batches gave 8,500 to 16,000 records/s where 1,000,000 B gave 38,000 to 40,000; a
random partition per record, ``sticky.partitioning.linger.ms=0``, made batches
smaller and was slower still). Latency is librdkafka's own per message
(``Message.latency()``: from ``produce()`` to the delivery report), so no Python
closure per record adds to the client's CPU.

Consumer: every partition assigned from the beginning (``assign``, no group
membership, no offset commits), batches of up to 10,000 messages per ``consume``
call; the clock runs from the assignment to the last record.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
    libversion,
)


class KafkaBenchError(RuntimeError):
    pass


@dataclass(frozen=True)
class ProducerSettings:
    """The producer knobs the benchmark exposes (everything else: librdkafka's default
    but ``acks=all`` and ``enable.idempotence=true``)."""

    linger_ms: int = 5
    batch_size: int = 1_000_000
    batch_num_messages: int = 10_000
    sticky_linger_ms: int = 10

    def config(self, bootstrap: str) -> dict[str, Any]:
        return {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                "linger.ms": self.linger_ms, "batch.size": self.batch_size,
                "batch.num.messages": self.batch_num_messages,
                "sticky.partitioning.linger.ms": self.sticky_linger_ms,
                "compression.type": "none"}


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile, the same definition as ``strand bench produce``."""
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return round(sorted_values[index], 3)


def _client() -> str:
    return f"confluent-kafka {version('confluent-kafka')} (librdkafka {libversion()[0]})"


def produce(bootstrap: str, topic: str, records: int, record_size: int,
            settings: ProducerSettings, timeout: float = 300.0) -> dict[str, Any]:
    """Send ``records`` records and wait for every delivery report; raises
    :class:`KafkaBenchError` when any record failed or reports are still missing
    after ``timeout`` seconds."""
    producer = Producer(settings.config(bootstrap))
    latencies: list[float] = []
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(error)
        else:
            latency = message.latency()
            latencies.append((latency or 0.0) * 1000)

    metadata = producer.list_topics(topic, timeout=30)  # not part of the measurement
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        raise KafkaBenchError(f"topic {topic!r} is not served by the Kafka listener at "
                              f"{bootstrap}: {found.error if found else 'missing'}")
    payload = os.urandom(record_size)
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value=payload, on_delivery=delivered)
                break
            except BufferError:  # queue.buffering.max.messages in flight: wait for reports
                producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(timeout)
    seconds = time.perf_counter() - start
    if remaining or failures:
        raise KafkaBenchError(
            f"Kafka listener produce to {topic!r} at {bootstrap}: {len(failures)} records "
            f"failed, {remaining} unacknowledged after {timeout:.0f}s"
            + (f"; first error: {failures[0]}" if failures else ""))
    latencies.sort()
    return {"records": records, "bytes": records * record_size, "seconds": round(seconds, 3),
            "records_per_s": round(records / seconds, 1),
            "mb_per_s": round(records * record_size / seconds / 1e6, 2),
            "latency_ms": {"p50": percentile(latencies, 0.50),
                           "p99": percentile(latencies, 0.99),
                           "p999": percentile(latencies, 0.999)},
            "acked": len(latencies), "failures": 0, "acks": "all", "idempotent": True,
            "linger_ms": settings.linger_ms, "batch_size": settings.batch_size,
            "batch_num_messages": settings.batch_num_messages,
            "sticky_partitioning_linger_ms": settings.sticky_linger_ms, "client": _client()}


def consume(bootstrap: str, topic: str, records: int, idle_timeout: float = 10.0,
            batch: int = 10_000) -> dict[str, Any]:
    """Read ``records`` records of every partition of ``topic`` from the beginning."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "strand-peer-bench",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "auto.offset.reset": "earliest"})
    try:
        found = consumer.list_topics(topic, timeout=30).topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            raise KafkaBenchError(f"topic {topic!r} has no partitions at the Kafka listener "
                                  f"{bootstrap}: {found.error if found else 'missing'}")
        consumed = total_bytes = 0
        start = idle_since = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)
                         for p in sorted(found.partitions)])
        while consumed < records:
            # consume() returns when it has num_messages or the timeout passed: never
            # ask for more than are left, or the last call waits out its timeout
            messages = consumer.consume(min(batch, records - consumed), timeout=1.0)
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(error)
                consumed += 1
                total_bytes += len(message.value() or b"")
            if messages:
                idle_since = time.perf_counter()
            elif time.perf_counter() - idle_since > idle_timeout:
                raise KafkaBenchError(f"Kafka listener consume: only {consumed} of {records} "
                                      f"records of {topic!r} arrived within "
                                      f"{idle_timeout:.0f}s of silence")
        seconds = time.perf_counter() - start
    finally:
        consumer.close()
    return {"records": consumed, "bytes": total_bytes, "seconds": round(seconds, 3),
            "records_per_s": round(consumed / seconds, 1),
            "mb_per_s": round(total_bytes / seconds / 1e6, 2),
            "partitions": len(found.partitions), "client": _client()}
