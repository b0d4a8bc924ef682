"""The two sides of an audit as uniform rows: source records and mirror copies.

Both inputs have the read schema of ``format("strand")`` with ``includeHeaders=true``
(:data:`READ_SCHEMA_DDL`). Each becomes rows of ``topic, partition, offset, ts_ms, bucket,
hash`` in the *source's* coordinates: a copy is placed at the source topic, partition
and offset named by its ``strand.mirror.source`` header. Everything is a Spark column
expression (no Python UDF), so it runs at the JVM's speed.
"""

from __future__ import annotations

from decimal import Decimal
from typing import cast

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from strand_spark.provenance import PATH_HEADER, SOURCE_HEADER, TIME_HEADER
from strand_spark.schema import read_schema

# What both sides are read as: the data source's rows with their headers.
READ_SCHEMA_DDL = read_schema(include_headers=True)

# The uniform columns both sides are turned into.
TOPIC, PARTITION, OFFSET = "topic", "partition", "offset"
TS_MS, BUCKET, HASH = "ts_ms", "bucket", "hash"
LATENCY_MS = "latency_ms"
POSITION = [TOPIC, PARTITION, OFFSET]
BUCKET_KEY = [TOPIC, PARTITION, BUCKET]

# Checksums are sums of signed 64-bit hashes, kept exact as decimals and folded
# modulo 2**64: order-independent, and (unlike xor) a duplicate changes them.
CHECKSUM_MODULUS = Decimal(2**64)

# What ``strand.mirror.source`` holds: ``<topic>/<partition>/<offset>``.
_SOURCE_POSITION = r"^(.+)/([0-9]+)/([0-9]+)$"


def require_read_schema(frame: DataFrame, side: str) -> None:
    """Refuse a frame without the columns the audit reads (``side`` names it)."""
    expected = cast(StructType, DataType.fromDDL(READ_SCHEMA_DDL))
    # Types by name, nullability aside (sources differ in what they declare nullable).
    have = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    wrong = [f"{f.name} {f.dataType.simpleString()}" for f in expected.fields
             if have.get(f.name) != f.dataType.simpleString()]
    if wrong:
        raise ValueError(f"the {side} records lack the strand read schema's columns "
                         f"{', '.join(wrong)}: read them with format('strand') and "
                         "includeHeaders=true")


def last_header(name: str) -> Column:
    """The last value of header ``name`` as text (null when absent)."""
    matching = F.filter(F.col("headers"), lambda h: h["key"] == F.lit(name))
    return F.try_element_at(matching, F.lit(-1))["value"].cast("string")


def record_hash() -> Column:
    """A 64-bit hash of a record's key and value (null-ness included, so a null key
    and an empty one differ)."""
    return F.xxhash64(F.isnull("key"), F.col("key"), F.isnull("value"), F.col("value"))


def bucket_of(ts_ms: Column, bucket_ms: int) -> Column:
    """The start (ms) of the event-time bucket holding ``ts_ms`` (exact integer maths)."""
    return ts_ms - F.pmod(ts_ms, F.lit(bucket_ms))


def path_clusters() -> Column:
    """The clusters of ``strand.mirror.path`` as an array (null when never mirrored)."""
    return F.split(last_header(PATH_HEADER), ",")


def source_records(frame: DataFrame, target_cluster: str, bucket_ms: int) -> DataFrame:
    """The source side: ``topic, partition, offset, ts_ms, bucket, hash, excluded``.

    ``excluded`` marks records whose provenance path already holds the target cluster:
    the mirror refuses to copy them (that is what stops active/active loops), so they
    are not expected on the target."""
    require_read_schema(frame, "source")
    ts_ms = F.unix_millis(F.col("timestamp"))
    excluded = F.coalesce(F.array_contains(path_clusters(), target_cluster), F.lit(False))
    return frame.select(
        F.col("topic").alias(TOPIC), F.col("partition").alias(PARTITION),
        F.col("offset").alias(OFFSET), ts_ms.alias(TS_MS),
        bucket_of(ts_ms, bucket_ms).alias(BUCKET), record_hash().alias(HASH),
        excluded.alias("excluded"))


def mirror_records(frame: DataFrame, source_cluster: str, bucket_ms: int) -> DataFrame:
    """The mirror side, in source coordinates: ``topic, partition, offset`` from the
    ``strand.mirror.source`` header, ``ts_ms``/``bucket`` from the copy's timestamp
    (the mirror preserves timestamps), ``hash``, ``latency_ms`` (``strand.mirror.time``
    minus the timestamp) and ``is_copy``.

    A target record is a copy from ``source_cluster`` when the last cluster of its
    ``strand.mirror.path`` is that cluster and its source header parses; the others
    (records produced on the target, copies from a third cluster, a damaged header)
    have ``is_copy`` false and null source coordinates."""
    require_read_schema(frame, "mirror")
    position = last_header(SOURCE_HEADER)
    from_source = F.try_element_at(path_clusters(), F.lit(-1)) == F.lit(source_cluster)
    parsed = F.coalesce(position.rlike(_SOURCE_POSITION), F.lit(False))
    is_copy = F.coalesce(from_source, F.lit(False)) & parsed

    def part(index: int) -> Column:
        return F.when(is_copy, F.regexp_extract(position, _SOURCE_POSITION, index))

    ts_ms = F.unix_millis(F.col("timestamp"))
    written_ms = last_header(TIME_HEADER).try_cast("long")
    rows = frame.select(
        part(1).alias(TOPIC), part(2).try_cast("int").alias(PARTITION),
        part(3).try_cast("long").alias(OFFSET), ts_ms.alias(TS_MS),
        bucket_of(ts_ms, bucket_ms).alias(BUCKET), record_hash().alias(HASH),
        (written_ms - ts_ms).alias(LATENCY_MS), is_copy.alias("is_copy"))
    # A partition or offset too large for its type is a damaged header too.
    return rows.withColumn("is_copy", F.col("is_copy") & F.col(PARTITION).isNotNull()
                           & F.col(OFFSET).isNotNull())
