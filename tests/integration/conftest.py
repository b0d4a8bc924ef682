from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from cluster_helpers import EtcdServer, ServiceProcess, wait_until

from strand.v1 import common_pb2 as pb
from strand.v1 import gateway_pb2_grpc


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    server = EtcdServer(tmp_path / "etcd")
    server.start()
    yield server
    server.stop()


# ------------------------------------------------------------------ SDK clusters

@dataclass
class SdkCluster:
    """etcd, a controller, storage nodes and a gateway, all real processes, for the
    SDK's tests (test_sdk_*.py): clients connect to ``bootstrap``."""

    etcd: EtcdServer
    controller: ServiceProcess
    storage: list[ServiceProcess]
    gateway: ServiceProcess
    tmp: Path
    name: str
    coordinators: list[ServiceProcess] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return self.gateway.address

    def storage_node(self, node_id: int, port: int | None = None) -> ServiceProcess:
        proc = ServiceProcess(
            "storage", [*self.common, "--node-id", str(node_id), "--rack", f"r{node_id}",
                        "--data-dir", str(self.tmp / f"data-{node_id}"), "--lease-ttl", "2"],
            self.tmp / f"storage-{node_id}.log")
        if port is not None:
            proc.listen_port = port
        return proc

    @property
    def common(self) -> list[str]:
        return ["--etcd", self.etcd.endpoint, "--cluster", self.name]

    def group_coordinator(self, index: int, port: int | None = None) -> ServiceProcess:
        proc = ServiceProcess("groups", [
            *self.common, "--id", f"groups-{index}", "--bootstrap", self.bootstrap,
            "--lease-ttl", "2", "--shards", "4", "--initial-rebalance-delay-ms", "300"],
            self.tmp / f"groups-{index}.log")
        if port is not None:
            proc.listen_port = port
        return proc

    def stop(self) -> None:
        for proc in (*self.coordinators, self.gateway, *self.storage, self.controller):
            proc.stop()
        self.etcd.stop()


def start_sdk_cluster(tmp: Path, nodes: int = 2, name: str = "sdk",
                      coordinators: int = 0) -> SdkCluster:
    tmp.mkdir(parents=True, exist_ok=True)
    etcd = EtcdServer(tmp / "etcd")
    etcd.start()
    common = ["--etcd", etcd.endpoint, "--cluster", name]
    controller = ServiceProcess("controller", [*common, "--lease-ttl", "2",
                                               "--preferred-leader-interval", "2"],
                                tmp / "controller.log").start()
    cluster = SdkCluster(etcd, controller, [], ServiceProcess("gateway", common,
                                                              tmp / "gateway.log"), tmp, name)
    cluster.storage = [cluster.storage_node(i).start() for i in range(1, nodes + 1)]
    cluster.gateway.start()
    channel = grpc.insecure_channel(cluster.bootstrap)
    stub = gateway_pb2_grpc.GatewayStub(channel)
    try:
        wait_until(lambda: len(stub.Metadata(pb.MetadataRequest(), timeout=5).brokers) == nodes,
                   20, "every storage node to register")
    finally:
        channel.close()
    cluster.coordinators = [cluster.group_coordinator(i).start() for i in range(coordinators)]
    return cluster


@pytest.fixture(scope="module")
def sdk_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkCluster]:
    """One cluster (two storage nodes) shared by a test module: tests use their own topics."""
    cluster = start_sdk_cluster(tmp_path_factory.mktemp("sdk"))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def group_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkCluster]:
    """One storage node and one group coordinator, shared by a test module."""
    cluster = start_sdk_cluster(tmp_path_factory.mktemp("groups"), nodes=1, name="groups",
                                coordinators=1)
    yield cluster
    cluster.stop()


@pytest.fixture
def sdk_cluster_factory(tmp_path: Path) -> Iterator[Callable[..., SdkCluster]]:
    """Start a cluster of its own for one test (``nodes`` storage nodes); stopped after it."""
    started: list[SdkCluster] = []

    def start(nodes: int = 1, coordinators: int = 0) -> SdkCluster:
        cluster = start_sdk_cluster(tmp_path / f"cluster-{len(started)}", nodes,
                                    coordinators=coordinators)
        started.append(cluster)
        return cluster

    yield start
    for cluster in started:
        cluster.stop()
