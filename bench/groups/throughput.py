"""Throughput: produce ``--records`` records, then a group of ``--group-consumers``
consumers (processes or threads) reads them all; records/s and MB/s from the first
assignment to the last record, every record checked to be read exactly once; one
consumer in assign mode (no group) reads the same topic for comparison."""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import queue
import signal
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from bench_support import err

from strand import Consumer, Producer, TopicPartition
from strand.launcher import die_with_parent

from .cluster import BenchCluster

DATA_TOPIC = "throughput-bench"
PROGRESS_S = 0.25  # how often throughput workers report their progress


@dataclass
class WorkerSpec:
    index: int
    bootstrap: str
    topic: str
    partitions: int
    group_id: str | None  # None: assign mode, every partition from the beginning
    max_poll_records: int


@dataclass
class WorkerStats:
    index: int
    records: int = 0
    bytes: int = 0
    started: float = 0.0  # monotonic: right before subscribe()/assign()
    first_record: float | None = None
    last_record: float | None = None
    runs: dict[int, list[list[int]]] = field(default_factory=dict)  # partition -> [start, end)
    events: list[tuple[str, float, list[int], int]] = field(default_factory=list)
    error: str | None = None


class _Listener:
    def __init__(self, consumer: Consumer, stats: WorkerStats, events: Any) -> None:
        self.consumer = consumer
        self.stats = stats
        self.events = events

    def _event(self, kind: str, partitions: set[TopicPartition]) -> None:
        generation = self.consumer.group_metadata().generation_id
        event = (kind, time.monotonic(), sorted(tp.partition for tp in partitions), generation)
        self.stats.events.append(event)
        self.events.put(("event", self.stats.index, event))

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self._event("assigned", partitions)

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self._event("revoked", partitions)

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self._event("lost", partitions)


