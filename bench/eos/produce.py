"""Produce throughput of plain (non-idempotent), idempotent and transactional
producers, interleaved: each round runs every variant once, back to back, in an
order rotated each round; each run is a fresh SDK Producer sending ``records``
records of ``record_size`` bytes (acks=all) to the same topic, timed from the
first send to the last acknowledgement (the transactional run: to its last
commit). Setup (metadata, InitProducerId) is not timed. Each run also reports what
it cost (:mod:`.cost`): CPU per record by process, requests served per record."""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from typing import Any

from bench_support import err

from strand import Producer

from .cost import CostMeter, cost
from .stats import latency_ms, ratio, rotated, spread

PLAIN, IDEMPOTENT, TRANSACTIONAL = "plain", "idempotent", "transactional"


@dataclass(frozen=True)
class ProduceSpec:
    bootstrap: str
    topic: str
    records: int
    record_size: int
    batch_size: int
    linger_ms: float
    commit_interval_ms: float


def transactions_available() -> bool:
    """Whether this SDK has the transactional producer API."""
    return hasattr(Producer, "commit_transaction")


def produce_run(spec: ProduceSpec, variant: str,
                meter: CostMeter | None = None) -> dict[str, Any]:
    payload = os.urandom(spec.record_size)
    failures: list[BaseException] = []

    def done(metadata: object, error: BaseException | None) -> None:
        if error is not None:
            failures.append(error)

    settings: dict[str, Any] = {"acks": "all", "batch_size": spec.batch_size,
                                "linger_ms": spec.linger_ms}
    if variant == TRANSACTIONAL:
        settings["transactional_id"] = f"eos-bench-{uuid.uuid4().hex[:12]}"
    else:
        settings["enable_idempotence"] = variant == IDEMPOTENT
    commits: list[float] = []
    with Producer(spec.bootstrap, **settings) as producer:
        if producer.idempotent != (variant != PLAIN):
            raise RuntimeError(f"the {variant} producer has idempotent={producer.idempotent}")
        producer.partitions_for(spec.topic)  # metadata first: not part of the measurement
        transactional = variant == TRANSACTIONAL
        if transactional:
            producer.init_transactions()
        interval = spec.commit_interval_ms / 1000
        before = meter.read() if meter is not None else None
        start = time.perf_counter()
        if transactional:
            producer.begin_transaction()
        next_commit = start + interval
        for _ in range(spec.records):
            producer.send(spec.topic, value=payload, on_delivery=done)
            if transactional and time.perf_counter() >= next_commit:
                began = time.perf_counter()
                producer.commit_transaction()
                commits.append(time.perf_counter() - began)
                producer.begin_transaction()
                next_commit = time.perf_counter() + interval
        if transactional:
            began = time.perf_counter()
            producer.commit_transaction()
            commits.append(time.perf_counter() - began)
        else:
            producer.flush()
        seconds = time.perf_counter() - start
        after = meter.read() if meter is not None else None
    if failures:
        raise RuntimeError(f"{variant}: {len(failures)} records failed: {failures[0]!r}")
    result: dict[str, Any] = {
        "seconds": round(seconds, 3), "records_per_s": round(spec.records / seconds, 1),
        "mb_per_s": round(spec.records * spec.record_size / seconds / 1e6, 3)}
    if before is not None and after is not None:
        result["cost"] = cost(before, after, spec.records)
    if commits:
        result["transactions"] = len(commits)
        result["commit_transaction"] = latency_ms(commits)
    return result


def produce_section(spec: ProduceSpec, rounds: int, transactional: bool,
                    meter: CostMeter | None = None) -> dict[str, Any]:
    variants = [PLAIN, IDEMPOTENT, *([TRANSACTIONAL] if transactional else [])]
    produce_run(spec, PLAIN)  # warm-up (connections, the topic's first segments): not kept
    measured: list[dict[str, Any]] = []
    for i in range(rounds):
        row: dict[str, Any] = {"round": i, "order": rotated(variants, i)}
        for variant in row["order"]:
            row[variant] = produce_run(spec, variant, meter)
        measured.append(row)
        err.print(f"produce round {i + 1}/{rounds}: " + ", ".join(
            f"{v} {row[v]['records_per_s']:,.0f}/s" for v in variants))
    result: dict[str, Any] = {
        "parameters": {"records_per_run": spec.records, "record_size": spec.record_size,
                       "acks": "all", "batch_size": spec.batch_size,
                       "linger_ms": spec.linger_ms, "rounds": rounds,
                       "variants": variants, "topic": spec.topic,
                       "commit_interval_ms": spec.commit_interval_ms if transactional
                       else None},
        "rounds": measured,
        "records_per_s": {v: spread([r[v]["records_per_s"] for r in measured])
                          for v in variants},
        "mb_per_s": {v: spread([r[v]["mb_per_s"] for r in measured]) for v in variants},
        "idempotent_vs_plain": ratio(measured, IDEMPOTENT, PLAIN, "records_per_s", 0.9),
    }
    if meter is not None:  # what bounds the ratios on a busy machine: CPU per record
        result["cpu_us_per_record"] = {
            v: spread([r[v]["cost"]["cpu_us_per_record"]["total"] for r in measured])
            for v in variants}
    if transactional:
        result["transactional_vs_plain"] = ratio(measured, TRANSACTIONAL, PLAIN,
                                                 "records_per_s", 0.85)
        # for context: the cost of the transactions alone, idempotence being their base
        result["transactional_vs_idempotent"] = ratio(measured, TRANSACTIONAL, IDEMPOTENT,
                                                      "records_per_s", 0.85)
    return result
