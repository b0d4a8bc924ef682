"""What the benchmarks that start a cluster share: their entry point, the warnings
its services logged, the machine's facts, the run folder's removal (the logs kept
when the run failed) and the writing of their JSON document. Imported as a
top-level module (``bench/`` is the scripts' folder)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console

from strand.launcher import Cluster, interrupt_on_signals, service_logs

err = Console(stderr=True)  # progress; the JSON document goes to stdout (or a file)


def run_main(main: Callable[[], int]) -> NoReturn:
    """A benchmark script's entry point: SIGINT, SIGTERM and SIGHUP interrupt ``main``
    (strand.launcher.interrupt_on_signals: its ``finally`` blocks stop the cluster),
    then exit with its status — 130 after an interrupt, as a shell reports one."""
    interrupt_on_signals()
    try:
        sys.exit(main())
    except KeyboardInterrupt as interrupt:
        err.print(f"interrupted ({interrupt}): every process started was stopped")
        sys.exit(130)


def service_warnings(cluster: Cluster) -> dict[str, int]:
    """Warning/error lines each service logged so far (lease losses, leader moves:
    signs that the machine was too busy for the numbers to mean much)."""
    counts = {log.stem: 0 for log in sorted(cluster.spec.log_dir.glob("*.log"))
              if log.stem != cluster.etcd.id}
    for warning in service_logs.warnings(cluster.spec.log_dir, skip=(cluster.etcd.id,)):
        counts[warning.service] = counts.get(warning.service, 0) + 1
    return counts


def write_document(document: dict[str, Any], output: Path | None, to_stdout: bool) -> None:
    """A benchmark's JSON document: to ``output`` (its folder made), with its
    ``summary`` shown on stderr; to stdout as well with ``to_stdout``, or when there is
    no ``output``."""
    text = json.dumps(document, indent=2)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text + "\n")
        err.print(json.dumps(document.get("summary"), indent=1))
        err.print(f"JSON written to {output}")
    if to_stdout or output is None:
        print(text)


def machine(load_before: tuple[float, float, float]) -> dict[str, Any]:
    """The machine's facts, with its load averages before the run and now."""
    return {"cpu_count": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()]}


def remove_run_dir(directory: Path, keep: bool, failed: bool) -> None:
    """Remove the cluster's folder, unless ``keep``; after a failure keep its logs."""
    if keep:
        return
    if failed:  # keep the logs, drop the data
        for path in directory.iterdir():
            if path.name != "logs" and not path.name.endswith(".log"):
                shutil.rmtree(path, ignore_errors=True)
        err.print(f"[yellow]logs kept in {directory}")
    else:
        shutil.rmtree(directory, ignore_errors=True)


def add_run_arguments(parser: Any, output: bool = True) -> None:
    """The options every cluster-starting benchmark takes: the services' lease TTL,
    where the clusters live and whether to keep them, and where the JSON goes."""
    parser.add_argument("--lease-ttl", type=int, default=5,
                        help="the services' etcd lease TTL, s (their default: 5)")
    if output:
        parser.add_argument("--output", type=Path,
                            help="write the JSON document to this file")
    parser.add_argument("--dir", type=Path,
                        help="where the clusters live (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the clusters' folder")
