"""The mirror's streaming query (driver side).

Source records are read with the ``strand`` data source (``read_committed``: a
transaction aborted on the source is never copied; headers included), at most
``--max-offsets-per-trigger`` per micro-batch. Each micro-batch, on the driver:

1. the target's topics are brought in step (strand_spark.mirror.topic_sync);
2. every Spark partition (one source partition's range) is copied by a task into the
   same target partition, in a prepared transaction with its offset map entry
   (strand_spark.mirror.copy_task);
3. the driver commits them exactly once (strand_spark.writers.commit_batch): a batch
   Spark runs again after a crash adds nothing;
4. metrics: records, bytes, replication latency and record age.

Source offsets live in Spark's checkpoint (``--checkpoint``); the sink's ledger and
the offset map live in the target cluster. A heartbeat goes to
``strand-mirror.heartbeats`` on the target every ``--heartbeat-seconds``.
"""

from __future__ import annotations

import json
import logging
import pickle
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from opentelemetry.metrics import CallbackOptions, Observation

from strand import Producer
from strand.mirror.offset_map import offset_map_topic
from strand_spark.mirror.arguments import MirrorSettings
from strand_spark.mirror.copy_task import STAGED_SCHEMA, CopiedRange, CopySpec, copy_range
from strand_spark.mirror.topic_sync import TopicSync, exclusive_pattern
from strand_spark.naming import naming_policy
from strand_spark.options import read_options
from strand_spark.topics import ensure_topic
from strand_spark.writers import commit_batch, current_slot

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

HEARTBEAT_TOPIC = "strand-mirror.heartbeats"
ATTEMPTS = 6  # of a start or a micro-batch: ~1 minute of pauses in all


@dataclass
class MirrorProgress:
    """What the driver knows of the mirror, for heartbeats and metrics."""

    batches: int = 0
    replays: int = 0
    records: int = 0
    skipped: int = 0
    bytes: int = 0
    last_batch: int | None = None
    latency_ms: int | None = None  # the last batch's oldest record: write - source time
    lock: threading.Lock = field(default_factory=threading.Lock)


