"""Smoke test of bench/peers/jetstream_vs_strand.py (``make bench-peers``): a tiny run
of its three sides — NATS JetStream, Strand through the gRPC SDK, Strand through the
Kafka listener with confluent-kafka — writes one JSON document in which every side
produced every record, read every one of them back, stored three copies, and the
ratios between sides are there; the run leaves no files behind. No timing is
asserted: the figures are the benchmark's to report."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH = REPO_ROOT / "bench" / "peers" / "jetstream_vs_strand.py"
RECORDS, RECORD_SIZE = 2000, 1024
SIDES = {"nats": "nats_jetstream", "sdk": "strand", "kafka": "strand_kafka"}

pytestmark = pytest.mark.slow


def _nats_server() -> None:
    if shutil.which("nats-server") is None and not Path("/usr/sbin/nats-server").exists():
        pytest.fail("nats-server is not installed: run `make bench-peers` once, or "
                    "`apt-get install nats-server`")


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    _nats_server()
    tmp = tmp_path_factory.mktemp("peer-bench")
    work, output = tmp / "work", tmp / "peers.json"
    work.mkdir()
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--records", str(RECORDS), "--record-size",
         str(RECORD_SIZE), "--rounds", "1", "--json", "--no-table", "--output", str(output)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=400, check=False,
        env={**os.environ, "TMPDIR": str(work)})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert list(work.iterdir()) == [], "the benchmark left its clusters' files behind"
    parsed: dict[str, Any] = json.loads(output.read_text())
    assert json.loads(proc.stdout) == parsed  # --json and --output: the same document
    return parsed


def test_every_side_reads_back_every_record_it_produced(document: dict[str, Any]) -> None:
    assert document["records"] == RECORDS and document["record_size"] == RECORD_SIZE
    assert document["sides"] == list(SIDES)
    assert document["complete"] is True
    for key in SIDES.values():
        side = document[key]
        assert "error" not in side, side
        assert side["records"] == RECORDS and side.get("failures", 0) == 0
        assert side["records_per_s"] > 0 and side["mb_per_s"] > 0
        assert 0 < side["latency_ms"]["p50"] <= side["latency_ms"]["p99"]
        assert side["consume"]["records"] == RECORDS, (key, side["consume"])
        assert side["consume"]["bytes"] == RECORDS * RECORD_SIZE
        assert side["consume"]["records_per_s"] > 0
        assert side["stored_copies"] >= 3, (key, side["stored_per_node"])
        assert isinstance(side["load_avg_1m_before"], float)
    kafka = document["strand_kafka"]
    assert kafka["acks"] == "all" and kafka["idempotent"] is True
    assert kafka["topic"]["partitions"] == 6 and kafka["topic"]["replication_factor"] == 3
    assert kafka["consume"]["partitions"] == 6


def test_ratios_and_rounds_cover_every_pair(document: dict[str, Any]) -> None:
    for phase in ("produce", "consume"):
        ratios = document["ratios"][phase]
        assert set(ratios) == {"kafka_vs_sdk", "kafka_vs_nats", "sdk_vs_nats"}
        assert all(value is not None and value > 0 for value in ratios.values()), ratios
    assert document["ratio"] == document["ratios"]["produce"]["sdk_vs_nats"]
    assert document["target_ratio"] == 2.0 and isinstance(document["met"], bool)
    [row] = document["rounds"]
    assert row["round"] == 1 and row["order"] == list(SIDES)
    assert all(row[name]["consumed"] == RECORDS for name in SIDES)


def test_unknown_side_is_refused_before_anything_starts() -> None:
    proc = subprocess.run([sys.executable, str(BENCH), "--sides", "nats,redpanda"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 2
    assert "--sides" in proc.stderr and "redpanda" in proc.stderr
