"""The copy of one source partition range into the target cluster (executor side).

A Spark partition of the mirror's micro-batch holds one offset range of one source
partition. Its records go, in order, to the same partition of the target topic,
keeping key, value, headers and timestamp, with the provenance headers added
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
from strand_spark.provenance import SourcePosition, loops_back, mirrored_headers
from strand_spark.record_writer import StagedWrite

if TYPE_CHECKING:
    import pyarrow as pa

    from strand.producer.future import RecordFuture

STAGED_SCHEMA = "staged binary"


@dataclass(frozen=True)
class CopySpec:
    """What every copy task of a mirror needs (pickled to the executors)."""

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


def _millis(value: Any) -> int:
    return int(value.timestamp() * 1000)


def copy_range(spec: CopySpec, slot: int, batches: Iterator[pa.RecordBatch]
               ) -> CopiedRange:
    context = TaskContext.get()
    task = context.partitionId() if context is not None else 0
    naming = naming_policy(spec.naming)
    transactional_id = f"strand-mirror-{spec.sink_id}-{task}-{slot}"
    settings = {"linger_ms": 5, "batch_size": 262_144, **spec.producer}
    sent: list[tuple[int, RecordFuture]] = []
    source: tuple[str, int] | None = None
    first = last = -1
    skipped = size = 0
    oldest: int | None = None
    now_ms = int(time.time() * 1000)
    with Producer(spec.target_bootstrap, transactional_id=transactional_id,
                  transaction_timeout_ms=spec.transaction_timeout_ms, **settings) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for batch in batches:
            columns = batch.to_pydict()
            for i in range(batch.num_rows):
                topic, partition = columns["topic"][i], columns["partition"][i]
                if source is None:
                    source = (topic, partition)
                    first = columns["offset"][i]
                elif source != (topic, partition):
                    raise RuntimeError(f"a mirror task got records of {source} and of "
                                       f"{(topic, partition)}: the source must not be "
                                       "split (no minPartitions)")
                offset = columns["offset"][i]
                last = offset
                headers = [(h["key"], h["value"]) for h in columns["headers"][i] or ()]
                if loops_back(headers, spec.target_cluster):
                    skipped += 1
                    continue
                timestamp = _millis(columns["timestamp"][i])
                oldest = timestamp if oldest is None else min(oldest, timestamp)
                key, value = columns["key"][i], columns["value"][i]
                size += len(key or b"") + len(value or b"")
                future = producer.send(
                    naming.target_topic(spec.source_cluster, topic), value=value, key=key,
                    partition=partition, timestamp_ms=timestamp,
                    headers=mirrored_headers(headers, spec.source_cluster,
                                             SourcePosition(topic, partition, offset), now_ms))
                sent.append((offset, future))
        if source is None:
            prepared = producer.prepare_transaction()
            return CopiedRange(prepared, 0, slot)
        producer.flush()
        pairs = [(offset, future.result().offset) for offset, future in sent]
        entry = OffsetMapEntry(source[0], source[1], first, last + 1,
                               naming.target_topic(spec.source_cluster, source[0]), source[1],
                               runs_of(pairs))
        producer.send(offset_map_topic(spec.source_cluster), key=entry.key,
                      value=entry.encode(), partition=0)
        prepared = producer.prepare_transaction()
    return CopiedRange(prepared, len(sent), slot, skipped=skipped, bytes=size,
                       oldest_ms=oldest, written_ms=int(time.time() * 1000))
