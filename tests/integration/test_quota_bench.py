"""Smoke test of bench/quota_bench.py (``make bench-quotas``): a short run writes one
JSON document with its three phases and the limited client's rate against its quota,
and removes its cluster's folder. No rate is asserted: that is the benchmark's to
report (the phases here are too short for the quota to settle)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH = REPO_ROOT / "bench" / "quota_bench.py"

pytestmark = pytest.mark.slow


def test_a_short_run_reports_every_phase(tmp_path: Path) -> None:
    output, cluster = tmp_path / "quotas.json", tmp_path / "cluster"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--seconds", "4", "--warmup", "1", "--quota", "2e6",
         "--storage-nodes", "1", "--replication-factor", "1", "--partitions", "2",
         "--output", str(output), "--dir", str(cluster)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert not cluster.exists() or not list(cluster.iterdir())
    document = json.loads(output.read_text())
    assert document["benchmark"] == "quota_bench"
    assert document["settings"]["quota_bytes_per_s"] == 2e6
    phases = document["phases"]
    assert set(phases) == {"free_alone", "both", "limited_alone"}
    assert set(phases["both"]) == {"quota-limited", "quota-free"}
    for clients in phases.values():
        for client, rate in clients.items():
            assert rate["seconds"] > 0 and rate["bytes"] >= 0
            # a throttled client may see nothing acknowledged in so short a phase
            assert client == "quota-limited" or rate["bytes"] > 0
    summary = document["summary"]
    assert summary["limited_vs_quota"]["target"] == [0.9, 1.1]
    assert summary["limited_vs_quota"]["ratio"] == round(
        phases["both"]["quota-limited"]["mb_per_s"] / 2, 3)
