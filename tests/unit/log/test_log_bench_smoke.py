"""Smoke test of bench/log_bench.py: a --quick run completes and reports a well-formed JSON.

Only the structure is checked; the performance targets are not (machines are noisy).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
BENCH = REPO_ROOT / "bench" / "log_bench.py"

THROUGHPUT_KEYS = (
    "batch_nominal_bytes", "batch_bytes", "records_per_batch", "batches", "total_bytes",
    "append_mb_s", "raw_write_mb_s", "append_vs_raw", "read_mb_s", "raw_read_mb_s",
    "read_vs_raw",
)
LATENCY_KEYS = (
    "log_bytes", "segments", "reads", "p50_us", "p99_us", "max_us", "mean_us",
    "raw_pread_p50_us", "raw_pread_p99_us", "p99_median_of_blocks_us",
    "raw_pread_p99_median_of_blocks_us",
)
CODEC_KEYS = ("records_per_batch", "batch_bytes", "batches", "records_per_s", "mb_s")
TARGET_KEYS = (
    "append_ge_0.5x_raw_at_1MiB",
    "append_ge_0.25x_raw_at_16KiB",
    "random_read_p99_large_le_2x_small",
    "all_met",
)


def _positive(row: dict[str, Any], keys: tuple[str, ...]) -> None:
    for key in keys:
        value = row[key]
        assert isinstance(value, int | float) and not isinstance(value, bool), (key, value)
        assert value > 0, (key, value)


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("log-bench")
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--json", "--dir", str(workdir)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    parsed = json.loads(proc.stdout)  # stdout holds exactly one JSON object
    assert isinstance(parsed, dict)
    assert not list(workdir.iterdir()), "the benchmark left files behind"
    return parsed


@pytest.mark.slow
def test_top_level_structure(result: dict[str, Any]) -> None:
    assert result["mb_unit"] == "1e6 bytes"
    for key in ("machine", "params", "throughput", "random_read", "codec_build", "targets"):
        assert isinstance(result[key], dict), key
    machine = result["machine"]
    assert machine["python"] and machine["platform"]
    assert machine["cpu_count"] >= 1
    params = result["params"]
    assert params["quick"] is True
    assert params["batch_sizes"] == [16384, 262144, 1048576]
    assert params["total_bytes_per_size"] > 0 and params["random_reads"] > 0
    assert result["elapsed_s"] > 0


@pytest.mark.slow
def test_throughput_rows(result: dict[str, Any]) -> None:
    throughput = result["throughput"]
    assert set(throughput) == {"16KiB", "256KiB", "1MiB"}
    for label, row in throughput.items():
        _positive(row, THROUGHPUT_KEYS)
        assert row["batch_bytes"] <= row["batch_nominal_bytes"], label
        assert row["batch_bytes"] > 0.9 * row["batch_nominal_bytes"], label
        assert row["total_bytes"] == row["batch_bytes"] * row["batches"], label


@pytest.mark.slow
def test_random_read_rows(result: dict[str, Any]) -> None:
    random_read = result["random_read"]
    for name in ("small", "large"):
        row = random_read[name]
        _positive(row, LATENCY_KEYS)
        assert row["p50_us"] <= row["p99_us"] <= row["max_us"], name
    assert random_read["large"]["log_bytes"] > random_read["small"]["log_bytes"]
    assert random_read["p99_ratio_large_vs_small"] > 0
    assert random_read["raw_pread_p99_ratio_large_vs_small"] > 0


@pytest.mark.slow
def test_codec_rows(result: dict[str, Any]) -> None:
    codec = result["codec_build"]
    assert set(codec) == {"100B", "1KiB"}
    for row in codec.values():
        _positive(row, CODEC_KEYS)


@pytest.mark.slow
def test_targets_are_booleans(result: dict[str, Any]) -> None:
    targets = result["targets"]
    for key in TARGET_KEYS:
        assert isinstance(targets[key], bool), key
