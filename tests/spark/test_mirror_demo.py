"""spark-on-k8s/demo/mirror_demo.py (``make mirror-demo``), small: it exits 0, the
audit's report (Markdown, plot, JSON summary) is where it says, its table is printed,
and the clusters' folder is removed.

Two clusters, the mirror and the audit each start a JVM: close to two minutes on two
cores, for parts the suite tests one by one (test_mirror_faults, test_audit_*). So it
runs with the Spark long checks (``make mirror-faults``, STRAND_SPARK_LONG=1), not in
``make test``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO = REPO_ROOT / "spark-on-k8s" / "demo" / "mirror_demo.py"


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("STRAND_SPARK_LONG") != "1",
                    reason="a long check: make mirror-faults runs it (STRAND_SPARK_LONG=1)")
def test_the_demo_mirrors_audits_and_reports(tmp_path: Path) -> None:
    report, clusters = tmp_path / "report", tmp_path / "clusters"
    proc = subprocess.run(
        [sys.executable, str(DEMO), "--records", "1200", "--report-dir", str(report),
         "--dir", str(clusters)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    for name in ("latest.md", "latest.png", "latest.json"):
        assert (report / name).stat().st_size > 0, name
    assert (report / "latest.png").read_bytes().startswith(b"\x89PNG")
    table = (report / "latest.md").read_text()
    assert table.strip() in proc.stdout
    assert str(report / "latest.md") in proc.stdout
    assert "the audit found the copy clean" in proc.stdout
    summary = json.loads((report / "latest.json").read_text())
    assert (summary["source_cluster"], summary["target_cluster"]) == ("east", "west")
    assert summary["clean"] is True and summary["exit_code"] == 0, summary
    assert summary["totals"]["source_records"] == 1200, summary["totals"]
    assert not clusters.exists(), "the demo left its clusters' folder behind"
