"""``python -m strand_operator``: flags, their environment fallbacks and errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from strand_operator.cli import parse_args
from strand_operator.config import OperatorConfig


def test_flags() -> None:
    config = parse_args(["--bootstrap", "gw:9090", "--namespace", "a", "--namespace", "b",
                         "--cluster", "prod", "--health-port", "8080",
                         "--resync-interval", "5"])
    assert config == OperatorConfig("gw:9090", ("a", "b"), "prod", 8080, 5.0)


def test_environment_fallbacks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRAND_BOOTSTRAP", "gw:9090")
    monkeypatch.setenv("STRAND_OPERATOR_NAMESPACES", "team-a, team-b,")
    monkeypatch.setenv("STRAND_CLUSTER", "prod")
    monkeypatch.setenv("STRAND_OPERATOR_HEALTH_PORT", "8081")
    assert parse_args([]) == OperatorConfig("gw:9090", ("team-a", "team-b"), "prod", 8081)
    assert parse_args(["--namespace", "x"]).namespaces == ("x",)  # a flag beats the env


@pytest.mark.parametrize(("argv", "words"), [
    ([], "missing --bootstrap, --namespace, --cluster"),
    (["--bootstrap", "g:1", "--namespace", "a", "--cluster", "c", "--health-port", "0"],
     "health port must be in 1..65535"),
    (["--bootstrap", "g:1", "--namespace", "a", "--cluster", "c", "--resync-interval", "0"],
     "resync interval must be positive"),
])
def test_bad_arguments_exit_2_saying_what_is_wrong(
        argv: list[str], words: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("STRAND_BOOTSTRAP", "STRAND_OPERATOR_NAMESPACES", "STRAND_CLUSTER",
                 "STRAND_OPERATOR_HEALTH_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2 and words in capsys.readouterr().err


def test_the_module_runs_as_a_program() -> None:
    done = subprocess.run([sys.executable, "-m", "strand_operator", "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and "--resync-interval" in done.stdout
