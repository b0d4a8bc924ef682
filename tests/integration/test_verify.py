"""``strand verify produce|consume`` (Kafka's VerifiableProducer/VerifiableConsumer)
against real failures: with acks=all it reports nothing lost through a leader's kill;
with acks=0 and an unclean leader election it reports the records the cluster told the
producer it had and then lost (exit status 1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from strand import Admin, NewTopic
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from tests.support.cluster import SdkCluster

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def strand(cluster: SdkCluster, *args: str) -> list[str]:
    return [sys.executable, "-m", "strand.cli.main", "--bootstrap", cluster.bootstrap, *args]


def run(command: list[str]) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=180,
                          env=os.environ, check=False)
    assert done.stdout.strip(), done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout)


def leader_of(admin: Admin, topic: str, partition: int = 0) -> int | None:
    return admin.describe_topics([topic])[0].partitions[partition].leader


def test_nothing_is_lost_through_a_leader_kill_with_acks_all(
        sdk_cluster_factory: Callable[..., SdkCluster], tmp_path: Path) -> None:
    cluster = sdk_cluster_factory(nodes=3)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("verified", 3, 3, config={"min.insync.replicas": "2"})])
        victim = leader_of(admin, "verified")
    assert victim is not None
    acked = tmp_path / "acked.txt"
    producing = subprocess.Popen(
        strand(cluster, "verify", "produce", "verified", "--records", "6000", "--throughput",
               "1500", "--run-id", "leader-kill", "--acked-file", str(acked), "--json"),
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    cluster.storage[victim - 1].kill()  # mid-run: the leader of partition 0 (and maybe more)
    out, errors = producing.communicate(timeout=180)
    assert producing.returncode == 0, errors[-3000:]
    produced = json.loads(out)
    assert produced["acknowledged"] == 6000 and produced["failed"] == 0, produced
    status, report = run(strand(cluster, "verify", "consume", "verified", "--run-id",
                                "leader-kill", "--acked-file", str(acked), "--json"))
    assert status == 0, report
    assert report["lost"] == 0 and report["out_of_order"] == 0 and report["duplicated"] == 0
    assert report["distinct"] == 6000 and report["latency_ms"]["p50"] > 0


def test_the_loss_of_acks_0_and_an_unclean_election_is_reported(
        sdk_cluster_factory: Callable[..., SdkCluster], tmp_path: Path) -> None:
    cluster = sdk_cluster_factory(nodes=2)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("unsafe", 1, 2, replica_assignment={0: [1, 2]}, config={
            "unclean.leader.election.enable": "true", "min.insync.replicas": "1"})])
        follower = cluster.storage[1]
        follower.kill()
        wait_until(lambda: admin.describe_topics(["unsafe"])[0].partitions[0].isr == (1,),
                   30, "the ISR to shrink to the leader")
        acked = tmp_path / "acked.txt"
        status, produced = run(strand(
            cluster, "verify", "produce", "unsafe", "--records", "500", "--acks", "0",
            "--run-id", "unclean", "--acked-file", str(acked), "--json"))
        assert status == 0 and produced["acknowledged"] == 500, produced
        cluster.storage[0].kill()  # the only replica with the records
        cluster.storage[1] = cluster.storage_node(2, port=follower.listen_port).start()
        wait_until(lambda: leader_of(admin, "unsafe") == 2, 30,
                   "the out-of-sync replica to lead (unclean election)")
    status, report = run(strand(cluster, "verify", "consume", "unsafe", "--run-id", "unclean",
                                "--acked-file", str(acked), "--json"))
    assert status == 1, report
    assert report["lost"] == 500 and report["acknowledged"] == 500, report
