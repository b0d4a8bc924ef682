"""Run the fuzz harnesses under libFuzzer and write what happened as JSON.

    python -m fuzz.run [HARNESS ...] [--runs N] [--runs-for NAME=N] [--jobs N]
                       [--max-total-time S] [--timeout S] [--json PATH]

Each harness runs in its own process (``python -m fuzz.engine``: libFuzzer ends the
process when it is done), ``--jobs`` of them at a time, over its kept corpus
(``fuzz/corpus/<harness>/``, read only) plus a fresh directory for what it discovers.
A finding is a crash (an untyped error or a broken invariant), a timeout (an input
that runs longer than ``--timeout``: a hang) or an out-of-memory; libFuzzer stops
that harness at its first finding and writes the input under the work directory,
which is then kept. Exit status 1 when any harness found something or failed.

The JSON (``--json``, default $FUZZ_JSON or bench/results/fuzz.json) has, per
harness, the inputs executed (libFuzzer's ``stat::number_of_executed_units``), the
seconds, the findings with their input files, and the totals.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fuzz.harnesses import HARNESSES, SCRATCH_ENV

__all__ = ["HarnessRun", "Result", "main", "parse_stats"]

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "fuzz" / "corpus"
DICTIONARIES = REPO / "fuzz" / "dictionaries"
DEFAULT_JSON = "bench/results/fuzz.json"
# A module-path harness (the runner's own tests) gets these.
_DEFAULT_MAX_LEN = 4096
_ARTIFACT_KINDS = ("crash", "timeout", "oom", "leak")
_STAT = re.compile(r"^stat::(\w+):\s+(\d+)\s*$", re.MULTILINE)
_DETAIL_LINES = 40


@dataclass(slots=True)
class Result:
    harness: str
    runs_requested: int
    executed: int = 0
    seconds: float = 0.0
    exec_per_sec: float = 0.0
    new_units: int = 0
    peak_rss_mb: int = 0
    exit_code: int | None = None
    status: str = "pending"  # ok, finding (crash, timeout, oom) or error
    findings: list[dict[str, str]] = field(default_factory=list)
    detail: str = ""  # the end of libFuzzer's output when it was not ok
    log: str = ""


@dataclass(slots=True)
class HarnessRun:
    """One harness's process and where its files go."""

    name: str
    runs: int
    command: list[str]
    log_path: Path
    artifacts: Path
    started: float = 0.0
    process: subprocess.Popen[bytes] | None = None


def parse_stats(output: str) -> dict[str, int]:
    """libFuzzer's ``-print_final_stats=1`` lines (``stat::name: value``)."""
    return {name: int(value) for name, value in _STAT.findall(output)}


def _corpus_dirs(name: str, corpus_root: Path, work: Path) -> list[str]:
    """The fresh directory first: libFuzzer writes what it finds into the first one."""
    fresh = work / "new-corpus" / name
    fresh.mkdir(parents=True, exist_ok=True)
    kept = corpus_root / name
    return [str(fresh)] + ([str(kept)] if kept.is_dir() else [])


def _command(name: str, runs: int, args: argparse.Namespace, work: Path,
             artifacts: Path) -> list[str]:
    spec = HARNESSES.get(name)
    command = [sys.executable, "-m", "fuzz.engine", name, f"-runs={runs}",
               "-print_final_stats=1",
               f"-max_len={spec.max_len if spec else _DEFAULT_MAX_LEN}",
               f"-timeout={args.timeout}", f"-rss_limit_mb={args.rss_limit_mb}",
               f"-artifact_prefix={artifacts}/"]
    if args.max_total_time:
        command.append(f"-max_total_time={args.max_total_time}")
    if args.seed is not None:
        command.append(f"-seed={args.seed}")
    dictionary = DICTIONARIES / f"{name}.dict"
    if dictionary.is_file():
        command.append(f"-dict={dictionary}")
    return command + _corpus_dirs(name, Path(args.corpus), work)


def _start(run: HarnessRun, scratch: Path) -> None:
    env = {**os.environ, SCRATCH_ENV: str(scratch / run.name),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                       os.environ.get("PYTHONPATH")]))}
    run.artifacts.mkdir(parents=True, exist_ok=True)
    run.started = time.monotonic()
    with open(run.log_path, "wb") as log:
        run.process = subprocess.Popen(run.command, cwd=REPO, env=env, stdout=log,
                                       stderr=subprocess.STDOUT)


def _finish(run: HarnessRun) -> Result:
    assert run.process is not None
    result = Result(run.name, run.runs, seconds=round(time.monotonic() - run.started, 1),
                    exit_code=run.process.returncode, log=str(run.log_path))
    output = run.log_path.read_text(errors="replace")
    stats = parse_stats(output)
    result.executed = stats.get("number_of_executed_units", 0)
    result.exec_per_sec = round(result.executed / result.seconds, 1) if result.seconds else 0
    result.new_units = stats.get("new_units_added", 0)
    result.peak_rss_mb = stats.get("peak_rss_mb", 0)
    result.findings = [{"kind": path.name.split("-", 1)[0], "input": str(path)}
                       for path in sorted(run.artifacts.iterdir())
                       if path.name.split("-", 1)[0] in _ARTIFACT_KINDS]
    if result.findings:
        result.status = "finding"
    elif result.exit_code != 0 or "number_of_executed_units" not in stats:
        result.status = "error"
    else:
        result.status = "ok"
    if result.status != "ok":
        result.detail = _detail(output)
    return result