def consume_worker(spec: WorkerSpec, events: Any, go: Any, stop: Any,
                   in_process: bool) -> None:
    """Read until ``stop``; report progress (records, highest offset per partition)
    every PROGRESS_S and the full statistics at the end, on ``events``."""
    if in_process:
        die_with_parent(signal.SIGTERM)
    stats = WorkerStats(spec.index)
    highs: dict[int, int] = {}
    try:
        consumer = Consumer(spec.bootstrap, group_id=spec.group_id,
                            client_id=f"bench-{spec.index}",
                            max_poll_records=spec.max_poll_records)
    except Exception as exc:
        stats.error = f"{type(exc).__name__}: {exc}"
        events.put(("done", spec.index, asdict(stats)))
        return
    events.put(("ready", spec.index, None))
    try:
        go.wait()
        stats.started = time.monotonic()
        if spec.group_id is None:
            tps = [TopicPartition(spec.topic, p) for p in range(spec.partitions)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            stats.events.append(("assigned", stats.started, list(range(spec.partitions)), -1))
            events.put(("event", spec.index, stats.events[-1]))
        else:
            consumer.subscribe([spec.topic], listener=_Listener(consumer, stats, events))
        next_report = 0.0
        while not stop.is_set():
            batch = consumer.poll(timeout_ms=200)
            now = time.monotonic()
            for tp, records in batch.items():
                if not records:
                    continue
                stats.first_record = stats.first_record or now
                stats.last_record = now
                stats.records += len(records)
                stats.bytes += sum(len(r.value or b"") + len(r.key or b"") for r in records)
                runs = stats.runs.setdefault(tp.partition, [])
                first, last = records[0].offset, records[-1].offset
                if last - first + 1 == len(records):  # contiguous, the usual case
                    if runs and runs[-1][1] == first:
                        runs[-1][1] = last + 1
                    else:
                        runs.append([first, last + 1])
                else:
                    for r in records:
                        if runs and runs[-1][1] == r.offset:
                            runs[-1][1] += 1
                        else:
                            runs.append([r.offset, r.offset + 1])
                highs[tp.partition] = max(highs.get(tp.partition, 0), last + 1)
            if now >= next_report:
                next_report = now + PROGRESS_S
                events.put(("progress", spec.index, (stats.records, dict(highs))))
    except Exception as exc:
        stats.error = f"{type(exc).__name__}: {exc}"
    finally:
        try:
            consumer.close()  # commits (auto commit) and leaves the group
        except Exception as exc:
            stats.error = stats.error or f"close: {type(exc).__name__}: {exc}"
        events.put(("done", spec.index, asdict(stats)))


def _distinct(intervals: list[list[int]], low: int, high: int) -> int:
    """How many distinct offsets of [low, high) the [start, end) intervals cover."""
    covered, reach = 0, low
    for s, e in sorted(intervals):
        s, e = max(s, reach), min(e, high)
        if e > s:
            covered += e - s
            reach = e
    return covered


def run_consumers(bootstrap: str, topic: str, partitions: int, end_offsets: dict[int, int],
                  count: int, group_id: str | None, args: argparse.Namespace
                  ) -> dict[str, Any]:
    """``count`` consumers read the topic until every partition is read to its end."""
    in_process = args.consumer_mode == "process"
    ctx = multiprocessing.get_context("spawn")
    events: Any = ctx.Queue() if in_process else queue.Queue()
    go: Any = ctx.Event() if in_process else threading.Event()
    stop: Any = ctx.Event() if in_process else threading.Event()
    specs = [WorkerSpec(i, bootstrap, topic, partitions, group_id, args.max_poll_records)
             for i in range(count)]
    workers: list[Any] = [
        (ctx.Process if in_process else threading.Thread)(
            target=consume_worker, args=(spec, events, go, stop, in_process), daemon=True,
            name=f"consumer-{spec.index}") for spec in specs]
    done: dict[int, dict[str, Any]] = {}
    try:
        for worker in workers:
            worker.start()
        highs: dict[int, dict[int, int]] = {}
        records_seen: dict[int, int] = {}
        ready: set[int] = set()
        deadline = time.monotonic() + 60
        while len(ready) < count:  # every consumer created (processes: imports done)
            if time.monotonic() > deadline:
                raise TimeoutError("the consumers did not start within 60 s")
            with contextlib.suppress(queue.Empty):
                kind, index, payload = events.get(timeout=0.5)
                if kind == "done":
                    raise RuntimeError(f"consumer {index} failed: {payload['error']}")
                ready.add(index)
        go.set()
        deadline = time.monotonic() + args.consume_timeout
        last_note = time.monotonic()
        while len(done) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"not all records read within {args.consume_timeout} s")
            try:
                kind, index, payload = events.get(timeout=0.5)
            except queue.Empty:
                if in_process and not any(w.is_alive() for w in workers):
                    raise RuntimeError("every consumer process exited without a report") from None
                continue
            if kind == "progress":
                records_seen[index] = payload[0]
                highs[index] = payload[1]
            elif kind == "done":
                done[index] = payload
                if payload["error"] and not stop.is_set():
                    raise RuntimeError(f"consumer {index} failed: {payload['error']}")
            if not stop.is_set() and all(
                    max((h.get(p, 0) for h in highs.values()), default=0) >= end
                    for p, end in end_offsets.items()):
                stop.set()
            if time.monotonic() - last_note > 5:
                last_note = time.monotonic()
                err.print(f"  {sum(records_seen.values())} records read")
    finally:
        stop.set()
        go.set()
        for worker in workers:
            worker.join(30)
        for worker in workers:
            if in_process and worker.is_alive():
                worker.terminate()
                worker.join(5)
        if in_process:
            events.close()
            events.join_thread()
    stats = [done[i] for i in sorted(done)]
    return _throughput(stats, end_offsets)


