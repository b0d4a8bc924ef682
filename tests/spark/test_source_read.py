"""Issue 14, acceptance 3: the ``strand`` data source reads, batch and streaming, exactly
what the SDK reads (schema and values), honours its options, refuses a bad one before
any task runs, and ``read_committed`` hides aborted records. A real cluster, a real
local Spark."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from strand import Admin, Consumer, NewTopic, Producer, TopicPartition
from tests.support.cluster import SdkCluster, unique
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.slow

Row = tuple[Any, ...]
# Record i's timestamp is BASE_MS + i: recent, so that retention keeps it.
BASE_MS = (int(time.time()) - 3600) * 1000


def make_topic(cluster: SdkCluster, name: str, partitions: int = 3,
               config: dict[str, str] | None = None) -> str:
    topic = unique(name)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])
    return topic


def produce(cluster: SdkCluster, topic: str, count: int, partitions: int = 3,
            start: int = 0, batch_size: int = 16384) -> None:
    with Producer(cluster.bootstrap, linger_ms=2, batch_size=batch_size) as producer:
        for i in range(start, start + count):
            producer.send(topic, value=f"v{i}".encode(),
                          key=None if i % 7 == 0 else f"k{i}".encode(),
                          headers=[("n", str(i).encode()), ("empty", None)],
                          partition=i % partitions, timestamp_ms=BASE_MS + i)


def sdk_rows(cluster: SdkCluster, topic: str, partitions: int = 3,
             isolation: str = "read_uncommitted") -> list[Row]:
    """Everything the SDK reads, as (partition, offset, key, value, ms, type, headers)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    rows: list[Row] = []
    with Consumer(cluster.bootstrap, isolation_level=isolation,  # type: ignore[arg-type]
                  fetch_max_wait_ms=50) as consumer:
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "the SDK could not read the topic"
            for records in consumer.poll(timeout_ms=200).values():
                rows.extend((r.partition, r.offset, r.key, r.value, r.timestamp,
                             int(r.timestamp_type), [tuple(h) for h in r.headers])
                            for r in records)
    return sorted(rows)


def spark_rows(df: DataFrame) -> list[Row]:
    rows = []
    for r in df.collect():
        millis = round(r.timestamp.timestamp() * 1000)
        headers = [(h.key, h.value) for h in r.headers] if "headers" in r.__fields__ else []
        rows.append((r.partition, r.offset, r.key, r.value, millis, r.timestampType,
                     headers))
    return sorted(rows)


def reader(spark: SparkSession, cluster: SdkCluster, **options: str) -> Any:
    return spark.read.format("strand").option("strand.bootstrap", cluster.bootstrap) \
        .options(**options)


def test_batch_read_returns_what_the_sdk_reads(spark: SparkSession,
                                               strand_cluster: SdkCluster) -> None:
    topic = make_topic(strand_cluster, "read")
    produce(strand_cluster, topic, 600)
    df = reader(spark, strand_cluster, subscribe=topic, includeHeaders="true").load()
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
        "headers"]
    assert df.schema["timestamp"].dataType.typeName() == "timestamp"
    assert spark_rows(df) == sdk_rows(strand_cluster, topic)
    assert {r.topic for r in df.select("topic").distinct().collect()} == {topic}
    # Without includeHeaders: Spark's Kafka schema, no headers column.
    plain = reader(spark, strand_cluster, subscribe=topic).load()
    assert "headers" not in plain.columns and plain.count() == 600


def test_offsets_timestamps_assign_pattern_and_min_partitions(
        spark: SparkSession, strand_cluster: SdkCluster) -> None:
    topic = make_topic(strand_cluster, "opts")
    produce(strand_cluster, topic, 300)  # 100 per partition, offsets 0-99
    ranged = reader(spark, strand_cluster, subscribe=topic,
                    startingOffsets=f'{{"{topic}": {{"0": 10, "1": -2}}}}',
                    endingOffsets=f'{{"{topic}": {{"0": 20, "2": 5}}}}').load()
    counts = {r.partition: r["count"] for r in ranged.groupBy("partition").count().collect()}
    assert counts == {0: 10, 1: 100, 2: 5}
    # Record i has timestamp base + i and lands on partition i % 3: offset i // 3.
    by_time = reader(spark, strand_cluster, subscribe=topic,
                     startingOffsetsByTimestamp=f'{{"{topic}": {{"1": '
                                                f'{BASE_MS + 151}}}}}').load()
    first = by_time.where("partition = 1").agg({"offset": "min"}).collect()[0][0]
    assert first == 50  # record 151 is offset 50 of partition 1
    assert by_time.where("partition = 0").count() == 100  # not named: earliest
    assigned = reader(spark, strand_cluster, assign=f'{{"{topic}": [2]}}').load()
    assert {r.partition for r in assigned.select("partition").distinct().collect()} == {2}
    other = make_topic(strand_cluster, "opts-other", partitions=1)
    produce(strand_cluster, other, 5, partitions=1)
    pattern = reader(spark, strand_cluster,
                     subscribePattern=f"({topic}|{other})").load()
    assert pattern.count() == 305
    split = reader(spark, strand_cluster, subscribe=topic, minPartitions="12").load()
    assert split.rdd.getNumPartitions() >= 12 and split.count() == 300
    assert spark_rows(split) == spark_rows(reader(spark, strand_cluster, subscribe=topic).load())


