"""The integration tests' clusters, built with :mod:`strand.launcher`: everything
binds to 127.0.0.1 on free ports and lives under the test's temporary directory
(logs beside the data), etcd runs without fsync, services boot one by one.

The fixtures (tests/integration/conftest.py) are thin wrappers over these.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from strand import Admin
from strand.launcher import Boot, Cluster, ClusterSpec, EtcdServer

SdkCluster = Cluster  # the name the SDK tests know their cluster by

# Short leases, so that a killed process is noticed within seconds.
LEASE_TTL = 2
# Few shards (fast to create and load); timed-out transactions looked for every 200 ms.
TXN_COORDINATOR_ARGS = ("--shards", "4", "--abort-interval-ms", "200")


def unique(name: str) -> str:
    """``name`` with a random suffix: topics, groups and transactional ids of a test on
    a cluster shared by the whole session (``txn_cluster``) never meet another test's,
    nor a rerun's of the same test."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def user_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a user whose home is ``home`` (so that the directory
    ``strand dev up`` remembers is theirs, not the caller's), without the caller's
    STRAND_*, XDG_STATE_HOME and active virtualenv; ``extra`` on top."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("STRAND_") and k not in ("XDG_STATE_HOME", "VIRTUAL_ENV")}
    return {**env, "HOME": str(home), **extra}


def new_etcd(directory: Path) -> EtcdServer:
    """An etcd (not started) for tests that start services themselves."""
    return EtcdServer(directory / "etcd", unsafe_no_fsync=True)


def cluster_spec(directory: Path, name: str, **shape: Any) -> ClusterSpec:
    """A test cluster's spec: one controller, one storage node, a gateway and a
    transaction coordinator (4 shards of __transaction_state: idempotent producers
    get their producer ids from it) unless ``shape`` (ClusterSpec's fields) says
    otherwise."""
    base = ClusterSpec(directory, name=name, lease_ttl=LEASE_TTL, logs=directory,
                       etcd_fsync=False, boot=Boot.ONE_BY_ONE, healthy_timeout=30,
                       registered_timeout=20, txn_coordinator_args=TXN_COORDINATOR_ARGS)
    return replace(base, **shape)


def sdk_spec(directory: Path, nodes: int = 2, name: str = "sdk",
             coordinators: int = 0, txn_coordinators: int = 1,
             storage_args: tuple[str, ...] = ()) -> ClusterSpec:
    """etcd, a controller, ``nodes`` storage nodes (racks r1, r2 …), a gateway,
    ``coordinators`` group coordinators (4 shards of __consumer_offsets, a 300 ms
    initial rebalance delay) and ``txn_coordinators`` transaction coordinators
    (TXN_COORDINATOR_ARGS; at least one for the idempotent producer, the default),
    for the SDK's tests: clients connect to ``bootstrap``."""
    return cluster_spec(directory, name, storage_nodes=nodes, coordinators=coordinators,
                     txn_coordinators=txn_coordinators, storage_args=storage_args,
                     controller_args=("--preferred-leader-interval", "2"),
                     coordinator_args=("--shards", "4", "--initial-rebalance-delay-ms", "300"))


def start_sdk_cluster(directory: Path, nodes: int = 2, name: str = "sdk",
                      coordinators: int = 0, txn_coordinators: int = 1,
                      storage_args: tuple[str, ...] = ()) -> SdkCluster:
    directory.mkdir(parents=True, exist_ok=True)
    return Cluster(sdk_spec(directory, nodes, name, coordinators, txn_coordinators,
                            storage_args)).start()


Placement = dict[int, tuple[int | None, tuple[int, ...]]]


def placement(cluster: Cluster, topic: str) -> Placement:
    """Each partition of ``topic``: its leader (None: none) and its ISR, per Admin."""
    with Admin(cluster.bootstrap) as admin:
        return {p.partition: (p.leader, p.isr)
                for p in admin.describe_topics([topic])[0].partitions}