def _throughput(stats: list[dict[str, Any]], end_offsets: dict[int, int]) -> dict[str, Any]:
    assigned = [e[1] for s in stats for e in s["events"] if e[0] == "assigned" and e[2]]
    start = min(assigned) if assigned else min(s["started"] for s in stats)
    released = min(s["started"] for s in stats)
    end = max(s["last_record"] or start for s in stats)
    seconds = max(end - start, 1e-9)
    records = sum(s["records"] for s in stats)
    total_bytes = sum(s["bytes"] for s in stats)
    per_partition: dict[str, Any] = {}
    duplicates = missing = 0
    for p, end_offset in sorted(end_offsets.items()):
        intervals = [run for s in stats for run in s["runs"].get(p, [])]
        total = sum(e - s for s, e in intervals)
        distinct = _distinct(intervals, 0, end_offset)
        duplicates += total - _distinct(intervals, 0, 1 << 62)
        missing += end_offset - distinct
        per_partition[str(p)] = {"end_offset": end_offset, "read": total, "distinct": distinct}
    generations = sorted({e[3] for s in stats for e in s["events"] if e[0] == "assigned"})
    revocations = sum(1 for s in stats for e in s["events"] if e[0] in ("revoked", "lost")
                      and e[1] < end)
    members = []
    for s in stats:
        own = (s["last_record"] - s["first_record"]) if s["first_record"] else 0.0
        final = sorted({p for e in s["events"] if e[0] == "assigned" for p in e[2]})
        members.append({
            "member": s["index"], "records": s["records"],
            "mb": round(s["bytes"] / 1e6, 2),
            "partitions_read": sorted(int(p) for p in s["runs"]),
            "partitions_assigned": final,
            "records_per_s": round(s["records"] / seconds, 1),
            "own_span_s": round(own, 3),
            "own_records_per_s": round(s["records"] / own, 1) if own > 0 else None,
            "first_record_s": round(s["first_record"] - start, 3) if s["first_record"] else None,
            "last_record_s": round(s["last_record"] - start, 3) if s["last_record"] else None,
            "error": s["error"],
        })
    return {
        "records": records, "mb": round(total_bytes / 1e6, 2), "seconds": round(seconds, 3),
        "records_per_s": round(records / seconds, 1),
        "mb_per_s": round(total_bytes / seconds / 1e6, 2),
        "first_assignment_after_s": round(start - released, 3),
        "seconds_from_start": round(end - released, 3),
        "duplicates": duplicates, "missing": missing,
        "exactly_once": duplicates == 0 and missing == 0,
        "generations": generations, "revocations_before_end": revocations,
        "rebalanced_midway": len(generations) > 1 or revocations > 0,
        "members": members, "partitions": per_partition,
    }


def produce(bootstrap: str, topic: str, partitions: int, records: int, record_size: int
            ) -> dict[str, Any]:
    payload = os.urandom(record_size)
    failures: list[BaseException] = []

    def done(metadata: object, error: BaseException | None) -> None:
        if error is not None:
            failures.append(error)

    err.print(f"producing {records} records of {record_size} bytes to {topic}")
    with Producer(bootstrap, acks=1, batch_size=262144, linger_ms=5) as producer:
        producer.partitions_for(topic)
        start = time.perf_counter()
        for i in range(records):
            producer.send(topic, value=payload, partition=i % partitions, on_delivery=done)
        producer.flush()
        seconds = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"{len(failures)} records failed: {failures[0]}")
    return {"records": records, "seconds": round(seconds, 3),
            "records_per_s": round(records / seconds, 1),
            "mb_per_s": round(records * record_size / seconds / 1e6, 2),
            "acks": 1, "batch_size": 262144, "linger_ms": 5}


def throughput(cluster: BenchCluster, args: argparse.Namespace) -> dict[str, Any]:
    cluster.start_coordinators(args.throughput_delay_ms)
    produced = produce(cluster.bootstrap, DATA_TOPIC, args.partitions, args.records,
                       args.record_size)
    with Consumer(cluster.bootstrap) as consumer:
        tps = [TopicPartition(DATA_TOPIC, p) for p in range(args.partitions)]
        end_offsets = {tp.partition: o for tp, o in consumer.end_offsets(tps).items()}
    if sum(end_offsets.values()) != args.records:
        raise RuntimeError(f"end offsets {end_offsets} do not add up to {args.records}")
    group = f"throughput-{uuid.uuid4().hex[:12]}"
    err.print(f"{args.group_consumers} consumers in group {group} read the topic "
              f"(one {args.consumer_mode} each)")
    grouped = run_consumers(cluster.bootstrap, DATA_TOPIC, args.partitions, end_offsets,
                            args.group_consumers, group, args)
    err.print(f"group: {grouped['records_per_s']} records/s, {grouped['mb_per_s']} MB/s, "
              f"duplicates {grouped['duplicates']}, missing {grouped['missing']}")
    err.print("one consumer (assign mode, no group) reads the topic")
    single = run_consumers(cluster.bootstrap, DATA_TOPIC, args.partitions, end_offsets, 1,
                           None, args)
    err.print(f"single: {single['records_per_s']} records/s, {single['mb_per_s']} MB/s")
    for result in (grouped, single):
        if result["exactly_once"]:  # the per-partition counts only when something is off
            del result["partitions"]
    return {"group_id": group, "initial_rebalance_delay_ms": args.throughput_delay_ms,
            "produce": produced, "end_offsets": end_offsets, "group": grouped,
            "single_consumer": single}
