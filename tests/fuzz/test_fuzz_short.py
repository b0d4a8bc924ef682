"""The fuzz harnesses (fuzz/, docs/fuzzing.md) inside the test suite: a short libFuzzer
run of each (``make fuzz`` is the long one), every kept corpus input replayed without
a finding, the corpus as ``fuzz.make_corpus`` writes it, and the runner's reports of a
crash and of a hang, from a harness that has both on purpose."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fuzz.engine import load_harness
from fuzz.harnesses import HARNESSES
from fuzz.make_corpus import seeds
from tests.fuzz.trap_harness import CRASH, HANG

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "fuzz" / "corpus"
TRAP = "tests.fuzz.trap_harness"
# Inputs per harness in the short run: a few thousand each, well under a minute in all
# on two cores (the log harness opens a partition directory per input: fewer).
SHORT_RUNS = 3000
SHORT_RUNS_LOG = 1500


def _run(*args: str, work: Path, timeout_s: float = 300) -> tuple[int, dict[str, Any], str]:
    """``python -m fuzz.run`` with ``args``; its exit status, JSON and output."""
    out = work / "fuzz.json"
    done = subprocess.run(
        [sys.executable, "-m", "fuzz.run", "--json", str(out), "--work-dir",
         str(work / "work"), *args], cwd=REPO, capture_output=True, text=True,
        timeout=timeout_s, check=False)
    output = done.stdout + done.stderr
    assert out.exists(), output
    return done.returncode, json.loads(out.read_text()), output


@pytest.mark.parametrize("harness", sorted(HARNESSES))
def test_every_kept_input_passes_its_harness(harness: str,
                                             caplog: pytest.LogCaptureFixture) -> None:
    """Each seed and each input kept from a finding (``found-*``) runs through its
    harness without a finding: a harness or a decoder that regresses fails here."""
    caplog.set_level(logging.CRITICAL)  # the damage the inputs hold is logged, rightly
    module = load_harness(harness, instrumented=False)
    inputs = sorted((CORPUS / harness).iterdir())
    assert inputs, f"fuzz/corpus/{harness} is empty: python -m fuzz.make_corpus"
    for path in inputs:
        module.test_one_input(path.read_bytes())


@pytest.mark.parametrize("harness", sorted(HARNESSES))
def test_the_kept_seeds_are_what_make_corpus_writes(harness: str) -> None:
    """A changed input format (a new Gateway method shifts the selector byte, a new
    flag) would leave the kept seeds meaning something else."""
    kept = {path.name: path.read_bytes() for path in (CORPUS / harness).glob("seed-*")}
    written = {f"seed-{name}": data for name, data in seeds(harness)}
    assert kept == written, "run python -m fuzz.make_corpus and review the corpus diff"


@pytest.mark.slow
def test_a_short_run_of_every_harness_finds_nothing(tmp_path: Path) -> None:
    status, report, output = _run("--runs", str(SHORT_RUNS), "--runs-for",
                                  f"log_recovery={SHORT_RUNS_LOG}", "--jobs", "2",
                                  work=tmp_path)
    assert status == 0 and report["ok"], output
    runs = {r["harness"]: r for r in report["harnesses"]}
    assert set(runs) == set(HARNESSES)
    for name, result in runs.items():
        wanted = SHORT_RUNS_LOG if name == "log_recovery" else SHORT_RUNS
        assert result["status"] == "ok" and result["executed"] == wanted, result
    assert report["total_executed"] == sum(r["executed"] for r in runs.values())


def _trap_corpus(tmp_path: Path, seed: bytes) -> Path:
    corpus = tmp_path / "corpus"
    (corpus / TRAP).mkdir(parents=True)
    (corpus / TRAP / "seed").write_bytes(seed)
    return corpus


def test_the_runner_reports_a_crash_with_its_input(tmp_path: Path) -> None:
    corpus = _trap_corpus(tmp_path, CRASH + b" and more")
    status, report, output = _run(TRAP, "--runs", "100", "--corpus", str(corpus),
                                  work=tmp_path)
    assert status == 1 and not report["ok"], output
    (result,) = report["harnesses"]
    assert result["status"] == "finding" and report["findings"] == 1
    (finding,) = result["findings"]
    assert finding["kind"] == "crash"
    assert Path(finding["input"]).read_bytes().startswith(CRASH)
    assert "KeyError" in result["detail"]


def test_the_runner_reports_a_hang(tmp_path: Path) -> None:
    corpus = _trap_corpus(tmp_path, HANG)
    status, report, output = _run(TRAP, "--runs", "100", "--timeout", "2", "--corpus",
                                  str(corpus), work=tmp_path)
    assert status == 1, output
    (result,) = report["harnesses"]
    assert [f["kind"] for f in result["findings"]] == ["timeout"], result


def test_the_runner_counts_the_inputs_of_a_clean_run(tmp_path: Path) -> None:
    corpus = _trap_corpus(tmp_path, b"harmless")
    status, report, output = _run(TRAP, "--runs", "500", "--corpus", str(corpus),
                                  work=tmp_path)
    assert status == 0, output
    (result,) = report["harnesses"]
    assert result["status"] == "ok" and result["executed"] == 500
    assert report["total_executed"] == 500 and report["findings"] == 0


def test_the_runner_refuses_an_unknown_harness(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "fuzz.run", "no_such_harness"], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "FUZZ_JSON": str(tmp_path / "x.json")})
    assert done.returncode != 0 and "unknown harness" in done.stderr
