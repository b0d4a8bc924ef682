"""``strand bench produce --transactional-id ID --transaction-records N`` (issue 12,
point 6) against a real cluster with a transaction coordinator: it commits every N
records (the last transaction holds the rest), a read_committed consumer then sees
every record, and settings that cannot be transactional are refused up front."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable

from strand import Admin, Consumer, NewTopic, TopicPartition
from strand.launcher import REPO
from tests.support.cluster import SdkCluster
from tests.support.waiting import wait_until

TOPIC = "bench-txn"


def bench(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "strand.cli.main", "--bootstrap",
                           address, "bench", "produce", TOPIC, *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)


def committed_records(cluster: SdkCluster, partitions: int) -> int:
    """How many records a read_committed consumer reads from the beginning."""
    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
    seen = 0
    with Consumer(cluster.bootstrap, isolation_level="read_committed",
                  auto_offset_reset="earliest") as consumer:
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)  # read_committed: the LSO

        def at_end() -> bool:
            nonlocal seen
            seen += sum(len(r) for r in consumer.poll(timeout_ms=200).values())
            return all(consumer.position(tp) >= ends[tp] for tp in tps)

        wait_until(at_end, 30, "a read_committed consumer at the end of the topic")
    return seen


def test_bench_produce_commits_every_n_records(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    cluster = sdk_cluster_factory(nodes=1, txn_coordinators=1)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 3, 1)])
    done = bench(cluster.bootstrap, "--records", "2500", "--record-size", "100",
                 "--transactional-id", "bench-tx", "--transaction-records", "1000", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["records"] == 2500 and result["records_per_s"] > 0
    assert result["idempotent"] is True
    assert (result["transactional_id"], result["transaction_records"]) == ("bench-tx", 1000)
    assert result["transactions"] == math.ceil(2500 / 1000)
    assert 0 < result["commit_latency_ms"]["p50"] <= result["commit_latency_ms"]["p99"]
    assert committed_records(cluster, 3) == 2500
    # The same id again: a new instance (a bumped epoch), one transaction for the run.
    again = bench(cluster.bootstrap, "--records", "300", "--record-size", "100",
                  "--transactional-id", "bench-tx", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["transactions"] == 1
    assert committed_records(cluster, 3) == 2800


def test_bench_produce_refuses_settings_that_cannot_be_transactional() -> None:
    for args, says in [
            (("--transaction-records", "10"), "--transaction-records needs --transactional-id"),
            (("--transactional-id", "t", "--acks", "1"), "--transactional-id needs --acks all"),
            (("--transactional-id", "t", "--disable-idempotence"), "the idempotent producer")]:
        refused = bench("127.0.0.1:1", "--records", "10", *args)  # refused before connecting
        assert refused.returncode == 2, (args, refused.stderr)
        assert says in refused.stderr, (args, refused.stderr)
