"""The benchmarks' one entry point (bench/bench_support.py ``run_main``): the script
exits with its main's status, and a SIGTERM (or SIGINT, SIGHUP) interrupts it so its
``finally`` blocks run, then it exits 130 saying every process was stopped. Run as a
script in a child process, as the benchmarks are."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import os, signal, sys
    from bench_support import run_main

    # As started from a terminal: the suite itself may run under nohup, whose ignored
    # SIGHUP the child would inherit (and run_main rightly leaves ignored).
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)

    def main() -> int:
        if sys.argv[1] == "status":
            return 3
        try:
            os.kill(os.getpid(), getattr(signal, sys.argv[1]))
            signal.pause()  # the interrupt arrives here
        finally:
            print("cleaned up", flush=True)
        return 0

    run_main(main)
""")


def _run(argument: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "bench"), str(REPO_ROOT)])}
    return subprocess.run([sys.executable, "-c", SCRIPT, argument], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def test_the_script_exits_with_its_mains_status() -> None:
    done = _run("status")
    assert done.returncode == 3, done.stderr


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_interrupts_the_run_which_cleans_up_and_exits_130(signal_name: str) -> None:
    done = _run(signal_name)
    assert done.returncode == 130, (done.stdout, done.stderr)
    assert "cleaned up" in done.stdout
    assert f"interrupted ({signal_name})" in done.stderr
    assert "every process started was stopped" in done.stderr
