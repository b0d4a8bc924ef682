"""Path (c), the baseline: a plain SDK consume→produce loop in one thread, one
Consumer reading every partition of A (assign mode, read_committed like the mirror)
and one Producer writing B (acks=all, idempotent, the mirror's batch_size and
linger_ms), each record to the same partition with its key, value, headers and
timestamp. Timed from the first poll (positions and the target's metadata looked up
before) to the end of the final flush: every copy acknowledged by B, so visible to
read_committed readers (no transaction)."""

from __future__ import annotations

import time
from typing import Any

from strand import Consumer, Producer, TopicPartition

SILENCE_S = 60.0


def loop_run(source_bootstrap: str, target_bootstrap: str, topic: str, target_topic: str,
             partitions: int, records: int, data_bytes: int) -> dict[str, Any]:
    failures: list[BaseException] = []

    def done(metadata: object, error: BaseException | None) -> None:
        if error is not None:
            failures.append(error)

    tps = [TopicPartition(topic, p) for p in range(partitions)]
    copied = 0
    with Consumer(source_bootstrap, isolation_level="read_committed") as consumer, \
            Producer(target_bootstrap, acks="all", enable_idempotence=True,
                     batch_size=262_144, linger_ms=5) as producer:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        for tp in tps:
            consumer.position(tp)
        producer.partitions_for(target_topic)
        start = last = time.perf_counter()
        while copied < records:
            batch = consumer.poll(timeout_ms=500)
            for items in batch.values():
                for record in items:
                    producer.send(target_topic, value=record.value, key=record.key,
                                  headers=record.headers, partition=record.partition,
                                  timestamp_ms=record.timestamp, on_delivery=done)
                    copied += 1
                last = time.perf_counter()
            if failures:
                raise RuntimeError(f"the loop's producer failed: {failures[0]!r}")
            if time.perf_counter() - last > SILENCE_S:
                raise RuntimeError(f"the loop read {copied} of {records} records, then "
                                   f"nothing for {SILENCE_S} s")
        producer.flush()
        seconds = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"the loop's producer failed: {failures[0]!r}")
    return {"seconds": round(seconds, 3), "records": copied,
            "records_per_s": round(copied / seconds, 1),
            "mb_per_s": round(data_bytes / seconds / 1e6, 3)}
