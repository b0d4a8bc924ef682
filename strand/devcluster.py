"""A local development cluster of real processes: etcd, controllers, storage nodes,
a gateway and a group coordinator on 127.0.0.1, one folder for data and logs.

``up`` starts them detached (they outlive the command), waits until the gateway
serves with every storage node registered, and writes ``cluster.json`` — the file
the SDK and CLI read to find the cluster when no address is given (see
:mod:`strand.client.bootstrap`). ``down`` stops them (SIGTERM, then SIGKILL) and
keeps the data, so the next ``up`` finds its topics again.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import grpc

from strand.client.bootstrap import DEFAULT_DEV_DIR, ENV_DEV_DIR

CLUSTER_FILE = "cluster.json"
CLUSTER_NAME = "dev"
RACKS = ("a", "b", "c")
GATEWAY_PORT = 9092  # the port Kafka users expect, when it is free


class DevClusterError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    role: str
    id: str
    pid: int
    address: str
    log: str
    args: tuple[str, ...] = ()  # the command line, to start it again (restart)


@dataclass(slots=True)
class DevCluster:
    directory: Path
    gateway: str = ""
    etcd: str = ""
    cluster: str = CLUSTER_NAME
    storage: list[str] = field(default_factory=list)
    processes: list[ProcessInfo] = field(default_factory=list)

    @property
    def file(self) -> Path:
        return self.directory / CLUSTER_FILE

    def save(self) -> None:
        data = {"gateway": self.gateway, "etcd": self.etcd, "cluster": self.cluster,
                "storage": self.storage, "processes": [asdict(p) for p in self.processes]}
        tmp = self.file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, self.file)

    @classmethod
    def load(cls, directory: Path) -> DevCluster | None:
        path = directory / CLUSTER_FILE
        if not path.exists():
            return None
        raw = json.loads(path.read_text())
        return cls(directory, raw.get("gateway", ""), raw.get("etcd", ""),
                   raw.get("cluster", CLUSTER_NAME), list(raw.get("storage", [])),
                   [ProcessInfo(**{**p, "args": tuple(p.get("args", ()))})
                    for p in raw.get("processes", [])])


def default_directory() -> Path:
    return Path(os.environ.get(ENV_DEV_DIR) or DEFAULT_DEV_DIR).expanduser()


def _free_port(preferred: int | None = None) -> int:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", preferred or 0))
        except OSError:
            s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie counts as dead: reap it if it is our child, else read its state
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    with contextlib.suppress(OSError, IndexError):
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def healthy(address: str, timeout: float = 0.5) -> bool:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(address) as channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=timeout)
        except grpc.RpcError:
            return False
    return bool(response.status == health_pb2.HealthCheckResponse.SERVING)


def _wait(condition: Callable[[], bool], timeout: float, what: str, logs: Path) -> None:
    # Waiting on other processes to come up: there is nothing to subscribe to.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise DevClusterError(f"timed out waiting for {what}; see the logs in {logs}")


def _spawn(args: list[str], log_path: Path) -> int:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True,
                                   cwd=Path(__file__).resolve().parents[1])
    return process.pid


def up(directory: Path, storage_nodes: int = 3, controllers: int = 2,
       progress: Callable[[str], None] = lambda _: None, lease_ttl: int | None = None
       ) -> DevCluster:
    """Start the cluster (or report the one already running there). ``lease_ttl``
    (seconds) overrides the services' default: how fast a dead process is noticed."""
    directory.mkdir(parents=True, exist_ok=True)
    existing = DevCluster.load(directory)
    if existing is not None and any(alive(p.pid) for p in existing.processes):
        raise DevClusterError(f"a dev cluster is already running from {directory} "
                              "(strand dev status / strand dev down)")
    etcd_binary = shutil.which("etcd")
    if etcd_binary is None:
        raise DevClusterError("etcd is not installed: run `make setup` "
                              "(or `apt-get install etcd-server`)")
    logs = directory / "logs"
    cluster = DevCluster(directory)
    python = sys.executable

    client_port, peer_port = _free_port(2379), _free_port(2380)
    cluster.etcd = f"127.0.0.1:{client_port}"
    progress(f"starting etcd on {cluster.etcd}")
    args: tuple[str, ...] = (etcd_binary, "--data-dir", str(directory / "etcd"), "--name", "dev",
            "--listen-client-urls", f"http://{cluster.etcd}",
            "--advertise-client-urls", f"http://{cluster.etcd}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"dev=http://127.0.0.1:{peer_port}")
    cluster.processes.append(ProcessInfo("etcd", "etcd", _spawn(list(args), logs / "etcd.log"),
                                         cluster.etcd, str(logs / "etcd.log"), args))
    cluster.save()
    _wait(lambda: _port_open(client_port), 20, "etcd", logs)

    common = ["--etcd", cluster.etcd, "--cluster", cluster.cluster]
    leased = [*common, "--lease-ttl", str(lease_ttl)] if lease_ttl else common
    for i in range(controllers):
        address = f"127.0.0.1:{_free_port()}"
        progress(f"starting controller-{i} on {address}")
        log_path = logs / f"controller-{i}.log"
        args = (python, "-m", "services.controller", *leased, "--listen", address,
                "--id", f"controller-{i}")
        cluster.processes.append(ProcessInfo("controller", f"controller-{i}",
                                             _spawn(list(args), log_path), address,
                                             str(log_path), args))
    for node in range(1, storage_nodes + 1):
        address = f"127.0.0.1:{_free_port()}"
        progress(f"starting storage-{node} on {address} (rack {RACKS[(node - 1) % 3]})")
        log_path = logs / f"storage-{node}.log"
        args = (python, "-m", "services.storage", *leased, "--listen", address,
                "--node-id", str(node), "--rack", RACKS[(node - 1) % len(RACKS)],
                "--data-dir", str(directory / f"storage-{node}"))
        cluster.processes.append(ProcessInfo("storage", f"storage-{node}",
                                             _spawn(list(args), log_path), address,
                                             str(log_path), args))
        cluster.storage.append(address)
    cluster.gateway = f"127.0.0.1:{_free_port(GATEWAY_PORT)}"
    progress(f"starting the gateway on {cluster.gateway}")
    log_path = logs / "gateway.log"
    args = (python, "-m", "services.gateway", *common, "--listen", cluster.gateway)
    cluster.processes.append(ProcessInfo("gateway", "gateway", _spawn(list(args), log_path),
                                         cluster.gateway, str(log_path), args))
    address = f"127.0.0.1:{_free_port()}"
    progress(f"starting the group coordinator on {address}")
    log_path = logs / "groups-0.log"
    args = (python, "-m", "services.groups", *leased, "--listen", address, "--id", "groups-0",
            "--bootstrap", cluster.gateway)
    cluster.processes.append(ProcessInfo("groups", "groups-0", _spawn(list(args), log_path),
                                         address, str(log_path), args))
    cluster.save()
    for info in cluster.processes[1:]:
        _wait(lambda info=info: _check(info) and healthy(info.address), 60,  # type: ignore[misc]
              f"{info.id} to serve", logs)
    _wait(lambda: _registered_brokers(cluster.gateway) >= storage_nodes, 30,
          "every storage node to register", logs)
    progress("cluster serving")
    return cluster


def start_again(directory: Path, process_id: str, timeout: float = 60.0) -> ProcessInfo:
    """Start a stopped (or killed) process of the cluster again with its own command
    line, wait until it serves, and record its new pid."""
    cluster = DevCluster.load(directory)
    if cluster is None:
        raise DevClusterError(f"no dev cluster in {directory}")
    index = next((i for i, p in enumerate(cluster.processes) if p.id == process_id), None)
    if index is None:
        raise DevClusterError(f"no process {process_id!r} in the dev cluster")
    info = cluster.processes[index]
    if alive(info.pid):
        raise DevClusterError(f"{process_id} is still running (pid {info.pid})")
    if not info.args:
        raise DevClusterError(f"{process_id} was started by an older version: run dev down/up")
    restarted = ProcessInfo(info.role, info.id, _spawn(list(info.args), Path(info.log)),
                            info.address, info.log, info.args)
    cluster.processes[index] = restarted
    cluster.save()
    if info.role != "etcd":
        _wait(lambda: _check(restarted) and healthy(restarted.address), timeout,
              f"{process_id} to serve", Path(info.log).parent)
    return restarted


def _check(info: ProcessInfo) -> bool:
    if not alive(info.pid):
        raise DevClusterError(f"{info.id} exited; its log ({info.log}) ends with:\n"
                              + Path(info.log).read_text()[-2000:])
    return True


def _port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
        return True
    return False


def _registered_brokers(gateway: str) -> int:
    from strand.v1 import common_pb2, gateway_pb2_grpc

    with grpc.insecure_channel(gateway) as channel:
        try:
            response = gateway_pb2_grpc.GatewayStub(channel).Metadata(
                common_pb2.MetadataRequest(), timeout=2)
        except grpc.RpcError:
            return 0
    return len(response.brokers)


def status(directory: Path) -> list[dict[str, object]]:
    cluster = DevCluster.load(directory)
    if cluster is None:
        return []
    rows: list[dict[str, object]] = []
    for info in cluster.processes:
        running = alive(info.pid)
        serving = running and (_port_open(int(info.address.rsplit(":", 1)[1]))
                               if info.role == "etcd" else healthy(info.address))
        rows.append({"role": info.role, "id": info.id, "pid": info.pid,
                     "address": info.address, "running": running, "serving": serving,
                     "log": info.log})
    return rows


def down(directory: Path, timeout: float = 15.0,
         progress: Callable[[str], None] = lambda _: None) -> int:
    """Stop every process (services first, etcd last); returns how many were running."""
    cluster = DevCluster.load(directory)
    if cluster is None:
        return 0
    roles = ["groups", "gateway", "storage", "controller", "etcd"]
    ordered = sorted(cluster.processes, key=lambda p: roles.index(p.role))
    stopped = 0
    for group in roles:
        members = [p for p in ordered if p.role == group and alive(p.pid)]
        for info in members:
            progress(f"stopping {info.id} (pid {info.pid})")
            with contextlib.suppress(ProcessLookupError):
                os.kill(info.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while any(alive(p.pid) for p in members) and time.monotonic() < deadline:
            time.sleep(0.1)
        for info in members:
            if alive(info.pid):
                progress(f"{info.id} did not stop in {timeout:.0f}s: SIGKILL")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(info.pid, signal.SIGKILL)
        stopped += len(members)
    cluster.file.unlink(missing_ok=True)
    return stopped
