"""strand.launcher.service_logs: the warnings and errors of a cluster's service logs,
read back in file and line order, etcd's log and lines that are no JSON object left
out; what the benchmarks count and a failed chaos run shows."""

from __future__ import annotations

import json
from pathlib import Path

from strand.launcher.service_logs import LogWarning, warnings
from tests.chaos.summary import service_warnings


def _log(path: Path, *entries: dict[str, str] | str) -> None:
    path.write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n"
                            for e in entries))


def test_warnings_and_errors_in_file_and_line_order(tmp_path: Path) -> None:
    _log(tmp_path / "storage-1.log",
         {"ts": "t1", "level": "info", "msg": "serving"},
         {"ts": "t2", "level": "warning", "msg": "replica fetch failed", "error": "gone"},
         'not json but "level": "warning"',
         {"ts": "t4", "level": "error", "msg": "disk full"})
    _log(tmp_path / "gateway.log", {"ts": "t3", "level": "warning", "msg": "slow"})
    _log(tmp_path / "etcd.log", '{"level":"warn","msg":"etcd"} "level": "warning"')
    assert warnings(tmp_path) == [
        LogWarning("gateway", "t3", "slow", ""),
        LogWarning("storage-1", "t2", "replica fetch failed", "gone"),
        LogWarning("storage-1", "t4", "disk full", "")]


def test_the_chaos_summary_shows_the_last_distinct_ones(tmp_path: Path) -> None:
    _log(tmp_path / "txns-0.log",
         *({"ts": f"t{i}", "level": "warning", "msg": "could not write\nmarkers",
            "error": "NOT_ENOUGH_REPLICAS"} for i in range(3)),
         {"ts": "t9", "level": "error", "msg": "stuck"})
    assert service_warnings(tmp_path, limit=5) == [
        "t2 txns-0: could not write markers x3 (NOT_ENOUGH_REPLICAS)", "t9 txns-0: stuck x1"]
    assert service_warnings(tmp_path, limit=1) == ["t9 txns-0: stuck x1"]
