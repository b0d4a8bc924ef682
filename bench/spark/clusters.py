"""The benchmark's two clusters, A (source) and B (target): each etcd, a controller,
``storage_nodes`` storage nodes, a gateway and a transaction coordinator (the mirror
writes B in transactions; idempotent producers get their ids from it), as real
processes (strand.launcher), and its topics."""

from __future__ import annotations

from pathlib import Path

from bench_support import err

from strand import Admin, NewTopic
from strand.launcher import Boot, Cluster, ClusterSpec, wait_until


def start_cluster(directory: Path, name: str, storage_nodes: int, lease_ttl: int) -> Cluster:
    """Started one by one, like the other benchmarks' clusters; the logs go to
    ``directory/logs/<name>`` (kept when the run fails, bench_support.remove_run_dir)."""
    cluster = Cluster(ClusterSpec(
        directory / name, name=name, storage_nodes=storage_nodes, txn_coordinators=1,
        lease_ttl=lease_ttl, etcd_fsync=False, boot=Boot.ONE_BY_ONE, healthy_timeout=30,
        logs=directory / "logs" / name))
    err.print(f"starting cluster {name}: etcd, a controller, {storage_nodes} storage "
              f"node(s), a gateway and a transaction coordinator in {directory / name}")
    return cluster.start()


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int) -> None:
    """Create ``topic`` and wait until every partition has a leader and its full ISR."""
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, replication_factor)])

        def ready() -> bool:
            described = admin.describe_topics([topic])[0].partitions
            return len(described) == partitions and all(
                p.leader is not None and len(p.isr) == replication_factor for p in described)

        wait_until(ready, 120, f"every partition of {topic} to have a leader and its ISR",
                   interval=0.2)


def delete_topic(bootstrap: str, topic: str) -> None:
    """Drop a copy once checked: the rounds would otherwise fill the disk."""
    with Admin(bootstrap) as admin:
        admin.delete_topics([topic])
