"""Issue 14, point 1: the ``strand`` sink. Batch writes are all-or-nothing (each task's
transaction is prepared, the driver commits them all or aborts them all); streaming
writes are exactly-once across replays of a micro-batch (strand_spark.ledger): a batch
Spark runs again adds nothing twice, a commit cut short between the ledger's
``prepared`` and ``committed`` entries is finished by the next one, and a task's failed
attempt leaves nothing open."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from strand import Admin, Consumer, NewTopic, TopicPartition
from strand_spark.ledger import LedgerEntry, SinkLedger
from strand_spark.options import write_options
from strand_spark.writers import StrandStreamWriter
from tests.support.cluster import SdkCluster, unique

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow

NOW_MS = (int(time.time()) - 60) * 1000


def make_topic(cluster: SdkCluster, name: str, partitions: int = 2) -> str:
    topic = unique(name)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    return topic


def committed(cluster: SdkCluster, topic: str, partitions: int = 2,
              settle_s: float = 1.0) -> list[tuple[int, bytes | None, bytes | None, int,
                                                   list[tuple[str, bytes | None]]]]:
    """What a read_committed reader sees: (partition, key, value, ms, headers)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    out: list[tuple[int, bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]] = []
    with Consumer(cluster.bootstrap, isolation_level="read_committed",
                  fetch_max_wait_ms=50) as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        quiet = time.monotonic()
        while time.monotonic() - quiet < settle_s:
            for records in consumer.poll(timeout_ms=100).values():
                quiet = time.monotonic()
                out.extend((r.partition, r.key, r.value, r.timestamp,
                            [(k, v) for k, v in r.headers]) for r in records)
    return sorted(out, key=lambda row: (row[0], row[2] or b""))


def test_batch_write_takes_sparks_kafka_columns(spark: SparkSession,
                                                strand_cluster: SdkCluster) -> None:
    topic = make_topic(strand_cluster, "sink")
    rows = [(f"k{i}" if i % 3 else None, f"v{i}", topic, i % 2,
             [("h", f"{i}".encode())], dt.datetime.fromtimestamp(NOW_MS / 1000 + i, dt.UTC))
            for i in range(40)]
    df = spark.createDataFrame(rows, "key string, value string, topic string, "
                               "partition int, headers array<struct<key: string, value: "
                               "binary>>, timestamp timestamp").repartition(3)
    df.write.mode("append").format("strand") \
        .option("strand.bootstrap", strand_cluster.bootstrap).save()
    got = committed(strand_cluster, topic)
    assert len(got) == 40
    expected = sorted(((i % 2, f"k{i}".encode() if i % 3 else None, f"v{i}".encode(),
                        NOW_MS + i * 1000, [("h", f"{i}".encode())]) for i in range(40)),
                      key=lambda row: (row[0], row[2]))
    assert got == expected


def test_batch_write_is_all_or_nothing(spark: SparkSession,
                                       strand_cluster: SdkCluster) -> None:
    from pyspark.errors import PySparkException
    from pyspark.sql.functions import udf

    topic = make_topic(strand_cluster, "sink-fail")

    @udf("string")
    def explode_late(value: str) -> str:
        if value == "v59":
            raise ValueError("a task fails after others have written")
        return value

    df = spark.range(60).selectExpr("concat('v', id) AS value").repartition(3)
    with pytest.raises(PySparkException, match="a task fails"):
        df.select(explode_late("value").alias("value")).write.mode("append").format("strand") \
            .option("strand.bootstrap", strand_cluster.bootstrap).option("topic", topic).save()
    assert committed(strand_cluster, topic) == []


def test_a_dataframe_the_sink_cannot_write_is_refused_before_any_task(
        spark: SparkSession, strand_cluster: SdkCluster) -> None:
    from pyspark.errors import PySparkException

    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup()
    writer = spark.range(3).selectExpr("CAST(id AS STRING) AS key").write.mode("append") \
        .format("strand") \
        .option("strand.bootstrap", strand_cluster.bootstrap).option("topic", "x")
    with pytest.raises(PySparkException, match="needs a 'value' column"):
        writer.save()
    bad_headers = spark.range(3).selectExpr("'v' AS value", "array('h') AS headers")
    with pytest.raises(PySparkException, match="headers"):
        bad_headers.write.mode("append").format("strand") \
            .option("strand.bootstrap", strand_cluster.bootstrap).option("topic", "x").save()
    no_topic = spark.range(3).selectExpr("'v' AS value")
    with pytest.raises(PySparkException, match="a 'topic' column or the option topic"):
        no_topic.write.mode("append").format("strand").option("strand.bootstrap",
                                               strand_cluster.bootstrap).save()
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs


# -- the streaming protocol, driven by hand (executor write, driver commit) ------------

def rows(values: list[str], topic: str) -> Iterator[pa.RecordBatch]:
    yield pa.RecordBatch.from_pydict({"value": [v.encode() for v in values],
                                      "topic": [topic] * len(values),
                                      "partition": [0] * len(values)})


def stream_writer(cluster: SdkCluster, sink_id: str) -> StrandStreamWriter:
    from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

    schema = StructType([StructField("value", BinaryType()), StructField("topic", StringType()),
                         StructField("partition", IntegerType())])
    options = write_options({"strand.bootstrap": cluster.bootstrap,
                             "strand.sinkId": sink_id}, streaming=True)
    return StrandStreamWriter(options, schema)


