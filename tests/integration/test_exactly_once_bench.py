"""Smoke test of bench/exactly_once_bench.py: a tiny run (a few seconds of work on
its own cluster) writes one JSON file with every section, its parameters and
positive numbers, and removes its cluster's folder. No timing is asserted: the
targets are the benchmark's to report, machines are noisy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH = REPO_ROOT / "bench" / "exactly_once_bench.py"
SIZES = [1, 3]


def _positive(value: Any, where: str) -> None:
    assert isinstance(value, int | float) and not isinstance(value, bool), (where, value)
    assert value > 0, (where, value)


def _spread(row: dict[str, Any], where: str) -> None:
    for key in ("median", "min", "max"):
        _positive(row[key], f"{where}.{key}")
    assert row["min"] <= row["median"] <= row["max"], (where, row)


def _ratio(row: dict[str, Any], rounds: int, target: float, where: str) -> None:
    _positive(row["ratio"], where)
    assert len(row["per_round"]) == rounds, (where, row)
    assert row["target"] == target and row["met"] == (row["ratio"] >= target), (where, row)


def _latency(rows: dict[str, Any], samples: int, where: str) -> None:
    assert set(rows) == {str(k) for k in SIZES}, (where, rows)
    for size, row in rows.items():
        assert row["samples"] == samples, (where, size, row)
        for key in ("p50_ms", "p99_ms", "max_ms", "mean_ms"):
            _positive(row[key], f"{where}[{size}].{key}")
        assert row["p50_ms"] <= row["p99_ms"] <= row["max_ms"], (where, size, row)


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("eos-bench")
    output, cluster_dir = tmp / "eos.json", tmp / "cluster"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--records", "1500", "--rounds", "2",
         "--endtxn-iterations", "3", "--endtxn-partitions", ",".join(map(str, SIZES)),
         "--partitions", "3", "--consume-transactions", "3", "--consume-batch-records", "50",
         "--commit-cost-iterations", "4",
         "--output", str(output), "--json", "--dir", str(cluster_dir)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=400, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert not cluster_dir.exists() or not list(cluster_dir.iterdir()), \
        "the benchmark left its cluster's files behind"
    parsed: dict[str, Any] = json.loads(output.read_text())
    assert json.loads(proc.stdout) == parsed  # --json: the same document on stdout
    return parsed


@pytest.mark.slow
def test_settings_and_summary(document: dict[str, Any]) -> None:
    assert document["benchmark"] == "exactly_once_bench"
    settings = document["settings"]
    assert (settings["storage_nodes"], settings["replication_factor"],
            settings["min_insync_replicas"], settings["record_size"], settings["acks"],
            settings["transaction_coordinators"]) == (3, 3, 2, 1024, "all", 1)
    summary = document["summary"]
    for key in ("idempotent_vs_plain", "transactional_vs_plain",
                "read_committed_vs_read_uncommitted"):
        _positive(summary[key], key)
        assert isinstance(summary[f"{key}_met"], bool)
    for size in SIZES:
        for kind in ("end_txn_rpc", "commit_complete", "commit_transaction"):
            row = summary[f"{kind}_ms[{size} partitions]"]
            _positive(row["p50"], kind)
            _positive(row["p99"], kind)
    assert isinstance(summary["commit_adds_cpu_ms"], float)


def _cost(row: dict[str, Any], variants: list[str], cores: int) -> None:
    """Each run's CPU by process adds up to its total, and the requests it made are
    the variant's: the gateway's Produce and the storage nodes' replication for all,
    EndTxn for the transactional run alone."""
    for variant in variants:
        cost = row[variant]["cost"]
        cpu = dict(cost["cpu_us_per_record"])
        total = cpu.pop("total")
        assert {"client", "gateway", "storage-1", "etcd"} <= set(cpu), cpu
        _positive(cpu["client"], f"{variant} client cpu")
        assert abs(sum(cpu.values()) - total) <= 0.1 * len(cpu), cost
        assert 0 < cost["cores_busy"] <= cores + 0.5, cost
        served = cost["requests_per_1000_records"]
        _positive(served["gateway Produce"], f"{variant} gateway Produce")
        assert any(key.endswith(" ReplicaFetch") for key in served), served
        assert ("gateway EndTxn" in served) == (variant == "transactional"), served


@pytest.mark.slow
def test_produce_section(document: dict[str, Any]) -> None:
    produce = document["produce"]
    parameters = produce["parameters"]
    assert parameters["records_per_run"] == 1500 and parameters["rounds"] == 2
    assert parameters["commit_interval_ms"] == 100
    variants = ["plain", "idempotent", "transactional"]
    assert parameters["variants"] == variants
    assert len(produce["rounds"]) == 2
    assert [r["order"][0] for r in produce["rounds"]] == variants[:2]  # rotated
    for row in produce["rounds"]:
        for variant in variants:
            for key in ("seconds", "records_per_s", "mb_per_s"):
                _positive(row[variant][key], f"{variant}.{key}")
        transactional = row["transactional"]
        assert transactional["transactions"] >= 1
        _positive(transactional["commit_transaction"]["p50_ms"], "commit_transaction")
        _cost(row, variants, document["machine"]["cpu_count"])
    for variant in variants:
        _spread(produce["cpu_us_per_record"][variant], f"cpu_us_per_record.{variant}")
        _spread(produce["records_per_s"][variant], f"records_per_s.{variant}")
        _spread(produce["mb_per_s"][variant], f"mb_per_s.{variant}")
    _ratio(produce["idempotent_vs_plain"], 2, 0.9, "idempotent_vs_plain")
    _ratio(produce["transactional_vs_plain"], 2, 0.85, "transactional_vs_plain")


@pytest.mark.slow
def test_end_txn_section(document: dict[str, Any]) -> None:
    latency = document["end_txn_latency"]
    assert latency["parameters"]["partitions"] == SIZES
    assert latency["parameters"]["iterations"] == 3
    for kind in ("end_txn_rpc", "commit_complete", "commit_transaction"):
        _latency(latency[kind], 3, kind)


@pytest.mark.slow
def test_consume_section(document: dict[str, Any]) -> None:
    consume = document["consume"]
    parameters = consume["parameters"]
    assert parameters["records"] == 3 * 3 * 50  # transactions x partitions x batch
    for row in consume["rounds"]:
        for isolation in ("read_committed", "read_uncommitted"):
            assert row[isolation]["records"] == parameters["records"]
            _positive(row[isolation]["records_per_s"], isolation)
            _positive(row[isolation]["mb_per_s"], isolation)
    for isolation in ("read_committed", "read_uncommitted"):
        _spread(consume["records_per_s"][isolation], isolation)
    _ratio(consume["read_committed_vs_read_uncommitted"], 2, 0.9, "read_committed")


@pytest.mark.slow
def test_commit_cost_section(document: dict[str, Any]) -> None:
    """Per iteration, the transaction's requests are one commit's (one EndTxn at the
    gateway and the coordinator, WriteTxnMarkers to each partition's leader), the records-only
    side's none of them; the CPU of each side adds up."""
    section = document["commit_cost"]
    parameters = section["parameters"]
    assert (parameters["partitions"], parameters["iterations_per_round"],
            parameters["rounds"]) == (3, 4, 2)
    assert len(section["rounds"]) == 2
    for row in section["rounds"]:
        for side in ("records_only", "transaction"):
            cpu = dict(row[side]["cpu_ms"])
            total = cpu.pop("total")
            _positive(total, f"{side} cpu")
            assert abs(sum(cpu.values()) - total) <= 0.01 * len(cpu), row[side]
            _positive(row[side]["ms_per_iteration"], f"{side} ms_per_iteration")
        txn, records = row["transaction"]["requests"], row["records_only"]["requests"]
        assert txn["gateway EndTxn"] == txn["txns-0 EndTxn"] == 1.0, txn
        markers = sum(v for k, v in txn.items() if k.endswith(" WriteTxnMarkers"))
        assert 1.0 <= markers <= 3.0, txn  # one call per partition leader, per commit
        assert not any("EndTxn" in k or "WriteTxnMarkers" in k for k in records), records
        assert records["gateway Produce"] >= 1.0, records
        assert row["transaction_adds_cpu_ms"] == pytest.approx(
            row["transaction"]["cpu_ms"]["total"] - row["records_only"]["cpu_ms"]["total"],
            abs=0.02)
    for side in ("records_only", "transaction"):
        _spread(section["cpu_ms_per_iteration"][side], side)
    assert {"client", "gateway", "storage-1", "txns-0", "total"} <= set(
        section["transaction_adds_cpu_ms_by_process"])
