"""A real Strand cluster (etcd, a controller, four storage nodes over three zones, a
gateway) shared by the operator's end-to-end tests of a module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from strand.launcher import Boot, Cluster
from tests.support.cluster import cluster_spec

ZONES = ("zone-a", "zone-b", "zone-c")


@pytest.fixture(scope="module")
def strand_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("k8s-operator")
    cluster = Cluster(cluster_spec(directory, "k8s", storage_nodes=4, racks=ZONES,
                                   txn_coordinators=0, boot=Boot.IN_STAGES))
    cluster.start()
    yield cluster
    cluster.stop()
