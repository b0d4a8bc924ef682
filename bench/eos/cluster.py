"""The benchmark's cluster: etcd, a controller, storage nodes, a gateway and a
transaction coordinator as real processes (strand.launcher), and its topics
(acks=all needs ``min.insync.replicas`` of the replication factor)."""

from __future__ import annotations

from pathlib import Path

from bench_support import err

from strand import Admin, NewTopic
from strand.launcher import Boot, Cluster, ClusterSpec, wait_until
from strand.security.settings import ClientTlsSettings


def start_cluster(directory: Path, storage_nodes: int, lease_ttl: int) -> Cluster:
    """Started one by one, like the other benchmarks' clusters; returns once every
    storage node is registered and the coordinator holds every shard."""
    cluster = Cluster(ClusterSpec(
        directory, name="eosbench", storage_nodes=storage_nodes, txn_coordinators=1,
        lease_ttl=lease_ttl, etcd_fsync=False, boot=Boot.ONE_BY_ONE, healthy_timeout=30,
        metrics=True))  # the produce runs' requests served (eos.cost)
    err.print(f"starting etcd, a controller, {storage_nodes} storage nodes, a gateway and "
              f"a transaction coordinator in {directory}")
    return cluster.start()


def create_topic(cluster: Cluster, topic: str, partitions: int, replication_factor: int,
                 min_insync_replicas: int, client: ClientTlsSettings | None = None) -> None:
    """Create ``topic`` and wait until every partition has its full ISR (a short ISR
    would make acks=all cheaper at first). ``client``: the Admin's TLS settings."""
    config = {"min.insync.replicas": str(min_insync_replicas)}
    with Admin(cluster.bootstrap, **(client or ClientTlsSettings())) as admin:
        admin.create_topics([NewTopic(topic, partitions, replication_factor, config=config)])

        def in_sync() -> bool:
            described = admin.describe_topics([topic])[0].partitions
            return len(described) == partitions and all(
                p.leader is not None and len(p.isr) == replication_factor for p in described)

        wait_until(in_sync, 120, f"every partition of {topic} to have its full ISR",
                   interval=0.2)