def values(cluster: SdkCluster, topic: str) -> list[str]:
    return [v.decode() for _, _, v, _, _ in committed(cluster, topic, 1)
            if v is not None]


def test_a_replayed_micro_batch_adds_nothing(strand_cluster: SdkCluster) -> None:
    topic = make_topic(strand_cluster, "eo", partitions=1)
    writer = stream_writer(strand_cluster, unique("sink"))
    writer.commit([writer.write(rows(["a", "b"], topic))], 0)
    writer.commit([writer.write(rows(["a", "b"], topic))], 0)  # Spark runs batch 0 again
    writer.commit([writer.write(rows(["c"], topic))], 1)
    assert sorted(values(strand_cluster, topic)) == ["a", "b", "c"]
    last = SinkLedger(strand_cluster.bootstrap, writer.sink_id).last()
    assert last is not None and (last.batch, last.state) == (1, "committed")


def test_a_commit_repeated_after_a_failure_counts_once(strand_cluster: SdkCluster) -> None:
    topic = make_topic(strand_cluster, "eo-again", partitions=1)
    writer = stream_writer(strand_cluster, unique("sink"))
    staged = [writer.write(rows(["a", "b"], topic))]
    writer.commit(staged, 0)
    writer.commit(staged, 0)  # the driver tries its commit again (it did not hear back)
    writer.commit([writer.write(rows(["c"], topic))], 1)
    assert values(strand_cluster, topic) == ["a", "b", "c"]


def test_a_commit_cut_short_is_finished_by_the_replay(strand_cluster: SdkCluster) -> None:
    topic = make_topic(strand_cluster, "eo-cut", partitions=1)
    writer = stream_writer(strand_cluster, unique("sink"))
    writer.commit([writer.write(rows(["a"], topic))], 0)
    # Batch 1: the driver records it as prepared, then dies before committing.
    staged = writer.write(rows(["b", "c"], topic))
    assert staged.prepared is not None and staged.slot == 1
    ledger = SinkLedger(strand_cluster.bootstrap, writer.sink_id)
    ledger.append(LedgerEntry(1, "prepared", staged.slot, (staged.prepared,), 2))
    assert values(strand_cluster, topic) == ["a"]
    # Spark restarts and runs batch 1 again: its tasks take the other slot, so they
    # cannot fence the prepared transactions; the driver finishes those, drops these.
    replay = writer.write(rows(["b", "c"], topic))
    assert replay.slot == 0
    writer.commit([replay], 1)
    writer.commit([writer.write(rows(["d"], topic))], 2)
    assert values(strand_cluster, topic) == ["a", "b", "c", "d"]


def test_a_failed_attempt_leaves_nothing_open(strand_cluster: SdkCluster) -> None:
    topic = make_topic(strand_cluster, "eo-retry", partitions=1)
    writer = stream_writer(strand_cluster, unique("sink"))
    writer.write(rows(["lost-attempt"], topic))  # a task whose executor then died
    began = time.monotonic()
    writer.commit([writer.write(rows(["retried"], topic))], 0)  # its retry, same slot
    assert values(strand_cluster, topic) == ["retried"]
    # The dead attempt's transaction was aborted by the retry's fencing, not left to
    # its 10-minute timeout: the last stable offset moved at once.
    assert time.monotonic() - began < 30


def test_spark_replaying_a_batch_after_a_crash_writes_it_once(
        spark: SparkSession, strand_cluster: SdkCluster, tmp_path: Path) -> None:
    source = make_topic(strand_cluster, "eo-src", partitions=2)
    target = make_topic(strand_cluster, "eo-dst", partitions=2)
    spark.createDataFrame([(f"v{i}", i % 2) for i in range(100)], "value string, partition int")\
        .write.mode("append").format("strand").option("strand.bootstrap", strand_cluster.bootstrap)\
        .option("topic", source).save()
    checkpoint = tmp_path / "checkpoint"

    def run() -> Any:
        query = (spark.readStream.format("strand")
                 .option("strand.bootstrap", strand_cluster.bootstrap)
                 .option("subscribe", source).option("startingOffsets", "earliest")
                 .option("maxOffsetsPerTrigger", "40").load()
                 .selectExpr("value", "partition")
                 .writeStream.format("strand")
                 .option("strand.bootstrap", strand_cluster.bootstrap)
                 .option("topic", target).option("strand.sinkId", unique_sink)
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        return query

    unique_sink = unique("replay")
    run()
    # A driver that died after the sink committed its last batch but before Spark
    # wrote that batch's entry in its commit log: Spark runs the batch again.
    commits = sorted((checkpoint / "commits").iterdir(), key=lambda p: p.name)
    last = [p for p in commits if p.name.isdigit()][-1]
    last.unlink()
    (checkpoint / "commits" / f".{last.name}.crc").unlink(missing_ok=True)
    replay = run()
    assert sum(p["numInputRows"] for p in replay.recentProgress) > 0  # it did run again
    got = committed(strand_cluster, target)
    assert len(got) == 100
    assert sorted(v or b"" for _, _, v, _, _ in got) == sorted(
        f"v{i}".encode() for i in range(100))