def test_read_committed_hides_aborted_records(spark: SparkSession,
                                              strand_cluster: SdkCluster) -> None:
    topic = make_topic(strand_cluster, "txn", partitions=2)
    with Producer(strand_cluster.bootstrap, transactional_id=unique("spark-txn")) as p:
        p.init_transactions()
        for n, commit in enumerate([True, False, True, False, True]):
            p.begin_transaction()
            for i in range(10):
                p.send(topic, value=f"{'c' if commit else 'a'}{n}-{i}".encode(),
                       partition=i % 2)
            if commit:
                p.commit_transaction()
            else:
                p.flush()  # written, then aborted (unsent records would just fail)
                p.abort_transaction()
    committed = reader(spark, strand_cluster, subscribe=topic,
                       isolationLevel="read_committed").load()
    values = sorted(r.value.decode() for r in committed.collect())
    assert len(values) == 30 and all(v.startswith("c") for v in values)
    everything = reader(spark, strand_cluster, subscribe=topic).load()
    assert everything.count() == 50
    assert spark_rows(committed) == sdk_rows(strand_cluster, topic, 2, "read_committed")


def test_bad_options_fail_before_any_task(spark: SparkSession,
                                          strand_cluster: SdkCluster) -> None:
    from pyspark.errors import PySparkException

    started = spark.sparkContext.statusTracker().getJobIdsForGroup()
    for options, message in [
        ({"subscribe": "x", "startingOffsets": "sideways"}, "startingOffsets"),
        ({"subscribe": unique("missing")}, "does not exist"),
        ({"subscribe": "x", "colour": "red"}, "unknown option 'colour'"),
    ]:
        with pytest.raises(PySparkException, match=message):
            reader(spark, strand_cluster, **options).load().collect()
    with pytest.raises(PySparkException, match=r"strand\.bootstrap is required"):
        spark.read.format("strand").option("subscribe", "x").load().collect()
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == started


def test_records_deleted_before_they_are_read_are_data_loss(
        spark: SparkSession, strand_cluster: SdkCluster) -> None:
    from pyspark.errors import PySparkException

    topic = make_topic(strand_cluster, "loss", partitions=1,
                       config={"segment.bytes": "4096", "retention.bytes": "8192"})
    produce(strand_cluster, topic, 1000, partitions=1, batch_size=1024)
    with Consumer(strand_cluster.bootstrap) as consumer:
        tp = TopicPartition(topic, 0)
        wait_until(lambda: consumer.beginning_offsets([tp])[tp] > 0, 30,
                   "retention to delete the first segments")
        earliest = consumer.beginning_offsets([tp])[tp]
    asked = f'{{"{topic}": {{"0": 0}}}}'
    with pytest.raises(PySparkException, match="were deleted before they were read"):
        reader(spark, strand_cluster, subscribe=topic, startingOffsets=asked).load().collect()
    rest = reader(spark, strand_cluster, subscribe=topic, startingOffsets=asked,
                  failOnDataLoss="false").load()
    offsets = sorted(r.offset for r in rest.select("offset").collect())
    assert offsets[0] >= earliest and offsets[-1] == 999


def test_streaming_read_honours_max_offsets_and_resumes_from_its_checkpoint(
        spark: SparkSession, strand_cluster: SdkCluster, tmp_path: Path) -> None:
    topic = make_topic(strand_cluster, "stream")
    produce(strand_cluster, topic, 300)
    seen: list[tuple[int, int]] = []

    def run() -> None:
        def batch(df: DataFrame, batch_id: int) -> None:
            seen.append((batch_id, df.count()))
            spark_batches.extend(spark_rows(df))

        query = (spark.readStream.format("strand")
                 .option("strand.bootstrap", strand_cluster.bootstrap)
                 .option("subscribe", topic).option("startingOffsets", "earliest")
                 .option("includeHeaders", "true").option("maxOffsetsPerTrigger", "70")
                 .load().writeStream.foreachBatch(batch)
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert not query.isActive

    spark_batches: list[Row] = []
    run()
    assert sum(n for _, n in seen) == 300
    assert all(n <= 70 + 3 for _, n in seen) and len(seen) >= 300 // 73
    produce(strand_cluster, topic, 90, start=300)
    before = len(seen)
    run()  # the same checkpoint: only the new records
    assert sum(n for _, n in seen[before:]) == 90
    assert sorted(spark_batches) == sdk_rows(strand_cluster, topic)


def test_offset_ranges_only_plans_without_reading(spark: SparkSession,
                                                  strand_cluster: SdkCluster) -> None:
    topic = make_topic(strand_cluster, "ranges")
    produce(strand_cluster, topic, 30)
    ranges = reader(spark, strand_cluster, subscribe=topic, offsetRangesOnly="true",
                    startingOffsets=f'{{"{topic}": {{"1": 4}}}}', minPartitions="6").load()
    assert ranges.columns == ["topic", "partition", "startOffset", "endOffset"]
    rows = sorted((r.partition, r.startOffset, r.endOffset) for r in ranges.collect())
    assert {r.topic for r in ranges.collect()} == {topic}
    covered = {p: sum(b - a for q, a, b in rows if q == p) for p in range(3)}
    assert covered == {0: 10, 1: 6, 2: 10} and len(rows) >= 6
