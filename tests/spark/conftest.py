"""The Spark tests' fixtures: one local-mode Spark session for the whole test session
(starting a JVM costs seconds), with the ``strand`` data source registered, and one
Strand cluster."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.support.cluster import SdkCluster, start_sdk_cluster

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def spark_environment() -> None:
    """What PySpark needs here: the venv's python for the workers, loopback only."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="package")
def spark() -> Iterator[SparkSession]:
    spark_environment()
    from pyspark.sql import SparkSession

    from strand_spark import register

    session = (SparkSession.builder.master("local[2]").appName("strand-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="package")
def strand_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkCluster]:
    """One real cluster (a storage node, a transaction coordinator) for the Spark
    tests; they name their topics with tests.support.cluster.unique(). Retention runs
    every half second, so a test can have records deleted before it reads them."""
    cluster = start_sdk_cluster(tmp_path_factory.mktemp("spark-cluster"), nodes=1,
                                name="spark",
                                storage_args=("--maintenance-interval", "0.5"))
    yield cluster
    cluster.stop()
