"""The integration tests' fixtures: etcd, and clusters of real processes (built in
tests/support/cluster.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from strand.launcher import Cluster, EtcdServer, ServiceProcess
from tests.support.cluster import SdkCluster, new_etcd, start_sdk_cluster
from tests.support.controllers import start_controllers
from tests.support.security import secured_spec


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    server = new_etcd(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def controllers(etcd: EtcdServer, tmp_path: Path) -> Iterator[list[ServiceProcess]]:
    """Two controllers (one active, one standby) on ``etcd``, cluster "itest", with
    three registered brokers (tests/support/controllers.py)."""
    procs = start_controllers(etcd.endpoint, tmp_path)
    yield procs
    for proc in procs:
        proc.stop()


# ------------------------------------------------------------------ SDK clusters

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


@pytest.fixture(scope="package")
def txn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkCluster]:
    """Three storage nodes, a group and a transaction coordinator, shared by every
    module of tests/integration that asks for it (one start instead of one per module;
    stopped once the package is done rather than idling through the rest of the
    session). Its tests name their topics, groups and transactional ids with
    tests.support.cluster.unique() and never kill, pause or stop its processes:
    tests that do start a cluster of their own (``sdk_cluster_factory``)."""
    cluster = start_sdk_cluster(tmp_path_factory.mktemp("txn"), nodes=3, name="txn",
                                coordinators=1, txn_coordinators=1)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="package")
def secured_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A storage node, a group and a transaction coordinator, with SCRAM-SHA-512
    authentication required and ACLs enforced (tests.support.security), shared by the
    security tests. They name what they create with unique(); a client whose session
    is refused (a gateway restarted) authenticates again by itself."""
    cluster = Cluster(secured_spec(
        tmp_path_factory.mktemp("secured"), "secured", storage_nodes=1, coordinators=1,
        coordinator_args=("--shards", "2", "--initial-rebalance-delay-ms", "0"))).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def sdk_cluster_factory(tmp_path: Path) -> Iterator[Callable[..., SdkCluster]]:
    """Start a cluster of its own for one test (``nodes`` storage nodes); stopped after it."""
    started: list[SdkCluster] = []

    def start(nodes: int = 1, coordinators: int = 0, txn_coordinators: int = 1,
              storage_args: tuple[str, ...] = ()) -> SdkCluster:
        cluster = start_sdk_cluster(tmp_path / f"cluster-{len(started)}", nodes,
                                    coordinators=coordinators,
                                    txn_coordinators=txn_coordinators,
                                    storage_args=storage_args)
        started.append(cluster)
        return cluster

    yield start
    for cluster in started:
        cluster.stop()
