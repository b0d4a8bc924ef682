"""A throwaway 3-node NATS cluster with JetStream on 127.0.0.1.

Each node is Debian's ``nats-server`` with its own config file, JetStream file
store, client port, route port and HTTP monitoring port (all free ports picked at
start) in one temporary folder. The routes form a full mesh, which is what
JetStream clustering needs (its meta group and every R3 stream are Raft groups
over those routes). ``start`` returns once the three nodes agree on a JetStream
meta leader; ``stop`` (also on any error, through the context manager) sends
SIGTERM, then SIGKILL, and reaps every process it started. The nodes are also
started with a parent-death signal (SIGTERM, by ``setpriv``) so that they die with
this process even if it is SIGKILLed and has no chance to clean up (see
``strand.launcher.signals``).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from strand.launcher import deferred_signals, with_death_signal

CLUSTER_NAME = "strand-bench"


class NatsClusterError(RuntimeError):
    pass


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 right now (all bound at once)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class NatsNode:
    name: str
    client_port: int
    route_port: int
    monitor_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def client_url(self) -> str:
        return f"nats://127.0.0.1:{self.client_port}"

    @property
    def config_file(self) -> Path:
        return self.directory / f"{self.name}.conf"

    @property
    def log_file(self) -> Path:
        return self.directory / f"{self.name}.log"

    def config(self, routes: list[int]) -> str:
        route_urls = ", ".join(f'"nats-route://127.0.0.1:{port}"' for port in routes)
        return (f'server_name: "{self.name}"\n'
                f'listen: "127.0.0.1:{self.client_port}"\n'
                f'http: "127.0.0.1:{self.monitor_port}"\n'
                "jetstream {\n"
                f'  store_dir: "{self.directory / self.name}"\n'
                "}\n"
                "cluster {\n"
                f'  name: "{CLUSTER_NAME}"\n'
                f'  listen: "127.0.0.1:{self.route_port}"\n'
                f"  routes: [{route_urls}]\n"
                "}\n")

    def log_tail(self, chars: int = 2000) -> str:
        with contextlib.suppress(OSError):
            return self.log_file.read_text(errors="replace")[-chars:]
        return ""


class NatsCluster:
    """``with NatsCluster(directory) as cluster:`` — started, meta leader elected."""

    def __init__(self, directory: Path, nodes: int = 3, binary: str | None = None) -> None:
        found = binary or shutil.which("nats-server") or (
            "/usr/sbin/nats-server" if Path("/usr/sbin/nats-server").exists() else None)
        if found is None:
            raise NatsClusterError("nats-server is not installed: `make bench-peers` installs "
                                   "it, or `apt-get install nats-server`")
        self.binary = found
        self.directory = directory
        ports = free_ports(3 * nodes)
        self.nodes = [NatsNode(f"n{i + 1}", ports[3 * i], ports[3 * i + 1], ports[3 * i + 2],
                               directory) for i in range(nodes)]

    @property
    def client_urls(self) -> list[str]:
        return [node.client_url for node in self.nodes]

    def node(self, name: str) -> NatsNode:
        for node in self.nodes:
            if node.name == name:
                return node
        raise NatsClusterError(f"no node named {name!r}")

    def version(self) -> str:
        out = subprocess.run([self.binary, "--version"], capture_output=True, text=True,
                             check=False, timeout=10)
        return out.stdout.strip().removeprefix("nats-server: ")

    def start(self, timeout: float = 30.0) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        routes = [node.route_port for node in self.nodes]
        for node in self.nodes:
            node.config_file.write_text(node.config(routes))
            with open(node.log_file, "ab") as log:
                node.process = subprocess.Popen(
                    with_death_signal([self.binary, "-c", str(node.config_file)],
                                      signal.SIGTERM), stdout=log,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    start_new_session=True)
        self.wait_for_meta_leader(timeout)

    def jsz(self, node: NatsNode, timeout: float = 2.0) -> dict[str, Any]:
        """The node's JetStream monitoring document (``/jsz``)."""
        url = f"http://127.0.0.1:{node.monitor_port}/jsz"
        with urllib.request.urlopen(url, timeout=timeout) as response:
            data: dict[str, Any] = json.load(response)
        return data

    def _check_running(self) -> None:
        for node in self.nodes:
            if node.process is not None and node.process.poll() is not None:
                raise NatsClusterError(
                    f"nats-server {node.name} exited with status {node.process.returncode}; "
                    f"its log ({node.log_file}) ends with:\n{node.log_tail()}")

    def meta_leader(self) -> str | None:
        """The JetStream meta leader every node reports, once all agree on one."""
        leaders: set[str] = set()
        for node in self.nodes:
            try:
                meta = self.jsz(node).get("meta_cluster") or {}
            except (OSError, ValueError):
                return None
            if meta.get("cluster_size") != len(self.nodes) or not meta.get("leader"):
                return None
            leaders.add(str(meta["leader"]))
        return leaders.pop() if len(leaders) == 1 else None

    def wait_for_meta_leader(self, timeout: float) -> str:
        # Polling other processes: nothing to subscribe to before the cluster forms.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_running()
            leader = self.meta_leader()
            if leader is not None:
                return leader
            time.sleep(0.2)
        tails = "\n".join(f"--- {n.name}:\n{n.log_tail(800)}" for n in self.nodes)
        raise NatsClusterError(f"no JetStream meta leader within {timeout:.0f}s\n{tails}")

    def stored(self) -> dict[str, dict[str, int]]:
        """Messages and bytes each node holds in its JetStream store."""
        result: dict[str, dict[str, int]] = {}
        for node in self.nodes:
            data = self.jsz(node)
            result[node.name] = {"messages": int(data.get("messages", 0)),
                                 "bytes": int(data.get("bytes", 0))}
        return result

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM every node, SIGKILL those still running after ``timeout``, reap all."""
        with deferred_signals():
            running = [n.process for n in self.nodes if n.process is not None]
            for process in running:
                if process.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        process.terminate()
            deadline = time.monotonic() + timeout
            for process in running:
                try:
                    process.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                    process.wait()
            for node in self.nodes:
                node.process = None

    def __enter__(self) -> NatsCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