class Mirror:
    def __init__(self, spark: SparkSession, settings: MirrorSettings) -> None:
        self.spark = spark
        self.settings = settings
        self.spec = CopySpec(read_options(self.source_options(), streaming=True),
                             settings.source_cluster, settings.target_cluster,
                             settings.target_bootstrap, settings.naming, settings.sink_id)
        self.topics = TopicSync(settings.source_bootstrap, settings.target_bootstrap,
                                settings.source_cluster, naming_policy(settings.naming),
                                settings.topics, settings.topics_pattern)
        self.progress = MirrorProgress()
        self._instruments()

    def _instruments(self) -> None:
        from strand.service.telemetry import meter

        source = meter()
        self._records = source.create_counter(
            "strand_mirror_records", description="records copied to the target")
        self._bytes = source.create_counter(
            "strand_mirror_bytes", unit="By", description="key and value bytes copied")
        self._latency = source.create_histogram(
            "strand_mirror_replication_latency", unit="ms",
            description="per micro-batch: when its copy was written minus the source "
                        "timestamp of its oldest record")

        def age(_: CallbackOptions) -> Iterator[Observation]:
            if self.progress.latency_ms is not None:
                yield Observation(self.progress.latency_ms)

        source.create_observable_gauge("strand_mirror_record_age", [age], unit="ms",
                                       description="age of the oldest record of the last "
                                                   "committed micro-batch when copied")

    # -- the query --------------------------------------------------------------------------

    def source_options(self) -> dict[str, str]:
        """The data source's options for reading the source: read_committed (an aborted
        transaction is never copied), with headers, offset ranges only (the copy tasks
        read the records themselves)."""
        s = self.settings
        options = {"strand.bootstrap": s.source_bootstrap, "startingOffsets": "earliest",
                   "isolationLevel": "read_committed", "includeHeaders": "true",
                   "offsetRangesOnly": "true"}
        if s.topics_pattern is not None:
            options["subscribePattern"] = exclusive_pattern(s.topics_pattern)
        else:
            options["subscribe"] = ",".join(s.topics)
        if s.max_offsets_per_trigger:
            options["maxOffsetsPerTrigger"] = str(s.max_offsets_per_trigger)
        return options

    def source(self) -> DataFrame:
        return self.spark.readStream.format("strand").options(**self.source_options()).load()

    def copy_batch(self, batch: DataFrame, batch_id: int) -> None:
        """Copy one micro-batch; an attempt that fails (a cluster unreachable for a
        moment, a task lost) is made again, up to ATTEMPTS times, before the query
        fails: a new attempt's tasks fence what the failed one left open, and the
        commit is safe to repeat."""
        retrying(f"micro-batch {batch_id}", lambda: self._copy_once(batch, batch_id))

    def _copy_once(self, batch: DataFrame, batch_id: int) -> None:
        self.topics.sync()
        slot = current_slot(self.settings.target_bootstrap, self.settings.sink_id)
        spec = self.spec

        def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            import pyarrow as pa

            staged = copy_range(spec, slot, batches)
            yield pa.RecordBatch.from_pydict({"staged": [pickle.dumps(staged)]})

        rows = batch.mapInArrow(task, STAGED_SCHEMA).collect()
        staged: list[CopiedRange] = [pickle.loads(r.staged) for r in rows]
        fresh = commit_batch(self.settings.target_bootstrap, self.settings.sink_id, staged,
                             batch_id)
        self._account(batch_id, staged, fresh)

    def _account(self, batch_id: int, staged: list[CopiedRange], fresh: bool) -> None:
        progress = self.progress
        with progress.lock:
            progress.batches += 1
            progress.last_batch = batch_id
            if not fresh:
                progress.replays += 1
                return
            records = sum(s.records for s in staged)
            size = sum(s.bytes for s in staged)
            progress.records += records
            progress.bytes += size
            progress.skipped += sum(s.skipped for s in staged)
            ages = [s.written_ms - s.oldest_ms for s in staged if s.oldest_ms is not None]
            if ages:
                progress.latency_ms = max(ages)
                self._latency.record(max(ages))
        self._records.add(records)
        self._bytes.add(size)
        log.info("mirror batch committed", extra={
            "batch": batch_id, "records": records, "bytes": size,
            "latency_ms": progress.latency_ms})

    def prepare(self) -> None:
        """The copies exist before the first batch, and the offset map (kept as long
        as the data usually is: 7 days)."""
        self.topics.sync()
        ensure_topic(self.settings.target_bootstrap,
                     offset_map_topic(self.settings.source_cluster),
                     {"retention.ms": str(7 * 86_400_000)})

    def start(self) -> StreamingQuery:
        retrying("the mirror's start", self.prepare)
        return (self.source().writeStream
                .foreachBatch(self.copy_batch)
                .option("checkpointLocation", self.settings.checkpoint)
                .trigger(processingTime=f"{self.settings.trigger_seconds} seconds")
                .queryName(f"strand-mirror-{self.settings.source_cluster}-to-"
                           f"{self.settings.target_cluster}")
                .start())

    # -- heartbeats -------------------------------------------------------------------------

    def heartbeats(self, stop: threading.Event) -> None:
        """Until ``stop``: a heartbeat every ``heartbeat_seconds`` (a failure is logged,
        and the next one tried)."""
        s = self.settings
        while True:
            try:
                ensure_topic(s.target_bootstrap, HEARTBEAT_TOPIC, {"retention.ms": "86400000"})
                break
            except Exception as exc:
                log.warning("mirror heartbeats: the topic cannot be made yet",
                            extra={"error": str(exc)})
                if stop.wait(s.heartbeat_seconds):
                    return
        with Producer(s.target_bootstrap, linger_ms=0) as producer:
            while not stop.wait(s.heartbeat_seconds):
                with self.progress.lock:
                    beat = {"source": s.source_cluster, "target": s.target_cluster,
                            "time": int(time.time() * 1000),
                            "batch": self.progress.last_batch,
                            "records": self.progress.records,
                            "latency_ms": self.progress.latency_ms}
                try:
                    producer.send(HEARTBEAT_TOPIC, key=s.source_cluster.encode(),
                                  value=json.dumps(beat).encode()).result(30)
                except Exception as exc:
                    log.warning("mirror heartbeat failed", extra={"error": str(exc)})


def retrying(what: str, work: Callable[[], None], attempts: int = ATTEMPTS) -> None:
    """``work()``, made again after a failure (a cluster unreachable for a moment, a
    task lost) up to ``attempts`` times with growing pauses, then its error raised."""
    for attempt in range(1, attempts + 1):
        try:
            work()
            return
        except Exception as exc:
            if attempt == attempts:
                raise
            pause = min(30.0, 2.0 ** attempt)
            log.warning(f"mirror: {what} failed; trying again", extra={
                "attempt": attempt, "retry_in_s": pause, "error": str(exc)[:2000]})
            time.sleep(pause)


def run_mirror(spark: SparkSession, settings: MirrorSettings,
               stop: threading.Event) -> None:
    """Run until ``stop`` is set or the query fails (raised)."""
    mirror = Mirror(spark, settings)
    beating = threading.Event()
    heart = threading.Thread(target=mirror.heartbeats, args=(beating,),
                             name="mirror-heartbeats", daemon=True)
    heart.start()
    query = mirror.start()
    try:
        while not stop.is_set() and query.isActive:
            stop.wait(1.0)
        if query.exception() is not None:
            raise RuntimeError(f"the mirror's query failed: {query.exception()}")
    finally:
        beating.set()
        if query.isActive:
            query.stop()
        heart.join(10)
