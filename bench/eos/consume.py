"""read_committed vs read_uncommitted consume throughput over the same data: a
topic filled with committed transactions (raw RPCs: each transaction writes one
batch of ``records_per_batch`` records to every partition, then commits), read
from the beginning by a fresh SDK Consumer (assign mode) of each isolation level,
timed from its first poll (offsets already looked up) to its last record, in rounds
that alternate the order; every record must be read, no more."""

from __future__ import annotations

import os
import time
import uuid
from typing import Any, Literal

from bench_support import err

from strand import Consumer, TopicPartition

from .raw import RawTxnProducer
from .stats import ratio, rotated, spread

Isolation = Literal["read_committed", "read_uncommitted"]
COMMITTED: Isolation = "read_committed"
UNCOMMITTED: Isolation = "read_uncommitted"
SILENCE_S = 30.0  # no record for this long: something is wrong, not slow


def fill(bootstrap: str, topic: str, partitions: int, transactions: int,
         records_per_batch: int, record_size: int) -> int:
    """Write ``transactions`` committed transactions; returns the records written."""
    payload = os.urandom(record_size)
    producer = RawTxnProducer(bootstrap, f"eos-consume-fill-{uuid.uuid4().hex[:8]}")
    try:
        for i in range(transactions):
            producer.add_partitions(topic, range(partitions))
            producer.produce(topic, {p: [payload] * records_per_batch
                                     for p in range(partitions)})
            producer.end(commit=True)
            producer.wait_complete()
            if (i + 1) % max(1, transactions // 5) == 0:
                err.print(f"filled {i + 1}/{transactions} transactions")
    finally:
        producer.close()
    return transactions * partitions * records_per_batch


def consume_run(bootstrap: str, topic: str, partitions: int, records: int,
                isolation: Isolation) -> dict[str, Any]:
    consumed = total_bytes = 0
    with Consumer(bootstrap, isolation_level=isolation,
                  auto_offset_reset="earliest") as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        for tp in tps:  # the offsets looked up now: the timing is of the fetches alone
            consumer.position(tp)
        start = last = time.perf_counter()
        while consumed < records:
            batch = consumer.poll(timeout_ms=500)
            now = time.perf_counter()
            for items in batch.values():
                for record in items:
                    consumed += 1
                    total_bytes += len(record.value or b"") + len(record.key or b"")
                last = now
            if now - last > SILENCE_S:
                raise RuntimeError(f"{isolation}: {consumed} of {records} records, then "
                                   f"{SILENCE_S} s without any")
        seconds = last - start
        extra = consumer.poll(timeout_ms=200)  # nothing more: no control record, no copy
        if any(extra.values()):
            raise RuntimeError(f"{isolation}: more than the {records} records written")
    return {"seconds": round(seconds, 3), "records": consumed,
            "records_per_s": round(consumed / seconds, 1),
            "mb_per_s": round(total_bytes / seconds / 1e6, 3)}


def consume_section(bootstrap: str, topic: str, partitions: int, transactions: int,
                    records_per_batch: int, record_size: int, rounds: int) -> dict[str, Any]:
    records = fill(bootstrap, topic, partitions, transactions, records_per_batch, record_size)
    variants: list[Isolation] = [COMMITTED, UNCOMMITTED]
    consume_run(bootstrap, topic, partitions, records, UNCOMMITTED)  # warm-up: page cache
    measured: list[dict[str, Any]] = []
    for i in range(rounds):
        row: dict[str, Any] = {"round": i, "order": rotated(variants, i)}
        for isolation in row["order"]:
            row[isolation] = consume_run(bootstrap, topic, partitions, records, isolation)
        measured.append(row)
        err.print(f"consume round {i + 1}/{rounds}: " + ", ".join(
            f"{v} {row[v]['records_per_s']:,.0f}/s" for v in variants))
    return {
        "parameters": {"records": records, "record_size": record_size,
                       "partitions": partitions, "transactions": transactions,
                       "records_per_partition_per_transaction": records_per_batch,
                       "rounds": rounds, "topic": topic,
                       "data": "committed transactions only, written by raw RPCs"},
        "rounds": measured,
        "records_per_s": {v: spread([r[v]["records_per_s"] for r in measured])
                          for v in variants},
        "mb_per_s": {v: spread([r[v]["mb_per_s"] for r in measured]) for v in variants},
        "read_committed_vs_read_uncommitted": ratio(measured, COMMITTED, UNCOMMITTED,
                                                    "records_per_s", 0.9),
    }
