"""The benchmark's data and its check: ``records`` records of ``record_size`` bytes
written to A round robin over the partitions, each keyed by its 8-byte index; a copy
is read back (read_committed, every partition to its end) and compared partition by
partition with the source: the same keys, each once, in the same order."""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench_support import err

from strand import Consumer, Producer, TopicPartition
from strand_spark.provenance import TIME_HEADER

KEY_BYTES = 8
SILENCE_S = 60.0  # no progress for this long while reading: something is wrong


def fill(bootstrap: str, topic: str, partitions: int, records: int, record_size: int) -> int:
    """Write the source data (acks=all, idempotent); returns the key and value bytes."""
    payload = os.urandom(record_size)
    failures: list[BaseException] = []

    def done(metadata: object, error: BaseException | None) -> None:
        if error is not None:
            failures.append(error)

    with Producer(bootstrap, acks="all", enable_idempotence=True, batch_size=262_144,
                  linger_ms=5) as producer:
        for i in range(records):
            producer.send(topic, key=i.to_bytes(KEY_BYTES, "big"), value=payload,
                          partition=i % partitions, on_delivery=done)
            if failures:
                break
        producer.flush()
    if failures:
        raise RuntimeError(f"filling {topic} on {bootstrap} failed: {failures[0]!r}")
    return records * (KEY_BYTES + record_size)


@dataclass
class TopicContents:
    """A topic as a read_committed reader sees it."""

    keys: dict[int, list[int]]  # partition -> the record keys (as integers), in order
    last_offsets: dict[int, int] = field(default_factory=dict)  # of the last data record
    # The earliest strand.mirror.time header of each partition: when its first copy
    # task started (copies only).
    mirror_started_ms: dict[int, int] = field(default_factory=dict)

    @property
    def first_mirror_time_ms(self) -> int | None:
        return min(self.mirror_started_ms.values(), default=None)

    @property
    def records(self) -> int:
        return sum(len(k) for k in self.keys.values())


def read_topic(bootstrap: str, topic: str, partitions: int) -> TopicContents:
    """Every record of ``topic`` visible to read_committed readers now."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    contents = TopicContents({p: [] for p in range(partitions)})
    with Consumer(bootstrap, isolation_level="read_committed", max_poll_records=5000,
                  fetch_max_wait_ms=100) as consumer:
        ends = consumer.end_offsets(tps)
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        progress = time.monotonic()
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            got = consumer.poll(timeout_ms=200)
            for tp, items in got.items():
                for record in items:
                    contents.keys[tp.partition].append(
                        int.from_bytes(record.key or b"", "big"))
                    contents.last_offsets[tp.partition] = record.offset
                    _note_mirror_time(contents, tp.partition, record.headers)
                progress = time.monotonic()
            if time.monotonic() - progress > SILENCE_S:
                raise RuntimeError(f"reading {topic} on {bootstrap}: no record for "
                                   f"{SILENCE_S} s, positions short of {ends}")
    return contents


def _note_mirror_time(contents: TopicContents, partition: int, headers: Any) -> None:
    for name, value in headers or ():
        if name == TIME_HEADER and value is not None:
            written = int(value)
            known = contents.mirror_started_ms.get(partition)
            if known is None or written < known:
                contents.mirror_started_ms[partition] = written


def check_copy(source: TopicContents, copy: TopicContents) -> dict[str, Any]:
    """How ``copy`` differs from ``source``: records missing, duplicated, and the
    partitions whose order differs; ``exactly_once`` when it holds each source record
    once, in the source partition's order."""
    missing = duplicated = 0
    out_of_order: list[int] = []
    for partition, expected in source.keys.items():
        got = copy.keys.get(partition, [])
        have, want = Counter(got), Counter(expected)
        missing += sum((want - have).values())
        duplicated += sum((have - want).values())
        if got != expected and have == want:
            out_of_order.append(partition)
    extra = sum(len(k) for p, k in copy.keys.items() if p not in source.keys)
    return {"records": copy.records, "expected": source.records, "missing": missing,
            "duplicated": duplicated + extra, "partitions_out_of_order": out_of_order,
            "exactly_once": copy.keys == source.keys}


def log_check(path: str, check: dict[str, Any]) -> None:
    if not check["exactly_once"]:
        err.print(f"[red]{path}: NOT exactly once: {check}")
