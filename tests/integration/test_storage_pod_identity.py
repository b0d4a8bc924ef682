"""A storage node started as the chart's StatefulSet starts it: through the image's
entry point (``strand-service storage``), its broker id from its host name's ordinal
(``--node-id-from-hostname``) and its rack from the file the init step wrote
(``--rack-file``). It registers with that id and rack, and stops cleanly on SIGTERM
through the entry point."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from strand import Admin
from strand.client import BrokerInfo
from strand.launcher import Cluster, Launch, ServiceProcess, pinned_env, stop_in_order, wait_until
from tests.support.cluster import cluster_spec

STRAND_SERVICE = str(Path(sys.executable).parent / "strand-service")


class PodStorageNode(ServiceProcess):
    """``strand-service storage`` in a pod whose host name is ``hostname``."""

    def __init__(self, cluster: Cluster, hostname: str, rack_file: Path) -> None:
        super().__init__(
            "storage", [*cluster.common, "--lease-ttl", "2", "--node-id-from-hostname",
                        "--rack-file", str(rack_file),
                        "--data-dir", str(cluster.directory / hostname)],
            cluster.spec.log_dir / f"{hostname}.log", cluster.unused_port(), id=hostname,
            launch=Launch(env={**pinned_env(), "HOSTNAME": hostname}))

    def command(self) -> list[str]:
        return [STRAND_SERVICE, "storage", "--listen", self.address, *self.args]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """etcd, a controller and a gateway; the storage nodes are the test's."""
    directory = tmp_path_factory.mktemp("pod-identity")
    cluster = Cluster(cluster_spec(directory, "podid", storage_nodes=0,
                                   txn_coordinators=0)).start()
    yield cluster
    cluster.stop()


def brokers(cluster: Cluster) -> tuple[BrokerInfo, ...]:
    with Admin(cluster.bootstrap) as admin:
        return admin.describe_cluster().brokers


def test_storage_pods_register_with_their_ordinal_and_zone(cluster: Cluster,
                                                           tmp_path: Path) -> None:
    zoned, unzoned = tmp_path / "zoned-rack", tmp_path / "unzoned-rack"
    zoned.write_text("eu-west-1b")  # as rack-from-node writes it: the label's value
    unzoned.write_text("")  # a node without the zone label
    nodes = [PodStorageNode(cluster, "strand-storage-7", zoned),
             PodStorageNode(cluster, "strand-storage-8", unzoned)]
    try:
        for node in nodes:
            node.spawn()
        for node in nodes:
            node.wait_serving(30)
        wait_until(lambda: len(brokers(cluster)) == 2, 20, "both storage pods to register")

        registered = {b.node_id: b.rack for b in brokers(cluster)}
        assert registered == {7: "eu-west-1b", 8: None}
    finally:
        stop_in_order(nodes, timeout=30)
    assert [node.returncode for node in nodes] == [0, 0]  # SIGTERM through the entry point
