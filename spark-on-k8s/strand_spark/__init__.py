"""Strand for Spark: the ``strand`` data source (``spark.read.format("strand")``,
``readStream``, ``write``, ``writeStream``) and the code of the mirror and audit jobs
(``spark-on-k8s/jobs``).

Register the data source once per Spark session::

    from strand_spark import register
    register(spark)
    df = spark.read.format("strand").option("strand.bootstrap", "127.0.0.1:7070") \\
        .option("subscribe", "orders").load()

PySpark is imported only by the modules that need it, so the option parsing, offset
planning and naming code are usable (and tested) without a JVM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register"]


def register(spark: SparkSession) -> None:
    """Make ``format("strand")`` known to ``spark`` (idempotent)."""
    from strand_spark.source import StrandDataSource

    spark.dataSource.register(StrandDataSource)
