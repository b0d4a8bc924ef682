"""Drive a fresh Strand dev cluster through the ``strand`` CLI, exactly as a user would:
``strand dev up --dir DIR``, ``strand topic create``, ``strand bench produce --json``,
``strand bench consume --json``, ``strand dev down --dir DIR``; and the Kafka listener's
address ``strand dev up`` wrote in ``cluster.json``.

Every command runs with ``STRAND_DEV_DIR=DIR`` and without ``STRAND_BOOTSTRAP``, so
the CLI can only find the cluster this run started (not one a developer left running
in ``~/.strand/dev``). ``strand dev up`` starts its services detached (their own
sessions, so they outlive the CLI); if it is interrupted before it has written
``cluster.json``, ``strand dev down`` cannot find them. So ``down`` afterwards also
sweeps ``/proc`` for processes that belong to this cluster only — whose command
line names DIR (etcd, storage nodes) or this cluster's etcd endpoint (controllers,
gateway) — and stops them by pid. The CLI runs in its own session (a Ctrl-C in the
terminal reaches only this benchmark, which then stops what it started, in order).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from strand.launcher import alive, command_line, deferred_signals


class StrandError(RuntimeError):
    pass


def strand_binary() -> str:
    """The ``strand`` next to the running interpreter (the project's venv)."""
    beside = Path(sys.executable).parent / "strand"
    if beside.exists():
        return str(beside)
    repo_venv = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "strand"
    if repo_venv.exists():
        return str(repo_venv)
    raise StrandError("no `strand` command beside this Python or in .venv: run `make setup`")


def _boot_seconds() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def _started(pid: int) -> float | None:
    """When the process started, in seconds since boot (``/proc/PID/stat`` field 22)."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return None


class StrandDevCluster:
    """``with StrandDevCluster(directory) as cluster:`` — up, then always down."""

    def __init__(self, directory: Path, strand: str | None = None) -> None:
        self.directory = directory
        self.strand = strand or strand_binary()
        self.env = {k: v for k, v in os.environ.items() if k != "STRAND_BOOTSTRAP"}
        self.env["STRAND_DEV_DIR"] = str(directory)
        self.etcd: str | None = None
        self.up_at = _boot_seconds()  # reset by up()

    def _run(self, *args: str, timeout: float) -> str:
        command = [self.strand, *args]
        try:
            done = subprocess.run(command, env=self.env, capture_output=True, text=True,
                                  timeout=timeout, check=False, stdin=subprocess.DEVNULL,
                                  start_new_session=True)
        except subprocess.TimeoutExpired as exc:
            raise StrandError(f"`strand {' '.join(args)}` did not finish in {timeout:.0f}s") \
                from exc
        if done.returncode != 0:
            raise StrandError(f"`strand {' '.join(args)}` failed (exit {done.returncode}):\n"
                              f"{done.stderr.strip()[-3000:]}")
        return done.stdout

    def _remember_etcd(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            data = json.loads((self.directory / "cluster.json").read_text())
            self.etcd = str(data.get("etcd") or "") or self.etcd

    def up(self) -> None:
        self.up_at = _boot_seconds() - 1  # /proc start times are in clock ticks
        try:
            self._run("dev", "up", "--dir", str(self.directory), timeout=180)
        finally:
            self._remember_etcd()

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     min_insync_replicas: int) -> dict[str, Any]:
        self._run("topic", "create", name, "--partitions", str(partitions),
                  "--replication-factor", str(replication_factor),
                  "--config", f"min.insync.replicas={min_insync_replicas}", timeout=60)
        return self.describe_topic(name)

    def describe_topic(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self._run("topic", "describe", name, "--json",
                                                    timeout=60))
        return data

    def bench_produce(self, topic: str, records: int, record_size: int,
                      acks: str = "all") -> dict[str, Any]:
        return self._bench("produce", topic, records, "--record-size", str(record_size),
                           "--acks", acks)

    def bench_consume(self, topic: str, records: int) -> dict[str, Any]:
        """``strand bench consume --json``: the SDK Consumer reads every partition from
        the beginning until ``records`` records have arrived."""
        return self._bench("consume", topic, records)

    def _bench(self, command: str, topic: str, records: int, *options: str
               ) -> dict[str, Any]:
        """``strand bench <command> --json``: its last JSON line (progress comes first)."""
        out = self._run("bench", command, topic, "--records", str(records), *options,
                        "--json", timeout=300 + records / 500)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if not lines:
            raise StrandError(f"`strand bench {command}` printed no JSON object:\n"
                              f"{out[-2000:]}")
        result: dict[str, Any] = json.loads(lines[-1])
        return result

    def kafka_bootstrap(self) -> str:
        """The gateway's Kafka listener, as ``strand dev up`` wrote it in cluster.json."""
        try:
            data = json.loads((self.directory / "cluster.json").read_text())
        except (OSError, ValueError) as exc:
            raise StrandError(f"no readable cluster.json in {self.directory}: {exc}") from exc
        kafka = str(data.get("kafka") or "")
        if not kafka:
            raise StrandError(f"{self.directory / 'cluster.json'} names no Kafka listener "
                              "(a dev cluster with TLS has none)")
        return kafka

    def stored_bytes(self, topic: str) -> dict[str, int]:
        """Bytes of the topic's log segments on each storage node's disk."""
        result: dict[str, int] = {}
        for node_dir in sorted(self.directory.glob("storage-*")):
            total = 0
            for segment in node_dir.glob(f"{topic}-*/*.log"):
                with contextlib.suppress(OSError):
                    total += segment.stat().st_size
            result[node_dir.name] = total
        return result

    def _leftovers(self, down_at: float) -> list[int]:
        """Pids of processes started for this cluster that are still running: those
        naming this cluster's folder, and those pointed at its etcd endpoint that
        started while that etcd held the port (between ``up`` and ``down``), so that
        a later cluster reusing the port is never touched."""
        marker = str(self.directory)
        rows: list[tuple[int, list[str]]] = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                args = command_line(int(entry.name))
                if args:
                    rows.append((int(entry.name), args))
        endpoints = {self.etcd} if self.etcd else set()
        for _, args in rows:  # etcd's own client URL, should cluster.json be missing
            if any(marker in a for a in args) and "--listen-client-urls" in args:
                url = args[args.index("--listen-client-urls") + 1]
                endpoints.add(url.removeprefix("http://"))
        found: list[int] = []
        for pid, args in rows:
            ours_by_dir = any(marker == a or a.startswith(marker + "/") for a in args)
            started = _started(pid)
            ours_by_etcd = (
                "--etcd" in args and started is not None
                and self.up_at <= started <= down_at
                and any(args[i + 1] in endpoints for i, a in enumerate(args[:-1])
                        if a == "--etcd"))
            if (ours_by_dir or ours_by_etcd) and alive(pid):
                found.append(pid)
        return found

    def down(self) -> list[int]:
        """Stop the cluster; returns the pids that had to be stopped by the sweep."""
        with deferred_signals():
            down_at = _boot_seconds()
            self._remember_etcd()
            with contextlib.suppress(StrandError):
                self._run("dev", "down", "--dir", str(self.directory), timeout=120)
            leftovers = self._leftovers(down_at)
            for pid in leftovers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and any(alive(pid) for pid in leftovers):
                time.sleep(0.1)
            for pid in leftovers:
                if alive(pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            return leftovers

    def __enter__(self) -> StrandDevCluster:
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.down()
