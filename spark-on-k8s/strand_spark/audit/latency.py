"""Mirror latency per source topic: the copy's ``strand.mirror.time`` minus the
record's timestamp (which the mirror preserves), as p50, p99 and max."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from strand_spark.audit.model import TopicLatency
from strand_spark.audit.records import LATENCY_MS, TOPIC

# percentile_approx's accuracy: relative error 1/10000, Spark's default.
_ACCURACY = 10_000


def topic_latency(copies: DataFrame) -> list[TopicLatency]:
    """The latency of every copy that carries a mirror time, per source topic."""
    timed = copies.where(F.col(LATENCY_MS).isNotNull())
    rows = (timed.groupBy(TOPIC)
            .agg(F.count(F.lit(1)).alias("copies"),
                 F.percentile_approx(LATENCY_MS, [0.5, 0.99], _ACCURACY).alias("pct"),
                 F.max(LATENCY_MS).alias("max_ms"))
            .orderBy(TOPIC).collect())
    return [TopicLatency(topic=r[TOPIC], copies=int(r["copies"]), p50_ms=int(r["pct"][0]),
                         p99_ms=int(r["pct"][1]), max_ms=int(r["max_ms"]))
            for r in rows]
