"""Path (b), the mirror: ``spark-on-k8s/jobs/mirror.py`` run as a subprocess, exactly
as production runs it in local mode (its own JVM and Python workers, its own
checkpoint), copying the source topic from A to B under a fresh source-cluster name
(so a fresh target topic, sink ledger and offset map every run).

What is timed: from the first copied record, i.e. the earliest ``strand.mirror.time``
header on B (a copy task stamps it when it starts, before its transactional producer
is set up), to the moment this process first sees the whole topic visible to
read_committed readers on B. It polls B every ``poll_interval_s``: the target's
read_committed end offsets (the last stable offsets) and, whenever they moved, the
mirror's offset map (strand.mirror.translate.read_offset_map, written in the same
transactions as the copies), done when it covers every source partition to its end.
The end is the wall time of the poll that saw it, so the time may be up to one poll
interval (plus the poll itself) too long. Start-up (process launch to the first
copied record: the interpreter, the JVM, the session, the query's start and its
first plan) is reported separately, as is the driver's log of committed batches."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench_support import err

from strand import Consumer, TopicPartition
from strand.errors import StrandError
from strand.mirror.translate import read_offset_map

from .data import TopicContents

REPO_ROOT = Path(__file__).resolve().parents[2]
MIRROR_JOB = REPO_ROOT / "spark-on-k8s" / "jobs" / "mirror.py"
STOP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class MirrorSpec:
    source_bootstrap: str
    target_bootstrap: str
    topic: str
    partitions: int
    source_cluster: str  # fresh per run: the target topic is <source_cluster>.<topic>
    target_cluster: str
    work_dir: Path  # the checkpoint goes here
    log_dir: Path  # and the job's log here
    trigger_seconds: int
    max_offsets_per_trigger: int | None
    master: str
    poll_interval_s: float
    timeout_s: float

    @property
    def target_topic(self) -> str:
        return f"{self.source_cluster}.{self.topic}"

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"mirror-{self.source_cluster}.log"

    def command(self) -> list[str]:
        command = [sys.executable, str(MIRROR_JOB),
                   "--source-bootstrap", self.source_bootstrap,
                   "--source-cluster", self.source_cluster,
                   "--target-bootstrap", self.target_bootstrap,
                   "--target-cluster", self.target_cluster,
                   "--topics", self.topic,
                   "--checkpoint", str(self.work_dir / f"checkpoint-{self.source_cluster}"),
                   "--trigger-seconds", str(self.trigger_seconds),
                   "--master", self.master]
        if self.max_offsets_per_trigger is not None:
            command += ["--max-offsets-per-trigger", str(self.max_offsets_per_trigger)]
        return command


def spark_env() -> dict[str, str]:
    """The job's environment: this venv's python for Spark's workers, loopback only."""
    return {**os.environ, "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}


@dataclass
class MirrorOutcome:
    launched: float  # wall clock, s
    visible: float  # wall clock, s: the poll that saw every record visible on B
    exit_code: int
    polls: int


def _covered(spec: MirrorSpec, source_ends: dict[int, int]) -> bool:
    entries = read_offset_map(spec.target_bootstrap, spec.source_cluster)
    return all(max((e.source_end for e in entries.get((spec.topic, p), [])), default=0) >= end
               for p, end in source_ends.items())


def _log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _wait_until_copied(spec: MirrorSpec, process: subprocess.Popen[bytes],
                       source_ends: dict[int, int]) -> tuple[float, int]:
    tps = [TopicPartition(spec.target_topic, p) for p in range(spec.partitions)]
    deadline = time.monotonic() + spec.timeout_s
    seen: dict[TopicPartition, int] | None = None
    polls = 0
    with Consumer(spec.target_bootstrap, isolation_level="read_committed") as consumer:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the mirror exited with {process.returncode} before "
                                   f"copying everything; its log ends:\n"
                                   f"{_log_tail(spec.log_path)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the mirror did not copy {spec.topic} within "
                                   f"{spec.timeout_s} s; see {spec.log_path}")
            polls += 1
            try:
                ends = consumer.end_offsets(tps)
            except StrandError:  # the target topic does not exist yet
                ends = None
            now = time.time()
            if ends is not None and ends != seen and sum(ends.values()) > 0:
                seen = ends
                if _covered(spec, source_ends):
                    return now, polls
            time.sleep(spec.poll_interval_s)


