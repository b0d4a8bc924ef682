"""The audit job around the core: the runner with its loading replaced (the path the
job takes, clusters aside), the continuous mode, the entry point's exit codes."""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path
from types import ModuleType

import pytest
from pyspark.sql import SparkSession

from strand_spark.audit.arguments import AuditSettings
from strand_spark.audit.loading import AuditInput, AuditSetupError, Loader
from strand_spark.audit.model import FindingKind
from strand_spark.audit.runner import AuditRun, run, run_once
from tests.spark.test_audit_detection import BUCKET_MS, T0, Topic, frame

# Each audit runs a few dozen small Spark jobs: seconds each, more on a busy machine.
pytestmark = pytest.mark.slow

JOB = Path(__file__).resolve().parents[2] / "spark-on-k8s" / "jobs" / "audit.py"
ORDERS = Topic("orders", partitions=2, records=20)


def settings(report_dir: Path, continuous: bool = False) -> AuditSettings:
    return AuditSettings(
        source_bootstrap="127.0.0.1:1", source_cluster="A", target_bootstrap="127.0.0.1:2",
        target_cluster="B", topics=("orders",), topics_pattern=None, naming="prefix",
        bucket_minutes=BUCKET_MS // 60_000, report_dir=report_dir, continuous=continuous,
        interval_seconds=0.01)


def loader(skip: list[tuple[int, int]], calls: list[AuditSettings] | None = None) -> Loader:
    def load(spark: SparkSession, given: AuditSettings) -> AuditInput:
        if calls is not None:
            calls.append(given)
        target = given.naming_policy.target_topic(given.source_cluster, "orders")
        return AuditInput(source=frame(spark, ORDERS.source()),
                          mirror=frame(spark, ORDERS.mirror(target, skip=skip)),
                          topics=("orders",))
    return load


def test_one_run_loads_compares_and_writes_the_report(spark: SparkSession,
                                                      tmp_path: Path) -> None:
    calls: list[AuditSettings] = []
    done = run_once(spark, settings(tmp_path), loader([(1, 13)], calls),
                    now_ms=T0 + 10 * BUCKET_MS)
    assert calls == [settings(tmp_path)]
    [gap] = done.report.findings
    assert (gap.kind, gap.partition, gap.bucket_start_ms, gap.records) == (
        FindingKind.MISSING, 1, T0 + BUCKET_MS, 1)
    assert done.report.exit_code == 1
    summary = json.loads((tmp_path / "latest.json").read_text())
    assert summary["findings"][0]["offsets"] == [[13, 13]]
    assert "| missing | orders | 1 |" in done.files.markdown.read_text()
    assert done.files.plot.stat().st_size > 10_000


def test_continuous_mode_runs_until_stopped_each_run_a_new_report(
        spark: SparkSession, tmp_path: Path) -> None:
    stop = threading.Event()
    runs: list[AuditRun] = []

    def after(completed: AuditRun) -> None:
        runs.append(completed)
        if len(runs) == 2:
            stop.set()  # as the SIGTERM handler does

    code = run(spark, settings(tmp_path, continuous=True), loader([]), stop, on_run=after)
    assert code == 0 and len(runs) == 2
    assert runs[0].files.markdown != runs[1].files.markdown
    assert all(r.files.markdown.exists() for r in runs)
    latest = json.loads((tmp_path / "latest.json").read_text())
    assert latest["started_ms"] == runs[1].report.started_ms


def test_continuous_mode_survives_a_failed_run(spark: SparkSession, tmp_path: Path) -> None:
    stop = threading.Event()
    attempts: list[int] = []
    clean = loader([])

    def flaky(session: SparkSession, given: AuditSettings) -> AuditInput:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("the source cluster is down")
        return clean(session, given)

    code = run(spark, settings(tmp_path, continuous=True), flaky, stop,
               on_run=lambda _: stop.set())
    assert code == 0 and len(attempts) == 2


def test_a_single_run_that_fails_raises(spark: SparkSession, tmp_path: Path) -> None:
    def down(session: SparkSession, given: AuditSettings) -> AuditInput:
        raise ConnectionError("the source cluster is down")

    with pytest.raises(ConnectionError):
        run(spark, settings(tmp_path), down)


def job() -> ModuleType:
    spec = importlib.util.spec_from_file_location("audit_job", JOB)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def arguments(report_dir: Path) -> list[str]:
    return ["--source-bootstrap", "127.0.0.1:1", "--source-cluster", "A",
            "--target-bootstrap=127.0.0.1:2", "--target-cluster=B", "--topics", "orders",
            "--bucket-minutes", "10", "--report-dir", str(report_dir)]


def test_the_entry_point_exits_1_on_loss_and_0_when_clean(spark: SparkSession,
                                                          tmp_path: Path) -> None:
    main = job().main
    assert main(arguments(tmp_path / "lossy"), load=loader([(0, 2)])) == 1
    assert main(arguments(tmp_path / "clean"), load=loader([])) == 0
    assert (tmp_path / "clean" / "latest.png").stat().st_size > 10_000
    # The fixture's session was active: the job used it and left it running.
    assert SparkSession.getActiveSession() is spark


def test_the_entry_point_exits_2_when_the_audit_cannot_start(
        spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def absent(session: SparkSession, given: AuditSettings) -> AuditInput:
        raise AuditSetupError("topics orders do not exist on the source cluster A")

    assert job().main(arguments(tmp_path), load=absent) == 2
    assert "audit.py: error: topics orders do not exist" in capsys.readouterr().err


def test_an_unreachable_cluster_stops_the_job_with_exit_2(
        spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The real loading (through the clusters' gateways): nothing listens on port 1."""
    assert job().main(arguments(tmp_path)) == 2
    assert ("audit.py: error: cannot reach the source cluster A at 127.0.0.1:1"
            in capsys.readouterr().err)
