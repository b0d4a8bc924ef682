"""The copy of one source partition range into the target cluster (executor side).

A Spark partition of the mirror's micro-batch is one offset range of one source
partition (the data source's ``offsetRangesOnly`` rows): the task reads the range from
the source itself, so the records never pass through Spark's JVM. They go, in order,
to the same partition of the target topic, keeping key, value, headers and
timestamp, with the provenance headers added
(strand_spark.provenance); records whose path already holds the target cluster are
not copied (they came from there: an active/active cycle). All of it, and the range's
offset map entry (strand.mirror.offset_map), is written in one transaction, which is
prepared for the driver to commit (strand_spark.writers.commit_batch).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark import TaskContext

from strand import Producer
from strand.mirror.offset_map import OffsetMapEntry, offset_map_topic, runs_of
from strand_spark.naming import naming_policy
from strand_spark.offsets import OffsetRange
from strand_spark.options import ReadOptions
from strand_spark.provenance import SourcePosition, loops_back, mirrored_headers
from strand_spark.range_reader import records_in_range
from strand_spark.record_writer import StagedWrite

if TYPE_CHECKING:
    import pyarrow as pa

    from strand.producer.future import RecordFuture

STAGED_SCHEMA = "staged binary"
RANGE_COLUMNS = ("topic", "partition", "startOffset", "endOffset")


@dataclass(frozen=True)
class CopySpec:
    """What every copy task of a mirror needs (pickled to the executors): ``source``
    reads the source (read_committed, headers)."""

    source: ReadOptions
    source_cluster: str
    target_cluster: str
    target_bootstrap: str
    naming: str
    sink_id: str
    transaction_timeout_ms: int = 600_000
    producer: dict[str, Any] = field(default_factory=dict)


@dataclass
class CopiedRange(StagedWrite):
    """A task's prepared copy, with what the driver reports as metrics."""

    skipped: int = 0
    bytes: int = 0
    oldest_ms: int | None = None  # the oldest copied record's source timestamp
    written_ms: int = 0


def copy_range(spec: CopySpec, slot: int, ranges: Iterator[pa.RecordBatch]) -> CopiedRange:
    """Copy the offset range in ``ranges`` (the data source's offsetRangesOnly rows: one
    per Spark partition) from the source: the records are read here, where they are
    written, never passed through Spark."""
    context = TaskContext.get()
    task = context.partitionId() if context is not None else 0
    parts = [OffsetRange(t, p, a, b) for batch in ranges
             for t, p, a, b in zip(*(batch.column(n).to_pylist() for n in RANGE_COLUMNS),
                                   strict=True)]
    if len(parts) > 1:
        raise RuntimeError(f"a mirror task got {len(parts)} offset ranges ({parts}); the "
                           "source must not be split (no minPartitions)")
    naming = naming_policy(spec.naming)
    transactional_id = f"strand-mirror-{spec.sink_id}-{task}-{slot}"
    settings = {"linger_ms": 5, "batch_size": 262_144, **spec.producer}
    with Producer(spec.target_bootstrap, transactional_id=transactional_id,
                  transaction_timeout_ms=spec.transaction_timeout_ms, **settings) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        if not parts:
            return CopiedRange(producer.prepare_transaction(), 0, slot)
        part = parts[0]
        copied = _copy(spec, producer, naming.target_topic(spec.source_cluster, part.topic),
                       part)
        pairs = [(offset, future.result().offset) for offset, future in copied.sent]
        entry = OffsetMapEntry(part.topic, part.partition, part.start, part.end,
                               naming.target_topic(spec.source_cluster, part.topic),
                               part.partition, runs_of(pairs))
        producer.send(offset_map_topic(spec.source_cluster), key=entry.key,
                      value=entry.encode(), partition=0)
        prepared = producer.prepare_transaction()
    return CopiedRange(prepared, len(copied.sent), slot, skipped=copied.skipped,
                       bytes=copied.bytes, oldest_ms=copied.oldest_ms,
                       written_ms=int(time.time() * 1000))


@dataclass
class _Copied:
    sent: list[tuple[int, RecordFuture]] = field(default_factory=list)
    skipped: int = 0
    bytes: int = 0
    oldest_ms: int | None = None


def _copy(spec: CopySpec, producer: Producer, target_topic: str,
          part: OffsetRange) -> _Copied:
    """Send the range's records (not those that would loop back) and flush."""
    copied = _Copied()
    now_ms = int(time.time() * 1000)
    source, target = spec.source_cluster, spec.target_cluster
    for records in records_in_range(spec.source, part):
        for r in records:
            if loops_back(r.headers, target):
                copied.skipped += 1
                continue
            if copied.oldest_ms is None or r.timestamp < copied.oldest_ms:
                copied.oldest_ms = r.timestamp
            copied.bytes += len(r.key or b"") + len(r.value or b"")
            future = producer.send(
                target_topic, value=r.value, key=r.key, partition=part.partition,
                timestamp_ms=r.timestamp,
                headers=mirrored_headers(r.headers, source,
                                         SourcePosition(part.topic, part.partition, r.offset),
                                         now_ms))
            copied.sent.append((r.offset, future))
    producer.flush()
    return copied
