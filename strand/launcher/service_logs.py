"""What the services of a launched cluster logged as warnings and errors: read back
from their structured logs (one JSON object per line, ``<id>.log`` in the cluster's
log folder; etcd's own log, in its own format, is left out). Benchmarks count them
(signs that the machine was too busy for the numbers to mean much); a failed chaos
run shows the last of them."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LogWarning", "warnings"]


@dataclass(frozen=True, slots=True)
class LogWarning:
    service: str  # the process id (its log file's name)
    time: str  # as logged (ISO 8601, UTC)
    message: str
    error: str  # the ``error`` field, if any ("" otherwise)


def warnings(log_dir: Path, skip: tuple[str, ...] = ("etcd",)) -> list[LogWarning]:
    """Every warning and error line of every service log in ``log_dir``, file by file
    in name order, each file's in its order (lines that are no JSON object skipped)."""
    found: list[LogWarning] = []
    for path in sorted(log_dir.glob("*.log")):
        if path.stem in skip:
            continue
        with contextlib.suppress(OSError):
            for raw in path.read_text(errors="replace").splitlines():
                if '"level": "warning"' not in raw and '"level": "error"' not in raw:
                    continue  # cheap filter: these logs are large
                try:
                    entry = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(entry, dict) and entry.get("level") in ("warning", "error"):
                    found.append(LogWarning(path.stem, str(entry.get("ts", "")),
                                            str(entry.get("msg", "")),
                                            str(entry.get("error", ""))))
    return found
