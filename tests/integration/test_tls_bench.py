"""Smoke test of bench/tls_bench.py (``make bench-tls``): a tiny run on its three
clusters (plaintext, mutual TLS, and TLS with authentication and ACLs) writes one JSON
document with both sections, every round's rates and the TLS / plaintext and secured
/ plaintext ratios, and removes the clusters' folder. No timing is asserted: the cost
is the benchmark's to report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH = REPO_ROOT / "bench" / "tls_bench.py"
RECORDS, ROUNDS, MODES = 600, 2, ("plaintext", "tls", "secured")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("tls-bench")
    output, clusters = tmp / "tls.json", tmp / "clusters"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--records", str(RECORDS), "--rounds", str(ROUNDS),
         "--storage-nodes", "1", "--replication-factor", "1", "--min-insync-replicas", "1",
         "--partitions", "2", "--output", str(output), "--dir", str(clusters)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert not clusters.exists() or not list(clusters.iterdir()), \
        "the benchmark left its clusters' files behind"
    parsed: dict[str, Any] = json.loads(output.read_text())
    return parsed


def test_both_sections_compare_tls_with_plaintext(document: dict[str, Any]) -> None:
    assert document["benchmark"] == "tls_bench"
    assert document["settings"]["records"] == RECORDS
    for section in ("produce", "consume"):
        rows = document[section]["rounds"]
        assert [row["round"] for row in rows] == list(range(ROUNDS))
        assert [row["order"] for row in rows] == [list(MODES), [*MODES[1:], MODES[0]]]
        for row in rows:
            for mode in MODES:
                assert row[mode]["records"] == RECORDS, (section, row)
                assert row[mode]["records_per_s"] > 0 and row[mode]["mb_per_s"] > 0
        for mode in MODES[1:]:
            ratio = document[section][f"{mode}_vs_plaintext"]
            assert ratio["of"] == f"{mode} / plaintext" and len(ratio["per_round"]) == ROUNDS
            assert ratio["ratio"] > 0 and "target" not in ratio
            assert document["summary"][f"{section}_{mode}_vs_plaintext"] == ratio["ratio"]
        for mode in MODES:
            spread = document[section]["records_per_s"][mode]
            assert spread["min"] <= spread["median"] <= spread["max"]
    assert set(document["service_warnings"]) == set(MODES)
