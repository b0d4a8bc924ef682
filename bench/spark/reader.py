"""Path (a), the batch reader: ``spark.read.format("strand")`` over the whole source
topic, every column materialised by Spark's ``noop`` sink (the rows are built and
dropped: nothing but the reading is measured). Timed from the action's start (the
driver plans the offset ranges) to its end; the session is started beforehand.
The check (not timed) reads the topic again into Arrow and compares it with A."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .data import TopicContents

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def start_session(master: str) -> tuple[SparkSession, float]:
    """A local session with the ``strand`` data source registered; returns it and the
    seconds its start took (the JVM's too)."""
    from pyspark.sql import SparkSession

    from strand_spark import register

    began = time.perf_counter()
    session = (SparkSession.builder.master(master).appName("strand-spark-bench")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session, time.perf_counter() - began


def _source(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    return (spark.read.format("strand").option("strand.bootstrap", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest")
            .option("endingOffsets", "latest").load())


def reader_run(spark: SparkSession, bootstrap: str, topic: str, records: int,
               data_bytes: int) -> dict[str, Any]:
    frame = _source(spark, bootstrap, topic)
    start = time.perf_counter()
    frame.write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - start
    return {"seconds": round(seconds, 3), "records": records,
            "records_per_s": round(records / seconds, 1),
            "mb_per_s": round(data_bytes / seconds / 1e6, 3)}


def reader_contents(spark: SparkSession, bootstrap: str, topic: str,
                    partitions: int) -> TopicContents:
    """What the batch reader returns, as the check compares it."""
    table = (_source(spark, bootstrap, topic).select("partition", "offset", "key")
             .orderBy("partition", "offset").toArrow())
    contents = TopicContents({p: [] for p in range(partitions)})
    for partition, offset, key in zip(table.column("partition").to_pylist(),
                                      table.column("offset").to_pylist(),
                                      table.column("key").to_pylist(), strict=True):
        contents.keys.setdefault(partition, []).append(int.from_bytes(key or b"", "big"))
        contents.last_offsets[partition] = offset
    return contents
