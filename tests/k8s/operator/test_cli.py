"""``python -m strand_operator``: flags, their environment fallbacks and errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
    (["--bootstrap", "g:1", "--namespace", "a", "--cluster", "c", "--user", "admin"],
     "user 'admin' needs a password (--password-file)"),
    (["--bootstrap", "g:1", "--namespace", "a", "--cluster", "c", "--user", "admin",
      "--password-file", "/nonexistent/password"], "cannot read --password-file"),
])
def test_bad_arguments_exit_2_saying_what_is_wrong(
        argv: list[str], words: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("STRAND_BOOTSTRAP", "STRAND_OPERATOR_NAMESPACES", "STRAND_CLUSTER",
                 "STRAND_OPERATOR_HEALTH_PORT", "STRAND_USER", "STRAND_PASSWORD_FILE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2 and words in capsys.readouterr().err


def test_the_module_runs_as_a_program() -> None:
    done = subprocess.run([sys.executable, "-m", "strand_operator", "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and "--resync-interval" in done.stdout


def test_a_super_user_and_its_password_file(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """SCRAM to the gateway (flags or STRAND_USER / STRAND_PASSWORD_FILE): the first
    line of the file, never shown in the config's repr."""
    secret = tmp_path / "password"
    secret.write_text("admin-secret\nignored\n")
    base = ["--bootstrap", "g:1", "--namespace", "a", "--cluster", "c"]
    config = parse_args([*base, "--user", "admin", "--password-file", str(secret)])
    assert (config.user, config.password) == ("admin", "admin-secret")
    assert config.security == {"security_protocol": "SASL_PLAINTEXT",
                               "sasl_mechanism": "SCRAM-SHA-512",
                               "sasl_plain_username": "admin",
                               "sasl_plain_password": "admin-secret"}
    assert "admin-secret" not in repr(config)
    monkeypatch.setenv("STRAND_USER", "ops")
    monkeypatch.setenv("STRAND_PASSWORD_FILE", str(secret))
    assert parse_args(base).security["sasl_plain_username"] == "ops"
    monkeypatch.delenv("STRAND_USER")
    monkeypatch.delenv("STRAND_PASSWORD_FILE")
    assert parse_args([*base, "--tls-ca", "ca.pem"]).security == {
        "security_protocol": "SSL", "ssl_cafile": "ca.pem"}
