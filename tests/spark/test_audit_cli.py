"""The audit job's command line and the pure parts around it: bad arguments exit 2
with a message naming the argument (before Spark starts), good ones become settings;
the loading's topic choice and read options; the options' checks; SIGTERM stops the
continuous mode."""

from __future__ import annotations

import configparser
import os
import pkgutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import strand_spark.audit
from strand_spark.audit.analysis import AuditOptions
from strand_spark.audit.arguments import AuditSettings, parse_arguments
from strand_spark.audit.loading import (
    AuditSetupError,
    read_options,
    source_topics,
    target_topics,
)
from strand_spark.audit.model import FindingKind, OffsetRange
from strand_spark.job_runtime import stop_on_signals
from strand_spark.options import read_options as check_read_options

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "spark-on-k8s" / "jobs" / "audit.py"


def required(report_dir: Path) -> list[str]:
    return ["--source-bootstrap", "10.0.0.1:7070", "--source-cluster", "us-east",
            "--target-bootstrap", "[::1]:7071", "--target-cluster", "eu-west",
            "--report-dir", str(report_dir)]


def test_the_job_refuses_a_bad_argument_with_exit_2_before_spark_starts(
        tmp_path: Path) -> None:
    """The real entry point, as spark-submit or python runs it."""
    result = subprocess.run(
        [sys.executable, str(JOB), *required(tmp_path), "--topics", "orders",
         "--bucket-minutes", "0"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert "argument --bucket-minutes: '0' is not a positive whole number" in result.stderr
    assert "usage: audit.py" in result.stderr
    assert "SparkContext" not in result.stderr


def test_the_job_without_arguments_names_what_is_required() -> None:
    result = subprocess.run([sys.executable, str(JOB)], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 2
    assert "the following arguments are required: --source-bootstrap" in result.stderr


@pytest.mark.parametrize(("extra", "message"), [
    ([], "one of the arguments --topics --topics-pattern is required"),
    (["--topics", "a", "--topics-pattern", "a.*"], "not allowed with argument"),
    (["--topics", "a,,b"], "without empty names"),
    (["--topics", "a,a"], "names a topic twice"),
    (["--topics-pattern", "orders["], "is not a regular expression"),
    (["--topics", "a", "--naming", "no_such_module:Policy"], "cannot be loaded"),
    (["--topics", "a", "--naming", "suffix"], "use 'prefix', 'identity'"),
    (["--topics", "a", "--bucket-minutes", "ten"], "not a positive whole number"),
    (["--topics", "a", "--continuous", "--interval-seconds", "-5"],
     "not a positive number of seconds"),
    (["--topics", "a", "--interval-seconds", "inf"], "not a positive number of seconds"),
])
def test_bad_arguments_exit_2_with_a_message(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str],
        message: str) -> None:
    with pytest.raises(SystemExit) as stopped:
        parse_arguments([*required(tmp_path), *extra])
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(("replace", "value", "message"), [
    ("--source-bootstrap", "localhost", "is not HOST:PORT"),
    ("--target-bootstrap", "host:70000", "is not HOST:PORT"),
    ("--source-cluster", "us east", "without commas or whitespace"),
    ("--target-cluster", "us-east", "--source-cluster and --target-cluster must differ"),
])
def test_bad_cluster_arguments_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      replace: str, value: str, message: str) -> None:
    argv = [*required(tmp_path), "--topics", "a"]
    argv[argv.index(replace) + 1] = value
    with pytest.raises(SystemExit) as stopped:
        parse_arguments(argv)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_a_report_dir_that_cannot_be_created_exits_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(SystemExit) as stopped:
        parse_arguments([*required(blocker / "reports"), "--topics", "a"])
    assert stopped.value.code == 2
    assert "argument --report-dir: cannot create" in capsys.readouterr().err


def test_good_arguments_become_settings(tmp_path: Path) -> None:
    reports = tmp_path / "new" / "reports"
    settings = parse_arguments([*required(reports), "--topics=orders,payments",
                                "--naming", "identity", "--bucket-minutes=5",
                                "--continuous", "--interval-seconds", "60",
                                "--master", "local[1]"])
    assert settings == AuditSettings(
        source_bootstrap="10.0.0.1:7070", source_cluster="us-east",
        target_bootstrap="[::1]:7071", target_cluster="eu-west",
        topics=("orders", "payments"), topics_pattern=None, naming="identity",
        bucket_minutes=5, report_dir=reports, continuous=True, interval_seconds=60.0,
        master="local[1]")
    assert reports.is_dir() and settings.bucket_ms == 300_000
    defaults = parse_arguments([*required(reports), "--topics-pattern", "orders-.*"])
    assert (defaults.naming, defaults.bucket_minutes, defaults.continuous,
            defaults.interval_seconds, defaults.master) == ("prefix", 10, False, 300.0, None)


def settings_for(topics: tuple[str, ...] = (), pattern: str | None = None,
                 naming: str = "prefix") -> AuditSettings:
    return AuditSettings("h:1", "us-east", "h:2", "eu-west", topics, pattern, naming, 10,
                         Path("."))


def test_the_audited_topics_and_their_copies() -> None:
    existing = ["orders", "orders-eu", "payments", "xorders"]
    assert source_topics(settings_for(pattern="orders.*"), existing) == (
        "orders", "orders-eu")
    assert source_topics(settings_for(("payments",)), existing) == ("payments",)
    with pytest.raises(AuditSetupError, match="topics refunds do not exist on the source "
                       "cluster us-east"):
        source_topics(settings_for(("payments", "refunds")), existing)
    on_target = ["us-east.orders", "payments"]
    assert target_topics(settings_for(), ["orders", "payments"], on_target) == (
        "us-east.orders",)
    assert target_topics(settings_for(naming="identity"), ["orders", "payments"],
                         on_target) == ("payments",)


def test_the_read_options_are_ones_the_strand_source_accepts() -> None:
    options = read_options("127.0.0.1:7070", ["orders", "payments"])
    checked = check_read_options(options, streaming=False)
    assert checked.include_headers and checked.isolation_level == "read_committed"
    assert checked.subscription.topics == ("orders", "payments")
    assert not checked.fail_on_data_loss


def test_audit_options_refuse_bad_values() -> None:
    with pytest.raises(ValueError, match="source and target clusters must differ"):
        AuditOptions("a", "a")
    with pytest.raises(ValueError, match="bucket width must be positive"):
        AuditOptions("a", "b", bucket_ms=0)
    with pytest.raises(ValueError, match="grace_ms must not be negative"):
        AuditOptions("a", "b", grace_ms=-1)
    with pytest.raises(ValueError, match="cluster name"):
        AuditOptions("a,b", "c")
    options = AuditOptions("a", "b", bucket_ms=60_000)
    assert (options.grace, options.late_after) == (60_000, 60_000)
    assert AuditOptions("a", "b", grace_ms=0, late_after_ms=5).late_after == 5


def test_loss_and_duplication_fail_the_audit_warnings_do_not() -> None:
    failing = {k for k in FindingKind if k.is_failure}
    assert failing == {FindingKind.MISSING, FindingKind.DUPLICATE, FindingKind.ALTERED}
    assert [str(OffsetRange(4, 4)), str(OffsetRange(4, 9))] == ["4", "4-9"]


def test_sigterm_stops_the_continuous_mode_and_the_handlers_come_back() -> None:
    stop = threading.Event()
    before = signal.getsignal(signal.SIGTERM)
    with stop_on_signals(stop, "audit"):
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(5)
    assert signal.getsignal(signal.SIGTERM) == before


def test_every_pure_audit_module_is_under_the_purity_contract() -> None:
    """A module added to the audit is pure (no cluster client) unless it is its I/O."""
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    listed = {line.strip() for line in
              config["importlinter:contract:audit-core-pure"]["source_modules"].splitlines()
              if line.strip() and not line.strip().startswith(";")}
    io = {"loading", "runner"}
    pure = {f"strand_spark.audit.{m.name}"
            for m in pkgutil.iter_modules(strand_spark.audit.__path__) if m.name not in io}
    assert pure == listed, "name new pure audit modules in .importlinter"
