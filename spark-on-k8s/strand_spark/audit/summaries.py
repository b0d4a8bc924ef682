"""Which records are compared, and the per-bucket summaries of both sides.

A source record's *status* says whether the mirror should already hold it:

- ``excluded``: its provenance path holds the target cluster, so the mirror must not
  copy it (the loop guard of active/active mirroring);
- ``before``: its offset is below the lowest source offset the mirror holds a copy of
  (the mirror started later, or the target's retention already dropped the copy);
- ``compared``: its offset lies between the lowest and the highest source offset the
  mirror holds a copy of in that partition. The mirror copies each partition in order
  and commits its copies transactionally, so a hole there never closes later: a
  record without a copy is *missing*;
- ``pending``: beyond the highest copied offset (or no copy of the partition at all)
  and younger than the grace period: the mirror has not reached it yet;
- ``overdue``: beyond the highest copied offset and older than the grace period: the
  mirror is behind (reported, not counted as loss: it may still arrive).

A copy is ``compared`` when its source offset lies within the offsets read from the
source, ``outside`` otherwise (the source read ended earlier, or retention dropped the
original).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from strand_spark.audit.records import (
    BUCKET_KEY,
    CHECKSUM_MODULUS,
    HASH,
    LATENCY_MS,
    OFFSET,
    PARTITION,
    TOPIC,
    TS_MS,
)

STATUS = "status"
COMPARED, BEFORE, PENDING, OVERDUE, EXCLUDED, OUTSIDE = (
    "compared", "before", "pending", "overdue", "excluded", "outside")
LATE = "late"


def _bounds(frame: DataFrame, low: str, high: str) -> DataFrame:
    """Per topic-partition lowest and highest offset (few rows: broadcast them)."""
    return F.broadcast(frame.groupBy(TOPIC, PARTITION)
                       .agg(F.min(OFFSET).alias(low), F.max(OFFSET).alias(high)))


def classify_source(source: DataFrame, copies: DataFrame, now_ms: int,
                    grace_ms: int) -> DataFrame:
    """``source`` (:func:`~strand_spark.audit.records.source_records`) with a status
    column (see the module docstring); ``copies`` are the mirror's copies only."""
    low, high = F.col("mirror_low"), F.col("mirror_high")
    offset = F.col(OFFSET)
    status = (F.when(F.col("excluded"), F.lit(EXCLUDED))
              .when(low.isNotNull() & (offset < low), F.lit(BEFORE))
              .when(high.isNotNull() & (offset <= high), F.lit(COMPARED))
              .when(F.col(TS_MS) >= F.lit(now_ms - grace_ms), F.lit(PENDING))
              .otherwise(F.lit(OVERDUE)))
    return (source.join(_bounds(copies, "mirror_low", "mirror_high"),
                        [TOPIC, PARTITION], "left")
            .withColumn(STATUS, status).drop("mirror_low", "mirror_high", "excluded"))


def classify_copies(copies: DataFrame, source: DataFrame, late_after_ms: int) -> DataFrame:
    """``copies`` (mirror records that are copies) with a status column (``compared``
    or ``outside`` the source offsets read) and ``late`` (latency above the limit)."""
    offset = F.col(OFFSET)
    inside = offset.between(F.col("source_low"), F.col("source_high"))
    return (copies.join(_bounds(source, "source_low", "source_high"),
                        [TOPIC, PARTITION], "left")
            .withColumn(STATUS, F.when(F.coalesce(inside, F.lit(False)), F.lit(COMPARED))
                        .otherwise(F.lit(OUTSIDE)))
            .withColumn(LATE, F.coalesce(F.col(LATENCY_MS) > F.lit(late_after_ms),
                                         F.lit(False)))
            .drop("source_low", "source_high", "is_copy"))


def _count_if(condition: Column) -> Column:
    return F.count(F.when(condition, F.lit(1)))


def _checksum_if(condition: Column) -> Column:
    """Sum of the hashes (exact decimal) modulo 2**64: order-independent, and a
    duplicate or a missing record changes it."""
    total = F.sum(F.when(condition, F.col(HASH).cast("decimal(38,0)")))
    folded = F.pmod(F.coalesce(total, F.lit(0).cast("decimal(38,0)")),
                    F.lit(CHECKSUM_MODULUS))
    return folded.cast("decimal(20,0)")


def bucket_summaries(source: DataFrame, copies: DataFrame) -> DataFrame:
    """One row per source topic, partition and bucket on either side: counts,
    checksums, offsets of the compared records on both sides, plus the source records
    left out, by status, the copies outside the source, and the late copies."""
    compared = F.col(STATUS) == F.lit(COMPARED)
    offset = F.when(compared, F.col(OFFSET))
    source_side = source.groupBy(*BUCKET_KEY).agg(
        _count_if(compared).alias("source_records"),
        _checksum_if(compared).alias("source_checksum"),
        F.min(offset).alias("source_min_offset"), F.max(offset).alias("source_max_offset"),
        _count_if(F.col(STATUS) == F.lit(PENDING)).alias("pending"),
        _count_if(F.col(STATUS) == F.lit(OVERDUE)).alias("overdue"),
        _count_if(F.col(STATUS) == F.lit(BEFORE)).alias("before_mirror"),
        _count_if(F.col(STATUS) == F.lit(EXCLUDED)).alias("excluded"))
    mirror_side = copies.groupBy(*BUCKET_KEY).agg(
        _count_if(compared).alias("mirror_records"),
        _checksum_if(compared).alias("mirror_checksum"),
        F.min(offset).alias("mirror_min_offset"), F.max(offset).alias("mirror_max_offset"),
        _count_if(F.col(STATUS) == F.lit(OUTSIDE)).alias("outside_source"),
        _count_if(F.col(LATE)).alias(LATE))
    counts = ("source_records", "mirror_records", "pending", "overdue", "before_mirror",
              "excluded", "outside_source", LATE)
    zero: dict[str, bool | float | int | str] = dict.fromkeys(counts, 0)
    joined = source_side.join(mirror_side, BUCKET_KEY, "full_outer").fillna(zero)
    zero_sum = F.lit(0).cast("decimal(20,0)")
    return (joined
            .withColumn("source_checksum", F.coalesce("source_checksum", zero_sum))
            .withColumn("mirror_checksum", F.coalesce("mirror_checksum", zero_sum)))
