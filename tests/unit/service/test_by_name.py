"""``strand-service NAME ARGS`` behaves as ``python -m <NAME's module> ARGS``: the same
help (so the same parser), the same exit code on a bad flag; an unknown NAME exits 2
listing the names. (Signals: tests/integration/test_storage_pod_identity.py stops
storage nodes started through it with SIGTERM.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from strand.launcher import REPO
from strand.service.by_name import MODULES

STRAND_SERVICE = str(Path(sys.executable).parent / "strand-service")
# An option each service has and the others do not: proof its own parser answered.
OWN_OPTION = {
    "controller": "--preferred-leader-interval",
    "gateway": "--max-partition-entries",
    "storage": "--node-id-from-hostname",
    "groups": "--initial-rebalance-delay-ms",
    "transactions": "--abort-interval-ms",
    "operator": "--resync-interval",
    "rack-from-node": "--api-server",
}


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=REPO,
                          check=False)


def test_every_name_has_its_own_option_listed_here() -> None:
    assert set(OWN_OPTION) == set(MODULES)


@pytest.mark.parametrize("name", list(MODULES))
def test_each_name_runs_its_module_as_python_m_does(name: str) -> None:
    by_name = run(STRAND_SERVICE, name, "--help")
    by_module = run(sys.executable, "-m", MODULES[name], "--help")

    assert by_name.returncode == 0, by_name.stderr
    assert OWN_OPTION[name] in by_name.stdout
    assert by_name.stdout == by_module.stdout


@pytest.mark.parametrize("name", ["storage", "rack-from-node"])
def test_a_bad_flag_exits_as_python_m_does(name: str) -> None:
    by_name = run(STRAND_SERVICE, name, "--no-such-flag")
    by_module = run(sys.executable, "-m", MODULES[name], "--no-such-flag")

    assert by_name.returncode == by_module.returncode == 2
    assert by_name.stderr == by_module.stderr
    assert by_name.stderr.startswith("usage: ")
    assert ": error: " in by_name.stderr


@pytest.mark.parametrize("argv", [["kafka"], []], ids=["unknown", "none"])
def test_an_unknown_or_missing_name_exits_2_listing_the_names(argv: list[str]) -> None:
    result = run(STRAND_SERVICE, *argv)

    assert result.returncode == 2
    assert ("unknown service 'kafka'" if argv else "no service named") in result.stderr
    assert f"NAME is one of: {', '.join(MODULES)}" in result.stderr


def test_its_own_help_lists_the_names() -> None:
    result = run(STRAND_SERVICE, "--help")
    assert result.returncode == 0
    assert all(name in result.stdout for name in MODULES)
