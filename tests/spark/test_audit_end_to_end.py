"""The audit job through the real ``strand`` data source: records on a real cluster,
copies with the mirror's provenance headers written by the SDK (a gap and a duplicate
injected), the entry point's own loading. One cluster plays both sides (the audit only
sees two bootstraps and two cluster names); the two-cluster run with the real mirror
is the mirror's acceptance test."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from strand import Admin, NewTopic, Producer
from strand_spark.provenance import SourcePosition, mirrored_headers
from tests.support.cluster import SdkCluster, unique

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow

JOB = Path(__file__).resolve().parents[2] / "spark-on-k8s" / "jobs" / "audit.py"
PARTITIONS = 3
PER_PARTITION = 20
BUCKET_MS = 600_000
# Recent (retention keeps them), one record a second, from a bucket's start.
BASE_MS = (int(time.time() * 1000) - 3_600_000) // BUCKET_MS * BUCKET_MS


def job() -> ModuleType:
    spec = importlib.util.spec_from_file_location("audit_job_e2e", JOB)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timestamp(offset: int) -> int:
    return BASE_MS + offset * 1000


def fill(cluster: SdkCluster, topic: str, *, skip: set[tuple[int, int]],
         twice: set[tuple[int, int]]) -> None:
    """``topic`` on the "source" and its copy ``A.<topic>`` on the "target", the copy
    as the mirror writes it (provenance headers, same key, value and timestamp)."""
    copy = f"A.{topic}"
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1), NewTopic(copy, PARTITIONS, 1)])
    with Producer(cluster.bootstrap, linger_ms=2) as producer:
        for p in range(PARTITIONS):
            for o in range(PER_PARTITION):
                key, value = f"k{o}".encode(), f"{topic}-{p}-{o}".encode()
                producer.send(topic, value=value, key=key, partition=p,
                              timestamp_ms=timestamp(o), headers=[("n", str(o).encode())])
                if (p, o) in skip:
                    continue
                headers = mirrored_headers([("n", str(o).encode())], "A",
                                           SourcePosition(topic, p, o), timestamp(o) + 800)
                for _ in range(2 if (p, o) in twice else 1):
                    producer.send(copy, value=value, key=key, partition=p,
                                  timestamp_ms=timestamp(o), headers=headers)
        producer.flush()


def test_the_job_finds_a_gap_and_a_duplicate_on_a_real_cluster(
        spark: SparkSession, strand_cluster: SdkCluster, tmp_path: Path) -> None:
    orders, payments = unique("orders"), unique("payments")
    fill(strand_cluster, orders, skip={(1, 7)}, twice={(2, 15)})
    fill(strand_cluster, payments, skip=set(), twice=set())
    bootstrap = strand_cluster.bootstrap
    code = job().main([
        "--source-bootstrap", bootstrap, "--source-cluster", "A",
        "--target-bootstrap", bootstrap, "--target-cluster", "B",
        "--topics", f"{orders},{payments}", "--bucket-minutes", "10",
        "--report-dir", str(tmp_path)])
    assert code == 1
    summary = json.loads((tmp_path / "latest.json").read_text())
    found = [(f["kind"], f["topic"], f["partition"], f["bucket_start_ms"], f["offsets"])
             for f in summary["findings"]]
    assert found == [("missing", orders, 1, BASE_MS, [[7, 7]]),
                     ("duplicate", orders, 2, BASE_MS, [[15, 15]])]
    totals = summary["totals"]
    assert totals["compared"] == 2 * PARTITIONS * PER_PARTITION
    assert totals["copies"] == 2 * PARTITIONS * PER_PARTITION
    latency = {x["topic"]: x for x in summary["latency"]}
    assert latency[payments]["max_ms"] == 800 and latency[payments]["copies"] == 60
    assert summary["topics"] == sorted([orders, payments])
    assert (tmp_path / "latest.png").stat().st_size > 10_000
