"""EndTxn latency for transactions over 1, 10 and 100 partitions.

Raw RPCs (``raw.RawTxnProducer``), one transactional id per size: each iteration
adds the partitions, writes one small transactional batch to each (one Produce),
then times the EndTxn(commit) RPC (it answers once PrepareCommit is written) and
the time until the coordinator reports CompleteCommit (every COMMIT marker
written; DescribeTransactions polled). With the SDK's transactional API, also
``commit_transaction()``: send one record to each partition, ``flush()``, then
time the commit alone. The sizes take turns within each iteration."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from bench_support import err

from strand import Producer

from .raw import RawTxnProducer
from .stats import latency_ms, rotated


def _raw_commit(producer: RawTxnProducer, topic: str, partitions: int,
                value: bytes) -> tuple[float, float]:
    producer.add_partitions(topic, range(partitions))
    producer.produce(topic, {p: [value] for p in range(partitions)})
    began = time.perf_counter()
    rpc = producer.end(commit=True)
    producer.wait_complete()
    return rpc, time.perf_counter() - began


def _sdk_commit(producer: Producer, topic: str, partitions: int, value: bytes) -> float:
    producer.begin_transaction()
    for p in range(partitions):
        producer.send(topic, value=value, partition=p)
    producer.flush()
    began = time.perf_counter()
    producer.commit_transaction()
    return time.perf_counter() - began


def endtxn_section(bootstrap: str, topic: str, sizes: Sequence[int], iterations: int,
                   record_size: int, sdk: bool) -> dict[str, Any]:
    value = b"x" * record_size
    run = uuid.uuid4().hex[:8]
    raw = {k: RawTxnProducer(bootstrap, f"eos-endtxn-raw-{k}-{run}") for k in sizes}
    sdk_producers: dict[int, Producer] = {}
    rpc: dict[int, list[float]] = {k: [] for k in sizes}
    complete: dict[int, list[float]] = {k: [] for k in sizes}
    commit: dict[int, list[float]] = {k: [] for k in sizes}
    plain: list[float] = []
    try:
        if sdk:
            for k in sizes:
                producer = Producer(bootstrap, transactional_id=f"eos-endtxn-sdk-{k}-{run}")
                sdk_producers[k] = producer
                producer.init_transactions()
        for k in sizes:  # warm-up: connections, the coordinator's first writes
            _raw_commit(raw[k], topic, k, value)
            if sdk:
                _sdk_commit(sdk_producers[k], topic, k, value)
        for i in range(iterations):
            plain.append(raw[sizes[0]].plain_produce(topic, 0, value))
            for k in rotated(list(sizes), i):
                took, done = _raw_commit(raw[k], topic, k, value)
                rpc[k].append(took)
                complete[k].append(done)
                if sdk:
                    commit[k].append(_sdk_commit(sdk_producers[k], topic, k, value))
            if (i + 1) % max(1, iterations // 5) == 0:
                err.print(f"EndTxn: {i + 1}/{iterations} iterations")
    finally:
        for raw_producer in raw.values():
            raw_producer.close()
        for sdk_producer in sdk_producers.values():
            sdk_producer.close()
    result: dict[str, Any] = {
        "parameters": {"partitions": list(sizes), "iterations": iterations,
                       "records_per_partition": 1, "record_size": record_size,
                       "topic": topic, "acks": "all",
                       "plain_produce_rpc": "one acks=all Produce RPC of one record, "
                                            "no transaction (for scale)",
                       "end_txn_rpc": "the EndTxn(commit) RPC alone (answered once "
                                      "PrepareCommit is written)",
                       "commit_complete": "from EndTxn sent to CompleteCommit seen "
                                          "(DescribeTransactions polled every 1 ms)",
                       "commit_transaction": "the SDK's commit_transaction() after a flush()"
                                             if sdk else None},
        "plain_produce_rpc": latency_ms(plain),
        "end_txn_rpc": {str(k): latency_ms(rpc[k]) for k in sizes},
        "commit_complete": {str(k): latency_ms(complete[k]) for k in sizes},
    }
    if sdk:
        result["commit_transaction"] = {str(k): latency_ms(commit[k]) for k in sizes}
    return result
