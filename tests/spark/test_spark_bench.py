"""bench/spark_bench.py, tiny: one round of a few thousand records through the three
paths (batch reader, mirror job, SDK loop) writes one JSON document of the expected
shape, every path copied every record exactly once, and the clusters' folder is
removed. No throughput is asserted: the ratio is the benchmark's to report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH = REPO_ROOT / "bench" / "spark_bench.py"
RECORDS = 3000
PATHS = ("reader", "mirror", "loop")



def _positive(value: Any, where: str) -> None:
    assert isinstance(value, int | float) and not isinstance(value, bool), (where, value)
    assert value > 0, (where, value)


def test_the_check_finds_missing_duplicated_and_reordered_records(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison every path's copy goes through (bench/spark/data.py)."""
    monkeypatch.syspath_prepend(str(REPO_ROOT / "bench"))
    from spark.data import TopicContents, check_copy

    source = TopicContents({0: [0, 2, 4], 1: [1, 3, 5]})
    assert check_copy(source, TopicContents({0: [0, 2, 4], 1: [1, 3, 5]}))["exactly_once"]
    lost = check_copy(source, TopicContents({0: [0, 4], 1: [1, 3, 5]}))
    assert (lost["missing"], lost["duplicated"], lost["exactly_once"]) == (1, 0, False)
    twice = check_copy(source, TopicContents({0: [0, 2, 4, 4], 1: [1, 3, 5]}))
    assert (twice["missing"], twice["duplicated"], twice["exactly_once"]) == (0, 1, False)
    swapped = check_copy(source, TopicContents({0: [0, 2, 4], 1: [3, 1, 5]}))
    assert swapped["partitions_out_of_order"] == [1] and not swapped["exactly_once"]
    stray = check_copy(source, TopicContents({0: [0, 2, 4], 1: [1, 3, 5], 2: [9]}))
    assert (stray["duplicated"], stray["exactly_once"]) == (1, False)


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("spark-bench")
    output, cluster_dir = tmp / "spark.json", tmp / "clusters"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--records", str(RECORDS), "--record-size", "256",
         "--rounds", "1", "--output", str(output), "--dir", str(cluster_dir)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert not cluster_dir.exists() or not list(cluster_dir.iterdir()), \
        "the benchmark left its clusters' files behind"
    parsed: dict[str, Any] = json.loads(output.read_text())
    return parsed


@pytest.mark.slow
def test_every_path_copied_every_record_exactly_once(document: dict[str, Any]) -> None:
    assert document["summary"]["exactly_once_every_path"] is True
    assert sorted(c["path"] for c in document["checks"]) == sorted(PATHS)
    for check in document["checks"]:
        assert check["exactly_once"] is True, check
        assert (check["records"], check["expected"]) == (RECORDS, RECORDS), check
        assert check["missing"] == check["duplicated"] == 0, check
        assert check["partitions_out_of_order"] == [], check


@pytest.mark.slow
def test_each_path_reports_its_rate(document: dict[str, Any]) -> None:
    (row,) = document["rounds"]
    assert sorted(row["order"]) == sorted(PATHS)
    for path in PATHS:
        assert row[path]["records"] == RECORDS, (path, row[path])
        for key in ("seconds", "records_per_s", "mb_per_s"):
            _positive(row[path][key], f"{path}.{key}")
        # MB/s is records/s times the record's key and value bytes (8 + 256).
        assert row[path]["mb_per_s"] == pytest.approx(
            row[path]["records_per_s"] * 264 / 1e6, rel=0.01), (path, row[path])
        for unit in ("records_per_s", "mb_per_s"):
            spread = document["summary"][unit][path]
            assert spread["min"] <= spread["median"] <= spread["max"], (path, spread)
    mirror = row["mirror"]
    _positive(mirror["startup_s"], "mirror.startup_s")
    assert mirror["launch_to_visible_s"] >= mirror["seconds"]
    assert sum(b["records"] for b in mirror["batches"]) == RECORDS, mirror["batches"]


@pytest.mark.slow
def test_the_ratio_is_reported_against_its_target(document: dict[str, Any]) -> None:
    ratio = document["summary"]["mirror_vs_loop"]
    _positive(ratio["ratio"], "mirror_vs_loop")
    assert ratio["target"] == 0.5 and ratio["met"] == (ratio["ratio"] >= 0.5), ratio
    assert len(ratio["per_round"]) == 1, ratio
    settings = document["settings"]
    assert (settings["records"], settings["record_size"], settings["rounds"]) == \
        (RECORDS, 256, 1)