def _detail(output: str) -> str:
    """What went wrong: the Python traceback and libFuzzer's report of it, or the end
    of the output when there is none (a timeout, an import error)."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if "Uncaught Python exception" in line
                  or (line.startswith(("==", "ALARM:")) and "libFuzzer" in line)), None)
    if start is None:
        return "\n".join(lines[-_DETAIL_LINES:])
    end = next((i for i in range(start, len(lines)) if "Test unit written to" in lines[i]),
               len(lines) - 1)
    return "\n".join(lines[start:end + 1][-3 * _DETAIL_LINES:])


def run_all(names: list[str], runs: dict[str, int], args: argparse.Namespace,
            work: Path, scratch: Path) -> list[Result]:
    pending = [HarnessRun(name, runs[name], [], work / f"{name}.log",
                          work / "artifacts" / name) for name in names]
    for run in pending:
        run.command = _command(run.name, run.runs, args, work, run.artifacts)
    running: list[HarnessRun] = []
    results: dict[str, Result] = {}
    while pending or running:
        while pending and len(running) < args.jobs:
            run = pending.pop(0)
            _start(run, scratch)
            running.append(run)
            _say(args, f"started {run.name}: {run.runs} runs")
        time.sleep(0.2)
        for run in [r for r in running if r.process is not None
                    and r.process.poll() is not None]:
            running.remove(run)
            result = results[run.name] = _finish(run)
            _say(args, f"{run.name}: {result.status}, {result.executed} inputs in "
                       f"{result.seconds} s" + "".join(f"\n  {f['kind']}: {f['input']}"
                                                      for f in result.findings))
    return [results[name] for name in names]


def _say(args: argparse.Namespace, message: str) -> None:
    if not args.quiet:
        print(message, flush=True)


def _runs_per_harness(names: list[str], args: argparse.Namespace) -> dict[str, int]:
    runs = dict.fromkeys(names, args.runs)
    for item in args.runs_for:
        name, _, count = item.partition("=")
        if name not in runs or not count.isdigit():
            raise SystemExit(f"--runs-for {item!r}: expected NAME=COUNT for a harness "
                             f"being run ({', '.join(names)})")
        runs[name] = int(count)
    return runs


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fuzz.run", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("harnesses", nargs="*", metavar="HARNESS",
                        help=f"harnesses to run (default: all of {', '.join(HARNESSES)}; "
                             "a module path runs a harness module of your own)")
    parser.add_argument("--runs", type=int, default=int(os.environ.get("FUZZ_RUNS", 10_000)),
                        help="inputs per harness (libFuzzer -runs; default $FUZZ_RUNS "
                             "or 10000)")
    parser.add_argument("--runs-for", action="append", default=[], metavar="NAME=N",
                        help="inputs for one harness, overriding --runs (repeatable)")
    parser.add_argument("--max-total-time", type=int, default=0, metavar="S",
                        help="stop each harness after S seconds (0: only --runs)")
    parser.add_argument("--timeout", type=int, default=60, metavar="S",
                        help="an input running longer is a hang (default 60)")
    parser.add_argument("--rss-limit-mb", type=int, default=2048,
                        help="memory beyond this is a finding (default 2048)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="harness processes at a time (default 1)")
    parser.add_argument("--seed", type=int, default=None, help="libFuzzer's random seed")
    parser.add_argument("--corpus", default=str(CORPUS),
                        help="the kept corpus root, one directory per harness "
                             "(default fuzz/corpus; read only)")
    parser.add_argument("--work-dir", default=None,
                        help="logs, new corpus units and findings (default: a temporary "
                             "directory, removed unless something was found)")
    parser.add_argument("--json", default=os.environ.get("FUZZ_JSON") or DEFAULT_JSON,
                        help=f"where the results go (default $FUZZ_JSON or {DEFAULT_JSON})")
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    names = args.harnesses or list(HARNESSES)
    unknown = [n for n in names if n not in HARNESSES and "." not in n]
    if unknown:
        raise SystemExit(f"unknown harness {', '.join(unknown)}: one of "
                         f"{', '.join(HARNESSES)}, or a module path")
    runs = _runs_per_harness(names, args)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="strand-fuzz-"))
    work.mkdir(parents=True, exist_ok=True)
    started = datetime.datetime.now(datetime.UTC)
    clock = time.monotonic()
    # The harnesses' own files (partition directories) in memory where there is
    # /dev/shm: the log harness fsyncs several files per input.
    scratch = Path(tempfile.mkdtemp(prefix="strand-fuzz-scratch-",
                                    dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    try:
        results = run_all(names, runs, args, work, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    ok = all(r.status == "ok" for r in results)
    summary = {
        "started": started.isoformat(timespec="seconds"),
        "seconds": round(time.monotonic() - clock, 1),
        "command": ["python", "-m", "fuzz.run", *(argv if argv is not None else sys.argv[1:])],
        "jobs": args.jobs,
        "harnesses": [asdict(r) for r in results],
        "total_executed": sum(r.executed for r in results),
        "findings": sum(len(r.findings) for r in results),
        "ok": ok,
        "work_dir": str(work) if not ok or args.work_dir else None,
    }
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")
    for r in results:
        print(f"{r.harness:22} {r.status:8} {r.executed:>11,} inputs {r.seconds:>8.1f} s "
              f"{r.exec_per_sec:>9,.0f}/s")
    print(f"{'total':22} {'ok' if ok else 'FAILED':8} {summary['total_executed']:>11,} inputs "
          f"{summary['seconds']:>8.1f} s   -> {out}")
    if not ok:
        for r in results:
            if r.status != "ok":
                print(f"\n--- {r.harness}: {r.status} (log {r.log})\n{r.detail}", flush=True)
    elif not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
