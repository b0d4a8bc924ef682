"""The topic operator end to end: kopf runs the operator's own handlers in-process
against kmock's Kubernetes emulator, and the operator manages topics of a real Strand
cluster (etcd, a controller, four storage nodes over three zones, a gateway; see
conftest.py). Every behaviour is checked in Strand itself AND in the Topic's status
and Events as the emulator holds them. Each test starts its own operator (drift
timer: one second) and uses its own topic names; the cluster is shared."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import kmock
import pytest
import pytest_asyncio

from strand.admin import Admin, TopicDescription
from strand.cluster.placement import Broker, assign_replicas, start_index_for
from strand.errors import UnknownTopicOrPartitionError
from strand.launcher import Cluster, free_port
from strand_operator.config import OperatorConfig
from strand_operator.handlers import FINALIZER
from tests.k8s.operator.harness import (
    Operator,
    TopicEmulator,
    check_against_the_crd,
    declare_resources,
    eventually,
    running_operator,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.kmock(cls=TopicEmulator)]
T = TypeVar("T")


async def strand(cluster: Cluster, call: Callable[[Admin], T]) -> T:
    """An Admin call, off the event loop kopf shares with the test."""
    def run() -> T:
        with Admin(cluster.bootstrap) as admin:
            return call(admin)
    return await asyncio.to_thread(run)


async def described(cluster: Cluster, topic: str) -> TopicDescription | None:
    def describe(admin: Admin) -> TopicDescription | None:
        try:
            return admin.describe_topics([topic])[0]
        except UnknownTopicOrPartitionError:
            return None
    return await strand(cluster, describe)


async def brokers(cluster: Cluster) -> list[Broker]:
    info = await strand(cluster, lambda admin: admin.describe_cluster())
    return [Broker(b.node_id, b.rack) for b in info.brokers]


async def configs(cluster: Cluster, topic: str) -> dict[str, str]:
    values = await strand(cluster, lambda admin: admin.describe_configs(topic))
    return {k: v.value for k, v in values.items() if not v.is_default}


def assignment(topic: TopicDescription) -> dict[int, list[int]]:
    return {p.partition: list(p.replicas) for p in topic.partitions}


async def until_ready(op: Operator, name: str, reason: str = "Reconciled",
                      timeout: float = 30.0) -> dict[str, Any]:
    def check() -> dict[str, Any]:
        ready = op.ready(name)
        return ready if ready.get("reason") == reason else {}
    return await eventually(check, timeout, f"Topic {name} to be {reason}")


async def recorded(op: Operator, name: str, reason: str, kind: str = "Normal") -> None:
    """Until an Event of ``reason`` is recorded about Topic ``name`` (kopf posts Events
    in the background, a moment after the status)."""
    await eventually(lambda: any(e.get("reason") == reason and e.get("type") == kind
                                 for e in op.events(name)), 10,
                     f"a {kind} Event {reason} about Topic {name}")


@pytest_asyncio.fixture
async def op(kmock: kmock.KubernetesEmulator, strand_cluster: Cluster) -> AsyncIterator[Operator]:
    config = OperatorConfig(strand_cluster.bootstrap, ("apps",), "k8s", resync_interval=1.0)
    async with running_operator(kmock, config) as running:
        yield running


async def test_create_places_replicas_rack_aware(op: Operator, strand_cluster: Cluster) -> None:
    await op.create_topic("orders", {"partitions": 6, "replicas": 3,
                                     "config": {"retention.ms": 3600000}})
    ready = await until_ready(op, "orders")
    assert ready["status"] == "True" and ready["observedGeneration"] == 1

    topic = await described(strand_cluster, "orders")
    assert topic is not None
    nodes = await brokers(strand_cluster)
    assert assignment(topic) == assign_replicas(nodes, 6, 3, start_index=start_index_for("orders"))
    rack = {b.id: b.rack for b in nodes}
    assert all(len({rack[r] for r in p.replicas}) == 3 for p in topic.partitions)
    assert (await configs(strand_cluster, "orders"))["retention.ms"] == "3600000"

    status = op.topic("orders")["status"]
    assert (status["topicName"], status["topicId"]) == ("orders", topic.topic_id)
    summary = status["assignment"]
    assert (summary["partitions"], summary["replicationFactor"]) == (6, 3)
    assert {b["id"]: b["replicas"] for b in summary["brokers"]} == dict(
        Counter(r for p in topic.partitions for r in p.replicas))
    assert sum(b["leaders"] for b in summary["brokers"]) == 6
    assert {r["rack"]: r["replicas"] for r in summary["racks"]} == {
        "zone-a": 6, "zone-b": 6, "zone-c": 6}
    assert op.topic("orders")["metadata"]["finalizers"] == [FINALIZER]
    await recorded(op, "orders", "Created")
    check_against_the_crd(op.topic("orders"))


async def test_topic_name_adopts_an_existing_topic(op: Operator, strand_cluster: Cluster) -> None:
    from strand.admin import NewTopic
    await strand(strand_cluster, lambda admin: admin.create_topics(
        [NewTopic("Ledger_V2", 2, 2, config={"segment.ms": "60000"})]))
    before = await described(strand_cluster, "Ledger_V2")
    await op.create_topic("ledger", {"topicName": "Ledger_V2", "partitions": 2, "replicas": 2,
                                     "config": {"retention.ms": -1}})
    await until_ready(op, "ledger")
    after = await described(strand_cluster, "Ledger_V2")
    assert before is not None and after is not None
    assert (after.topic_id, assignment(after)) == (before.topic_id, assignment(before))
    # The Topic is the whole truth: its config is set, the one it does not name reverts.
    assert await configs(strand_cluster, "Ledger_V2") == {"retention.ms": "-1"}
    assert op.topic("ledger")["status"]["topicName"] == "Ledger_V2"
    await recorded(op, "ledger", "ConfigUpdated")
    assert "Created" not in op.reasons("ledger")


async def test_partitions_grow_balanced_and_never_shrink(op: Operator,
                                                         strand_cluster: Cluster) -> None:
    await op.create_topic("growing", {"partitions": 3, "replicas": 2})
    await until_ready(op, "growing")
    first = await described(strand_cluster, "growing")
    assert first is not None

    await op.patch_topic("growing", {"partitions": 7})
    await eventually(lambda: op.ready("growing").get("observedGeneration") == 2, 30)
    grown = await described(strand_cluster, "growing")
    assert grown is not None and len(grown.partitions) == 7
    existing = assignment(first)
    nodes = await brokers(strand_cluster)
    wanted = assign_replicas(nodes, 7, 2, existing, start_index=start_index_for("growing"))
    assert assignment(grown) == {**existing, **wanted}  # old ones untouched, new as placed
    await recorded(op, "growing", "PartitionsIncreased")
    assert op.topic("growing")["status"]["assignment"]["partitions"] == 7

    await op.patch_topic("growing", {"partitions": 4})
    refused = await until_ready(op, "growing", "NotSupported")
    assert refused["status"] == "False" and "cannot be removed" in refused["message"]
    after = await described(strand_cluster, "growing")
    assert after is not None and assignment(after) == assignment(grown)
    await recorded(op, "growing", "NotSupported", "Warning")


async def test_replication_factor_grows_by_reassignment(op: Operator,
                                                        strand_cluster: Cluster) -> None:
    await op.create_topic("replicated", {"partitions": 4, "replicas": 1})
    await until_ready(op, "replicated")
    before = await described(strand_cluster, "replicated")
    assert before is not None

    # min.insync.replicas=2 needs the new replicas: the operator starts the change first.
    await op.patch_topic("replicated", {"replicas": 3, "config": {"min.insync.replicas": 2}})
    await eventually(lambda: op.ready("replicated").get("observedGeneration") == 2
                     and op.ready("replicated").get("reason") == "Reconciled", 60)
    after = await described(strand_cluster, "replicated")
    assert after is not None
    nodes = {b.id: b.rack for b in await brokers(strand_cluster)}
    for old, new in zip(before.partitions, after.partitions, strict=True):
        assert len(new.replicas) == 3 and new.replicas[0] == old.replicas[0]
        assert len({nodes[r] for r in new.replicas}) == 3  # one replica per zone
        assert sorted(new.isr) == sorted(new.replicas)
    progress = [s["replicasChange"] for s in op.statuses("replicated")
                if s.get("replicasChange")]
    assert progress and all((p["from"], p["to"], p["partitionsTotal"]) == (1, 3, 4)
                            for p in progress)
    assert "replicasChange" not in op.topic("replicated")["status"]
    assert await configs(strand_cluster, "replicated") == {"min.insync.replicas": "2"}
    for status in op.statuses("replicated"):
        check_against_the_crd({**op.topic("replicated"), "status": status})
    assert op.topic("replicated")["status"]["assignment"]["replicationFactor"] == 3
    await recorded(op, "replicated", "ReplicasChanged")
    reasons = op.reasons("replicated")
    assert reasons.index("ReplicasChangeStarted") < reasons.index("ReplicasChanged")


async def test_config_changes_apply_and_drift_reverts(op: Operator,
                                                      strand_cluster: Cluster) -> None:
    await op.create_topic("configured", {"partitions": 1, "replicas": 2,
                                         "config": {"retention.ms": 3600000}})
    await until_ready(op, "configured")
    await op.patch_topic("configured", {"config": {"retention.ms": 3600000,
                                                   "cleanup.policy": "compact"}})
    wanted = {"retention.ms": "3600000", "cleanup.policy": "compact"}
    await eventually(lambda: op.ready("configured").get("observedGeneration") == 2, 30)
    assert await configs(strand_cluster, "configured") == wanted
    await recorded(op, "configured", "ConfigUpdated")

    updates = op.reasons("configured").count("ConfigUpdated")
    # A short wait for the change to show: the operator may revert it before it does.
    await strand(strand_cluster, lambda admin: admin.alter_configs(
        "configured", set={"retention.ms": "1000", "segment.ms": "5000"}, timeout_ms=500))
    await eventually(lambda: op.reasons("configured").count("ConfigUpdated") > updates, 30)
    assert await configs(strand_cluster, "configured") == wanted


async def test_a_topic_deleted_behind_the_operators_back_is_recreated(
        op: Operator, strand_cluster: Cluster) -> None:
    await op.create_topic("phoenix", {"partitions": 2, "replicas": 2})
    await until_ready(op, "phoenix")
    first_id = op.topic("phoenix")["status"]["topicId"]
    await strand(strand_cluster, lambda admin: admin.delete_topics(["phoenix"]))

    await eventually(lambda: op.topic("phoenix")["status"]["topicId"] != first_id, 30)
    topic = await described(strand_cluster, "phoenix")
    assert topic is not None and topic.topic_id == op.topic("phoenix")["status"]["topicId"]
    assert len(topic.partitions) == 2
    await recorded(op, "phoenix", "Recreated")


async def test_two_topics_for_one_name_the_older_wins(op: Operator,
                                                      strand_cluster: Cluster) -> None:
    await op.create_topic("first", {"topicName": "shared", "partitions": 2, "replicas": 1})
    await until_ready(op, "first")
    await op.create_topic("second", {"topicName": "shared", "partitions": 5, "replicas": 2})
    conflict = await until_ready(op, "second", "ResourceConflict")
    assert conflict["status"] == "False" and "apps/first" in conflict["message"]
    await recorded(op, "second", "ResourceConflict", "Warning")
    topic = await described(strand_cluster, "shared")
    assert topic is not None and len(topic.partitions) == 2  # the loser changed nothing

    await op.delete_topic("second")  # not the owner: the topic stays
    await eventually(lambda: not op.exists("second"), 30)
    assert await described(strand_cluster, "shared") is not None
    assert op.ready("first")["reason"] == "Reconciled"


async def test_a_config_strand_does_not_know_is_refused(op: Operator,
                                                        strand_cluster: Cluster) -> None:
    await op.create_topic("misconfigured", {"partitions": 1, "replicas": 1,
                                            "config": {"retention.hours": 24}})
    refused = await until_ready(op, "misconfigured", "InvalidConfig")
    assert refused["status"] == "False" and "retention.hours" in refused["message"]
    assert await described(strand_cluster, "misconfigured") is None
    await recorded(op, "misconfigured", "InvalidConfig", "Warning")

    await op.patch_topic("misconfigured", {"config": {"retention.hours": None,
                                                      "retention.ms": 86400000}})
    await until_ready(op, "misconfigured")
    assert await configs(strand_cluster, "misconfigured") == {"retention.ms": "86400000"}


async def test_paused_then_resumed(op: Operator, strand_cluster: Cluster) -> None:
    await op.create_topic("later", {"partitions": 1, "replicas": 1},
                          annotations={"strand.io/paused": "true"})
    paused = await until_ready(op, "later", "ReconciliationPaused")
    assert paused["status"] == "False"
    emulator = op.emulator
    assert isinstance(emulator, TopicEmulator)
    writes = emulator.status_writes["later"]
    await eventually(lambda: emulator.status_writes["later"] >= writes + 2, 10,
                     "two more drift-timer passes")  # and still nothing may happen
    assert await described(strand_cluster, "later") is None

    await op.patch_topic("later", annotations={"strand.io/paused": None})
    await until_ready(op, "later")
    assert await described(strand_cluster, "later") is not None


async def test_unmanaged_topics_are_left_alone(op: Operator, strand_cluster: Cluster) -> None:
    await op.create_topic("kept", {"partitions": 1, "replicas": 1})
    await until_ready(op, "kept")
    await op.patch_topic("kept", annotations={"strand.io/managed": "false"})
    await until_ready(op, "kept", "Unmanaged")
    await eventually(lambda: FINALIZER not in op.topic("kept")["metadata"].get("finalizers",
                                                                              []), 30)
    await op.patch_topic("kept", {"partitions": 3})
    await eventually(lambda: op.ready("kept").get("observedGeneration") == 2, 30)
    topic = await described(strand_cluster, "kept")
    assert topic is not None and len(topic.partitions) == 1

    await op.delete_topic("kept")
    await eventually(lambda: not op.exists("kept"), 30)
    assert await described(strand_cluster, "kept") is not None


async def test_deleting_the_topic_resource_deletes_the_topic(op: Operator,
                                                             strand_cluster: Cluster) -> None:
    await op.create_topic("doomed", {"partitions": 2, "replicas": 2})
    await until_ready(op, "doomed")
    assert op.topic("doomed")["metadata"]["finalizers"] == [FINALIZER]
    assert op.exists("doomed")
    await op.delete_topic("doomed")
    await eventually(lambda: not op.exists("doomed"), 30)
    assert await described(strand_cluster, "doomed") is None
    await recorded(op, "doomed", "Deleted")


async def test_topics_are_served_without_the_stranduser_crd(
        kmock: kmock.KubernetesEmulator, strand_cluster: Cluster) -> None:
    """`helm upgrade` does not install a chart's new CRDs: an operator that also
    handles StrandUsers must serve Topics in a cluster that has only the Topic CRD."""
    config = OperatorConfig(strand_cluster.bootstrap, ("apps",), "k8s", resync_interval=1.0)
    async with running_operator(kmock, config, user_crd=False) as op:
        await op.create_topic("no-user-crd", {"partitions": 1, "replicas": 1})
        await until_ready(op, "no-user-crd")
    assert await described(strand_cluster, "no-user-crd") is not None


@pytest.mark.slow
async def test_a_controller_outage_gives_cluster_error_then_recovers(
        op: Operator, strand_cluster: Cluster) -> None:
    controllers = strand_cluster.controllers

    def stop_all() -> None:
        for controller in controllers:
            controller.stop()

    def start_all() -> None:
        for controller in controllers:
            controller.start()

    await asyncio.to_thread(stop_all)
    try:
        await op.create_topic("outage", {"partitions": 2, "replicas": 2})
        failed = await until_ready(op, "outage", "ClusterError", timeout=60)
        assert failed["status"] == "False" and "'outage'" in failed["message"]
        assert await described(strand_cluster, "outage") is None
        await recorded(op, "outage", "ClusterError", "Warning")
    finally:
        await asyncio.to_thread(start_all)
    await until_ready(op, "outage", timeout=60)
    assert await described(strand_cluster, "outage") is not None
    await recorded(op, "outage", "Ready")  # the recovery is recorded too


async def test_the_entry_point_runs_the_operator(kmock: kmock.KubernetesEmulator,
                                                 strand_cluster: Cluster,
                                                 tmp_path: Path) -> None:
    """``python -m strand_operator`` as a process, exactly as the image runs it: kopf's
    own login (a kubeconfig here, the service account in a pod), the production
    settings, the liveness endpoint, JSON logs."""
    declare_resources(kmock)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "kmock",
        "clusters": [{"name": "kmock", "cluster": {"server": str(kmock.url).rstrip("/")}}],
        "users": [{"name": "operator", "user": {"token": "test"}}],
        "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "operator"}}]}))
    port = free_port()
    log_path = tmp_path / "operator.log"
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "strand_operator", "--bootstrap", strand_cluster.bootstrap,
            "--namespace", "apps", "--cluster", "k8s", "--health-port", str(port),
            "--resync-interval", "1", stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(kubeconfig)})
    try:
        op = Operator(kmock, OperatorConfig(strand_cluster.bootstrap, ("apps",), "k8s"))
        await op.create_topic("via-entry", {"partitions": 2, "replicas": 2})
        await until_ready(op, "via-entry", timeout=60)
        assert await described(strand_cluster, "via-entry") is not None
        async with aiohttp.ClientSession() as session, session.get(
                f"http://127.0.0.1:{port}/healthz") as response:
            assert response.status == 200
    finally:
        if process.returncode is None:
            process.terminate()
        code = await asyncio.wait_for(process.wait(), 30)
    lines = [line for line in log_path.read_text().splitlines() if line.startswith("{")]
    assert code == 0 and lines, log_path.read_text()[-2000:]
    assert all("message" in json.loads(line) for line in lines)
