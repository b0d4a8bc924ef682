"""A local development cluster of real processes: etcd, controllers, storage nodes,
a gateway, a group and a transaction coordinator on 127.0.0.1, one folder for data
and logs.

``up`` starts them detached (they outlive the command), waits until the gateway
serves with every storage node registered, and writes ``cluster.json`` — the file
the SDK and CLI read to find the cluster when no address is given (see
:mod:`strand.client.bootstrap`). ``down`` stops them (SIGTERM, then SIGKILL) and
keeps the data, so the next ``up`` finds its topics again.

The processes are :mod:`strand.launcher`'s; this module adds the folder, the
detached launch and ``cluster.json``, which records each process's pid and command
line so that later commands (``status``, ``down``, ``restart``) find them.
``remember``/``forget`` keep the directory of the cluster the user started last in
a small state file (:func:`strand.client.bootstrap.dev_pointer_file`), so that the
commands that follow ``strand dev up --dir D`` find it without ``STRAND_DEV_DIR``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from strand.client.bootstrap import dev_directory, dev_pointer_file
from strand.launcher import (
    Boot,
    Cluster,
    ClusterSpec,
    Launch,
    LaunchError,
    Process,
    command_line,
    etcd_binary,
    port_open,
    stop_in_order,
)
from strand.launcher.probes import healthy

CLUSTER_FILE = "cluster.json"
CLUSTER_NAME = "dev"
RACKS = ("a", "b", "c")
ETCD_PORT = 2379  # etcd's and Kafka's usual ports, when they are free
GATEWAY_PORT = 9092
KAFKA_PORT = 9093  # the gateway's Kafka listener (9092, Kafka's own, is the gRPC API's)
DETACHED = Launch(detached=True, env={})  # the user's environment as it is


class DevClusterError(LaunchError):
    pass


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    role: str
    id: str
    pid: int
    address: str
    log: str
    args: tuple[str, ...] = ()  # the command line, to start it again (restart)

    @classmethod
    def of(cls, process: Process) -> ProcessInfo:
        assert process.pid is not None
        return cls(process.role, process.id, process.pid, process.address,
                   str(process.log_path), tuple(process.command()))


@dataclass(slots=True)
class DevCluster:
    directory: Path
    gateway: str = ""
    etcd: str = ""
    kafka: str = ""  # the gateway's Kafka listener (Kafka clients' bootstrap)
    cluster: str = CLUSTER_NAME
    storage: list[str] = field(default_factory=list)
    processes: list[ProcessInfo] = field(default_factory=list)

    @property
    def file(self) -> Path:
        return self.directory / CLUSTER_FILE

    def save(self) -> None:
        data = {"gateway": self.gateway, "etcd": self.etcd, "kafka": self.kafka,
                "cluster": self.cluster,
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
                   raw.get("kafka", ""), raw.get("cluster", CLUSTER_NAME),
                   list(raw.get("storage", [])),
                   [ProcessInfo(**{**p, "args": tuple(p.get("args", ()))})
                    for p in raw.get("processes", [])])


class RecordedProcess(Process):
    """A process of cluster.json: its pid, and its command line to start it again."""

    def __init__(self, info: ProcessInfo) -> None:
        super().__init__(info.id, info.role, Path(info.log), DETACHED)
        self.info = info
        self.attach(info.pid)

    @property
    def address(self) -> str:
        return self.info.address

    def command(self) -> list[str]:
        return list(self.info.args)

    def running(self) -> bool:
        """Whether it runs; a recycled pid (another program's, after a reboot) does not
        count, so that neither ``down`` nor ``restart`` signals a stranger."""
        if not super().running():
            return False
        return self.process is not None or not self.info.args or (
            self.pid is not None and command_line(self.pid) == list(self.info.args))

    def serving(self) -> bool:
        if self.role == "etcd":
            return port_open(int(self.address.rsplit(":", 1)[1]))
        return healthy(self.address)


def default_directory() -> Path:
    """The directory every command looks in (the SDK's lookup: see dev_directory)."""
    return dev_directory()


def remember(directory: Path) -> None:
    """Make ``directory`` the one later commands find (until :func:`forget`)."""
    pointer = dev_pointer_file()
    pointer.parent.mkdir(parents=True, exist_ok=True)
    tmp = pointer.with_suffix(".tmp")
    tmp.write_text(f"{directory.expanduser().resolve()}\n")
    os.replace(tmp, pointer)


def forget(directory: Path) -> None:
    """Stop pointing later commands at ``directory`` (if they were)."""
    pointer = dev_pointer_file()
    try:
        remembered = Path(pointer.read_text().strip())
    except OSError:
        return
    if remembered == directory.expanduser().resolve():
        pointer.unlink(missing_ok=True)


def spec(directory: Path, storage_nodes: int = 3, controllers: int = 2,
         lease_ttl: int | None = None, launch: Launch = DETACHED) -> ClusterSpec:
    """The dev cluster's shape: ``controllers`` controllers, ``storage_nodes`` storage
    nodes on racks a, b, c, a gateway (port 9092 when free; its Kafka listener on 9093
    when free), a group coordinator and a transaction coordinator, every service
    spawned at once; ``lease_ttl`` (seconds) overrides the services' default: how fast
    a dead process is noticed."""
    return ClusterSpec(directory, name=CLUSTER_NAME, controllers=controllers,
                       storage_nodes=storage_nodes, coordinators=1, txn_coordinators=1,
                       racks=RACKS,
                       lease_ttl=lease_ttl, data_dir="storage-{node}", etcd_port=ETCD_PORT,
                       gateway_port=GATEWAY_PORT, kafka_port=KAFKA_PORT, boot=Boot.ALL_AT_ONCE,
                       launch=launch)


def up(directory: Path, storage_nodes: int = 3, controllers: int = 2,
       progress: Callable[[str], None] = lambda _: None, lease_ttl: int | None = None
       ) -> DevCluster:
    """Start the cluster (or report the one already running there). ``lease_ttl``
    (seconds) overrides the services' default: how fast a dead process is noticed."""
    directory.mkdir(parents=True, exist_ok=True)
    existing = DevCluster.load(directory)
    if existing is not None and any(RecordedProcess(p).running() for p in existing.processes):
        raise DevClusterError(f"a dev cluster is already running from {directory} "
                              "(strand dev status / strand dev down)")
    try:
        etcd_binary()
    except LaunchError as exc:
        raise DevClusterError(str(exc)) from None
    cluster = Cluster(spec(directory, storage_nodes, controllers, lease_ttl))
    record = DevCluster(directory, cluster.bootstrap, cluster.etcd.endpoint,
                        cluster.kafka_bootstrap if cluster.spec.tls is None else "",
                        storage=[node.address for node in cluster.storage])

    def spawned(process: Process) -> None:  # recorded at once: `down` finds it
        progress(f"starting {process.id} on {process.address}")
        record.processes.append(ProcessInfo.of(process))
        record.save()

    cluster.on_spawn = spawned
    try:
        cluster.start()
    except (LaunchError, TimeoutError) as exc:
        raise DevClusterError(f"{exc}\n(the logs are in {cluster.spec.log_dir}; "
                              "strand dev down stops what started)") from None
    progress("cluster serving")
    return record


def restart(directory: Path, process_id: str, timeout: float = 60.0,
            progress: Callable[[str], None] = lambda _: None) -> ProcessInfo:
    """Stop ``process_id`` if it runs (SIGTERM, then SIGKILL), start it again with its
    own command line (same ports, same data), wait until it serves, and record its
    new pid."""
    cluster = DevCluster.load(directory)
    if cluster is None:
        raise DevClusterError(f"no dev cluster in {directory} (start one with: strand dev up)")
    index = next((i for i, p in enumerate(cluster.processes) if p.id == process_id), None)
    if index is None:
        known = ", ".join(p.id for p in cluster.processes)
        raise DevClusterError(f"no process {process_id!r} in the dev cluster in {directory} "
                              f"(its processes: {known})")
    process = RecordedProcess(cluster.processes[index])
    if not process.info.args:
        raise DevClusterError(f"{process_id} was started by an older version: run dev down/up")
    if process.running():
        progress(f"stopping {process_id} (pid {process.pid})")
        process.stop()
    progress(f"starting {process_id} on {process.address}")
    process.spawn()
    cluster.processes[index] = restarted = ProcessInfo.of(process)
    cluster.save()
    try:
        process.wait_serving(timeout)
    except (LaunchError, TimeoutError) as exc:
        raise DevClusterError(str(exc)) from None
    return restarted


def status(directory: Path) -> list[dict[str, object]]:
    cluster = DevCluster.load(directory)
    if cluster is None:
        return []
    rows: list[dict[str, object]] = []
    for info in cluster.processes:
        process = RecordedProcess(info)
        running = process.running()
        rows.append({"role": info.role, "id": info.id, "pid": info.pid,
                     "address": info.address, "running": running,
                     "serving": running and process.serving(), "log": info.log})
    return rows


def down(directory: Path, timeout: float = 15.0,
         progress: Callable[[str], None] = lambda _: None) -> int:
    """Stop every process (services first, etcd last); returns how many were running."""
    cluster = DevCluster.load(directory)
    if cluster is None:
        return 0
    stopped = stop_in_order([RecordedProcess(p) for p in cluster.processes], timeout, progress)
    cluster.file.unlink(missing_ok=True)
    return stopped
