"""``strand cluster status`` on a real three-node cluster: HEALTHY (exit 0) with a
group's lag; a storage node killed: DEGRADED (exit 1) with the under-replicated
partitions listed and the node named as not alive; a second node killed, taking
the only replica of a replication-factor-1 topic with it: UNAVAILABLE (exit 2) with
that partition offline and the others under min.insync.replicas."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from click.testing import CliRunner, Result

from strand import Admin, NewTopic, Producer, TopicPartition
from strand.cli.main import cli
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from tests.support.cluster import SdkCluster

STEADY = "steady"  # 3 partitions on every node, min.insync.replicas=2
LONELY = "lonely"  # 1 partition, its only replica on node 2
GROUP = "readers"


def status(cluster: SdkCluster, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--bootstrap", cluster.bootstrap, "cluster", "status",
                                    "--timeout-ms", "3000", *args])


def report(cluster: SdkCluster) -> tuple[int, dict[str, Any]]:
    result = status(cluster, "--json", "--limit", "100")
    assert result.exit_code in (0, 1, 2), result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return result.exit_code, document


def partitions(section: dict[str, Any]) -> set[str]:
    return {f"{p['topic']}-{p['partition']}" for p in section["partitions"]}


def settles_at(cluster: SdkCluster, exit_status: int, done: Callable[[dict[str, Any]], bool],
               what: str) -> dict[str, Any]:
    """The first report with ``exit_status`` for which ``done`` holds (metadata follows
    a kill within a lease, 2 s here, and leaders move a moment later)."""
    last: list[tuple[int, dict[str, Any]]] = []

    def settled() -> bool:
        last.append(report(cluster))
        code, document = last[-1]
        return code == exit_status and done(document)

    try:
        wait_until(settled, 30, what, interval=0.3)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; the last report (exit {last[-1][0]}): "
                             f"{json.dumps(last[-1][1])}") from None
    return last[-1][1]


def test_status_follows_the_cluster_from_healthy_to_degraded_to_unavailable(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    cluster = sdk_cluster_factory(nodes=3, coordinators=1)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(STEADY, 3, 3, config={"min.insync.replicas": "2"}),
                             NewTopic(LONELY, 1, 1, replica_assignment={0: [2]})])
        with Producer(cluster.bootstrap, acks="all") as producer:
            for i in range(10):
                producer.send(STEADY, f"r{i}".encode(), partition=0)
            producer.flush(timeout=30)
        admin.alter_group_offsets(GROUP, {TopicPartition(STEADY, 0): 4})

    healthy = settles_at(cluster, 0, lambda d: True, "HEALTHY")
    assert healthy["verdict"] == "HEALTHY" and healthy["reasons"] == []
    assert [b["id"] for b in healthy["brokers"]["alive"]] == [1, 2, 3]
    assert healthy["controller"] == {"id": "controller-0", "reported": True}
    assert healthy["brokers"]["missing"] == []
    assert healthy["topics"] >= 2 and healthy["partitions"] >= 4  # and the internal ones
    (readers,) = [g for g in healthy["groups"]["groups"] if g["group"] == GROUP]
    assert (readers["state"], readers["lag"], readers["lag_unknown_partitions"]) == (
        "Empty", 6, 0)
    text = status(cluster)
    assert text.exit_code == 0 and text.stdout.splitlines()[0] == "HEALTHY", text.output

    cluster.storage[2].kill()  # node 3: every partition of STEADY loses a replica
    steady = {f"{STEADY}-{p}" for p in range(3)}
    degraded = settles_at(
        cluster, 1, lambda d: steady <= partitions(d["under_replicated_partitions"]),
        "DEGRADED with node 3's partitions under-replicated")
    assert degraded["verdict"] == "DEGRADED"
    assert degraded["brokers"]["missing"] == [3]
    assert "1 storage node not alive: 3" in degraded["reasons"]
    assert degraded["offline_partitions"]["count"] == 0
    assert degraded["under_min_isr_partitions"]["count"] == 0  # 2 in sync, 2 needed
    text = status(cluster, "--limit", "20")
    assert text.exit_code == 1, text.output
    assert text.stdout.splitlines()[0].startswith("DEGRADED: ")
    assert all(name in text.stdout for name in steady)

    cluster.storage[1].kill()  # node 2: LONELY's only replica
    unavailable = settles_at(
        cluster, 2, lambda d: f"{LONELY}-0" in partitions(d["offline_partitions"])
        and steady <= partitions(d["under_min_isr_partitions"]),
        "UNAVAILABLE with lonely-0 offline")
    assert unavailable["verdict"] == "UNAVAILABLE"
    assert unavailable["reasons"][0].endswith("(no leader)")
    assert unavailable["brokers"]["missing"] == [2, 3]
    text = status(cluster, "--no-lag")
    assert text.exit_code == 2, text.output
    assert text.stdout.splitlines()[0].startswith("UNAVAILABLE: ")
    assert f"{LONELY}-0" in text.stdout
