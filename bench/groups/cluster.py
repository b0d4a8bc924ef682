"""The benchmark's cluster and its process hygiene: BenchCluster (etcd, a controller,
storage nodes, a gateway and group coordinators as real processes), the signal
handling that stops them all, and the defaults of the services and the SDK that the
benchmark reports or starts from."""

from __future__ import annotations

import contextlib
import inspect
import sys
from pathlib import Path

from rich.console import Console

REPO = Path(__file__).resolve().parents[2]
# tests.integration.cluster_helpers, and bench/peers/procs.py (signal handling shared
# with the NATS benchmark, imported as `procs` there too).
for _path in (REPO, REPO / "bench" / "peers"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from services.groups.__main__ import parse_args as groups_parse_args  # noqa: E402
from strand import Admin, Consumer, StrandError  # noqa: E402
from strand.coordination.shards import shard_for  # noqa: E402
from tests.integration.cluster_helpers import (  # noqa: E402
    EtcdServer,
    ServiceProcess,
    wait_until,
)

err = Console(stderr=True)  # progress; the JSON document goes to stdout
def default_delay_ms() -> int:
    """The groups service's own default for --initial-rebalance-delay-ms."""
    return int(groups_parse_args(["--bootstrap", "unused:1"]).initial_rebalance_delay_ms)


def default_assignors() -> tuple[str, ...]:
    """The SDK's default partition_assignment_strategy."""
    default = inspect.signature(Consumer).parameters["partition_assignment_strategy"].default
    return tuple(default)


# ----------------------------------------------------------------------------- cluster

class BenchCluster:
    """etcd, a controller, storage nodes, a gateway and group coordinators, started
    like tests/integration/conftest.py's start_sdk_cluster (same helpers and
    arguments, but the services' own lease TTL by default: the tests' 2 s made
    storage nodes lose their lease on a busy machine); the coordinators can be
    restarted with another rebalance delay."""

    def __init__(self, directory: Path, storage_nodes: int, coordinators: int,
                 shards: int, lease_ttl: int) -> None:
        self.directory = directory
        self.lease_ttl = str(lease_ttl)
        self.storage_nodes = storage_nodes
        self.coordinator_count = coordinators
        self.shards = shards
        self.name = "groupbench"
        self.etcd = EtcdServer(directory / "etcd")
        self.services: list[ServiceProcess] = []  # everything but etcd and the coordinators
        self.coordinators: list[ServiceProcess] = []
        self.gateway: ServiceProcess | None = None
        self.delay_ms: int | None = None

    @property
    def bootstrap(self) -> str:
        assert self.gateway is not None
        return self.gateway.address

    @property
    def common(self) -> list[str]:
        return ["--etcd", self.etcd.endpoint, "--cluster", self.name]

    def _start(self, service: ServiceProcess, into: list[ServiceProcess]) -> ServiceProcess:
        into.append(service)  # before start(): stopped even if it never becomes healthy
        return service.start()

    def start(self) -> None:
        logs = self.directory / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        err.print(f"starting etcd, a controller, {self.storage_nodes} storage nodes and a "
                  f"gateway in {self.directory}")
        self.etcd.start()
        self._start(ServiceProcess("controller", [*self.common, "--lease-ttl", self.lease_ttl,
                                                  "--preferred-leader-interval", "2"],
                                   logs / "controller.log"), self.services)
        for node in range(1, self.storage_nodes + 1):
            self._start(ServiceProcess("storage", [
                *self.common, "--node-id", str(node), "--rack", f"r{node}",
                "--data-dir", str(self.directory / f"data-{node}"), "--lease-ttl", self.lease_ttl],
                logs / f"storage-{node}.log"), self.services)
        self.gateway = self._start(ServiceProcess("gateway", self.common, logs / "gateway.log"),
                                   self.services)

        def registered() -> bool:
            try:
                with Admin(self.bootstrap, request_timeout_ms=5000) as admin:
                    return len(admin.describe_cluster().brokers) == self.storage_nodes
            except StrandError:
                return False

        wait_until(registered, 30, "every storage node to register", interval=0.2)

    def start_coordinators(self, delay_ms: int) -> None:
        """(Re)start the group coordinators with this initial rebalance delay and wait
        until every shard of __consumer_offsets is served through the gateway."""
        if self.delay_ms == delay_ms and self.coordinators:
            return
        self.stop_coordinators()
        err.print(f"starting {self.coordinator_count} group coordinator(s), "
                  f"--initial-rebalance-delay-ms {delay_ms}")
        logs = self.directory / "logs"
        for i in range(self.coordinator_count):
            self._start(ServiceProcess("groups", [
                *self.common, "--id", f"groups-{i}", "--bootstrap", self.bootstrap,
                "--lease-ttl", self.lease_ttl, "--shards", str(self.shards),
                "--initial-rebalance-delay-ms", str(delay_ms)], logs / f"groups-{i}.log"),
                self.coordinators)
        self.delay_ms = delay_ms
        probes = _probe_groups(self.shards)

        def serving() -> bool:
            try:
                with Admin(self.bootstrap, request_timeout_ms=5000) as admin:
                    for group in probes:
                        admin.describe_group(group)
            except StrandError:
                return False
            return True

        wait_until(serving, 60, "every group shard to be served", interval=0.2)

    def stop_coordinators(self) -> None:
        for proc in self.coordinators:
            proc.stop()
        self.coordinators = []
        self.delay_ms = None

    def warnings(self) -> dict[str, int]:
        """Warning/error lines each service logged so far (lease losses, leader moves:
        signs that the machine was too busy for the numbers to mean much)."""
        counts: dict[str, int] = {}
        for log in sorted((self.directory / "logs").glob("*.log")):
            with contextlib.suppress(OSError):
                counts[log.stem] = sum(1 for line in log.read_text(errors="replace").splitlines()
                                       if '"level": "warning"' in line
                                       or '"level": "error"' in line)
        return counts

    def stop(self) -> None:
        self.stop_coordinators()
        for proc in reversed(self.services):  # gateway, storage nodes, controller
            proc.stop()
        self.etcd.stop()


def _probe_groups(shards: int) -> list[str]:
    """One group id per shard of __consumer_offsets."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < shards:
        name = f"probe-{i}"
        found.setdefault(shard_for(name, shards), name)
        i += 1
    return [found[k] for k in sorted(found)]

