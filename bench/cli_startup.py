"""How long the ``strand`` command takes to start: wall time of each command, the
median of ``--runs`` runs (default 10), JSON on stdout.

Each command is run as a new process (``python -m strand.cli.main ARGS``) that does
no network work: ``--help`` of the command and its subcommands, and ``dev status``
against an empty dev directory. With ``--base REV``, that revision's tree
(``git archive``, no worktree) is measured in the same run, the two alternating
command by command so that a slow second of a busy machine hurts both, and the
JSON gives each command's median for both and head/base.

    python bench/cli_startup.py --runs 10 --json
    python bench/cli_startup.py --base HEAD~3 --json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("--help",),
    ("topic", "list", "--help"),
    ("produce", "--help"),
    ("consume", "--help"),
    ("group", "describe", "--help"),
    ("bench", "produce", "--help"),
    ("dev", "up", "--help"),
    ("dev", "status"),
)


def checkout(rev: str, root: Path) -> Path:
    """``rev``'s files under ``root`` (git archive: nothing added to the repository)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", rev],
                             check=True, capture_output=True).stdout
    tree = root / rev.replace("/", "_")
    tree.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    return tree


def run_once(tree: Path, args: tuple[str, ...], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "strand.cli.main", *args], cwd=tree,
                          env={**env, "PYTHONPATH": str(tree)}, capture_output=True,
                          check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"strand {' '.join(args)} failed in {tree}:\n"
                           f"{done.stderr.decode(errors='replace')[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs per command (median)")
    parser.add_argument("--base", metavar="REV", help="also measure this git revision")
    parser.add_argument("--json", action="store_true", help="JSON only (no table on stderr)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cli-startup-") as work:
        root = Path(work)
        # No dev cluster and no state of the user's: dev status finds nothing, quickly.
        env = {**os.environ, "HOME": str(root / "home"), "STRAND_DEV_DIR": str(root / "dev")}
        env.pop("XDG_STATE_HOME", None)
        env.pop("STRAND_BOOTSTRAP", None)
        trees = {"head": REPO}
        if args.base:
            trees = {"base": checkout(args.base, root), "head": REPO}
        times: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
        for command in COMMANDS:
            key = " ".join(command)
            for _ in range(args.runs):
                for name, tree in trees.items():  # alternating: base, head, base, …
                    times[name].setdefault(key, []).append(run_once(tree, command, env))
    medians = {name: {key: round(statistics.median(runs), 4) for key, runs in by.items()}
               for name, by in times.items()}
    result: dict[str, object] = {"runs": args.runs, "python": sys.version.split()[0],
                                 "median_s": medians}
    if args.base:
        result["base"] = args.base
        result["head_over_base"] = {key: round(medians["head"][key] / medians["base"][key], 3)
                                    for key in medians["head"]}
    if not args.json:
        for key in medians["head"]:
            line = " ".join(f"{name} {medians[name][key]:.3f}s" for name in trees)
            print(f"{key:28} {line}", file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