def _stop(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise RuntimeError(f"the mirror did not stop within {STOP_TIMEOUT_S} s of SIGTERM: "
                           "killed") from None


def run_mirror_job(spec: MirrorSpec, source_ends: dict[int, int]) -> MirrorOutcome:
    """Start the job, wait until B holds every source record, stop it (SIGTERM)."""
    spec.work_dir.mkdir(parents=True, exist_ok=True)
    spec.log_dir.mkdir(parents=True, exist_ok=True)
    with spec.log_path.open("wb") as log:
        launched = time.time()
        process = subprocess.Popen(spec.command(), env=spark_env(), stdout=log,
                                   stderr=subprocess.STDOUT)
        try:
            visible, polls = _wait_until_copied(spec, process, source_ends)
        finally:
            code = _stop(process) if process.poll() is None else process.returncode
    if code != 0:
        raise RuntimeError(f"the mirror exited with {code} after SIGTERM; its log ends:\n"
                           f"{_log_tail(spec.log_path)}")
    return MirrorOutcome(launched, visible, code, polls)


def _epoch(stamp: Any) -> float | None:
    """A log line's ``ts`` (ISO 8601, UTC) as seconds since the epoch."""
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def committed_batches(log_path: Path) -> list[dict[str, Any]]:
    """The driver's "mirror batch committed" log lines: batch id, records, time."""
    batches: list[dict[str, Any]] = []
    for line in log_path.read_text(errors="replace").splitlines():
        # Spark's progress bar may precede a log line on the same line of the file.
        if "mirror batch committed" not in line or "{" not in line:
            continue
        try:
            entry = json.loads(line[line.index("{"):])
        except ValueError:
            continue
        batches.append({"batch": entry.get("batch"), "records": entry.get("records"),
                        "logged_at": _epoch(entry.get("ts"))})
    return batches


def mirror_result(spec: MirrorSpec, outcome: MirrorOutcome, copy: TopicContents,
                  records: int, data_bytes: int) -> dict[str, Any]:
    if copy.first_mirror_time_ms is None:
        raise RuntimeError(f"no copy on B carries the {spec.target_topic} provenance time")
    first = copy.first_mirror_time_ms / 1000
    seconds = outcome.visible - first
    batches = committed_batches(spec.log_path)
    # Where the copy's time goes, in s from the first copied record: when each target
    # partition's first copy task started (local[2] runs two tasks at a time), when
    # the driver logged each batch committed, when the poll saw it all.
    phases = {
        "task_started_at_s": {str(p): round(ms / 1000 - first, 3)
                              for p, ms in sorted(copy.mirror_started_ms.items())},
        "batch_committed_at_s": [round(b["logged_at"] - first, 3) for b in batches
                                 if b["logged_at"] is not None],
        "visible_at_s": round(seconds, 3)}
    err.print(f"mirror: {len(batches)} batch(es) committed, start-up "
              f"{first - outcome.launched:.1f} s, copy {seconds:.2f} s")
    return {"seconds": round(seconds, 3), "records": records,
            "records_per_s": round(records / seconds, 1),
            "mb_per_s": round(data_bytes / seconds / 1e6, 3),
            "startup_s": round(first - outcome.launched, 3),
            "launch_to_visible_s": round(outcome.visible - outcome.launched, 3),
            "polls": outcome.polls, "batches": batches, "phases": phases,
            "target_topic": spec.target_topic}
