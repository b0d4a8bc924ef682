"""Drill-down: which source offsets are missing, duplicated or altered, looked for only
in the buckets whose counts or checksums differ (a clean bucket costs nothing more).

A bucket that does not match is compared offset by offset: the source records and the
copies of that bucket, plus, on the other side, the same offsets wherever they sit (a
copy whose timestamp moved to another bucket is found, not taken for a loss).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from strand_spark.audit.model import FindingKind
from strand_spark.audit.records import BUCKET, BUCKET_KEY, HASH, OFFSET, POSITION
from strand_spark.audit.summaries import COMPARED, STATUS

KIND, EXTRA = "kind", "extra"


def anomalies(source: DataFrame, copies: DataFrame, mismatched: DataFrame) -> DataFrame:
    """One row per anomalous source offset: ``kind, topic, partition, bucket, offset,
    extra`` (``extra`` is the number of records the finding counts: the surplus copies
    of a duplicate, 1 otherwise). ``source``/``copies`` are the classified sides,
    ``mismatched`` the keys (topic, partition, bucket) of the buckets to look into."""
    wanted = F.broadcast(mismatched)
    source = source.where(F.col(STATUS) == F.lit(COMPARED))
    copies = copies.where(F.col(STATUS) == F.lit(COMPARED))
    positions = (source.join(wanted, BUCKET_KEY, "left_semi").select(*POSITION)
                 .union(copies.join(wanted, BUCKET_KEY, "left_semi").select(*POSITION))
                 .distinct())
    originals = (source.join(positions, POSITION, "left_semi")
                 .select(*POSITION, F.col(BUCKET).alias("source_bucket"),
                         F.col(HASH).alias("source_hash")))
    copied = (copies.join(positions, POSITION, "left_semi").groupBy(*POSITION)
              .agg(F.count(F.lit(1)).alias("copies"), F.min(BUCKET).alias("copy_bucket"),
                   F.min(HASH).alias("low_hash"), F.max(HASH).alias("high_hash")))
    both = originals.join(copied, POSITION, "full_outer")
    has_original = F.col("source_hash").isNotNull()
    copies_n = F.coalesce(F.col("copies"), F.lit(0))
    altered = (has_original & (copies_n > 0)
               & ((F.col("low_hash") != F.col("source_hash"))
                  | (F.col("high_hash") != F.col("source_hash"))))
    # An offset can be several things at once (copied twice, one copy altered): one
    # row per kind, in a single pass over the join.
    kinds = F.filter(F.array(
        F.when(has_original & (copies_n == 0), F.lit(FindingKind.MISSING.value)),
        F.when(copies_n > 1, F.lit(FindingKind.DUPLICATE.value)),
        F.when(altered, F.lit(FindingKind.ALTERED.value)),
        F.when(~has_original, F.lit(FindingKind.UNMATCHED.value))),
        lambda kind: kind.isNotNull())
    flagged = both.select(*POSITION, copies_n.alias("copies"),
                          F.coalesce(F.col("source_bucket"), F.col("copy_bucket"))
                          .alias(BUCKET), F.explode(kinds).alias(KIND))
    extra = F.when(F.col(KIND) == F.lit(FindingKind.DUPLICATE.value), F.col("copies") - 1)
    return flagged.select(KIND, *BUCKET_KEY, OFFSET,
                          F.coalesce(extra, F.lit(1)).cast("long").alias(EXTRA))


def offset_ranges(found: DataFrame, per_finding: int) -> DataFrame:
    """Per kind, topic, partition and bucket: ``records`` (the sum of ``extra``),
    ``runs`` (how many runs of consecutive offsets) and at most ``per_finding`` runs,
    the lowest first, as ``first, last``: one row per run listed."""
    key = [KIND, *BUCKET_KEY]
    in_order = Window.partitionBy(*key).orderBy(OFFSET)
    # Consecutive offsets share offset - row_number (the gaps-and-islands trick).
    islands = (found.withColumn("island", F.col(OFFSET) - F.row_number().over(in_order))
               .groupBy(*key, "island")
               .agg(F.min(OFFSET).alias("first"), F.max(OFFSET).alias("last"),
                    F.sum(EXTRA).alias("island_records")))
    by_run = Window.partitionBy(*key).orderBy("first")
    everything = Window.partitionBy(*key)
    return (islands.withColumn("rank", F.row_number().over(by_run))
            .withColumn("runs", F.count(F.lit(1)).over(everything))
            .withColumn("records", F.sum("island_records").over(everything))
            .where(F.col("rank") <= per_finding)
            .drop("island", "rank", "island_records"))
