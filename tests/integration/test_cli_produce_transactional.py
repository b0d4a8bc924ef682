"""``strand produce --transactional-id`` and ``strand consume --isolation-level``
through the real command (issue 12, point 6): the input goes in transactions
(``--transaction-records N`` per transaction, the rest committed at EOF); a bad
line or Ctrl-C aborts the open transaction and stops, committed ones stay; a
read_committed consumer prints committed records only, a read_uncommitted one the
aborted ones too."""

from __future__ import annotations

import signal
import time

import pytest

from strand import Admin, Consumer, NewTopic, Producer, TopicPartition
from tests.integration.test_cli_console import popen, strand
from tests.support.cluster import SdkCluster, unique
from tests.support.waiting import wait_until


@pytest.fixture(scope="module")
def cluster(txn_cluster: SdkCluster) -> SdkCluster:
    return txn_cluster


def create(cluster: SdkCluster, topic: str, partitions: int = 2) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def consume(cluster: SdkCluster, topic: str, isolation: str) -> list[str]:
    done = strand(cluster, "consume", topic, "--from-beginning", "--isolation-level",
                  isolation, "--timeout-ms", "3000")
    assert done.returncode == 0, done.stderr
    return sorted(done.stdout.split())


def test_produce_in_transactions_and_consume_committed_only(cluster: SdkCluster) -> None:
    topic = unique("cli-txn")
    create(cluster, topic)
    done = strand(cluster, "produce", topic, "--transactional-id", unique("cli-tx-1"),
                  "--transaction-records", "2", "--key-separator", ":",
                  stdin="".join(f"k{i}:v{i}\n" for i in range(5)))
    assert done.returncode == 0, done.stderr
    assert f"sent 5 records to {topic} in 3 transactions" in done.stderr
    assert consume(cluster, topic, "read_committed") == [f"v{i}" for i in range(5)]

    # A transaction aborted after its records were written: read_uncommitted only.
    with Producer(cluster.bootstrap, transactional_id=unique("cli-tx-sdk")) as producer:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send(topic, b"aborted", partition=0)
        producer.flush(30)
        producer.abort_transaction(30)
    assert consume(cluster, topic, "read_committed") == [f"v{i}" for i in range(5)]
    assert consume(cluster, topic, "read_uncommitted") == sorted(
        ["aborted", *(f"v{i}" for i in range(5))])
    grouped = strand(cluster, "consume", topic, "--group", unique("cli-txn-readers"),
                     "--isolation-level", "read_committed", "--idle-timeout-ms", "6000")
    assert sorted(grouped.stdout.split()) == [f"v{i}" for i in range(5)], grouped.stderr


def test_a_bad_line_aborts_the_open_transaction_and_keeps_the_committed(
        cluster: SdkCluster) -> None:
    topic = unique("cli-txn-bad")
    create(cluster, topic)
    done = strand(cluster, "produce", topic, "--transactional-id", unique("cli-tx-2"),
                  "--transaction-records", "2", "--line-format", "%k:%s",
                  stdin="k1:v1\nk2:v2\nk3:v3\nno separator here\nk5:v5\n")
    assert done.returncode == 1, done.stderr
    assert "line 4" in done.stderr
    assert "aborted the open transaction (2 records)" in done.stderr
    assert f"committed 2 records to {topic} in 1 transactions" in done.stderr
    assert consume(cluster, topic, "read_committed") == ["v1", "v2"]


def test_ctrl_c_aborts_the_open_transaction(cluster: SdkCluster) -> None:
    topic = unique("cli-txn-int")
    create(cluster, topic, 1)
    child = popen(cluster, "produce", topic, "--transactional-id", unique("cli-tx-3"),
                  "--transaction-records", "1000")
    assert child.stdin is not None
    for i in range(3):
        child.stdin.write(f"open-{i}\n")
    child.stdin.flush()
    # Wait until the records are in the log (written, not committed), then interrupt.
    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as reader:
        reader.assign([TopicPartition(topic, 0)])
        seen: list[bytes] = []

        def written() -> bool:
            for records in reader.poll(timeout_ms=200).values():
                seen.extend(r.value or b"" for r in records)
            return len(seen) >= 3
        # linger: the records are sent within 5 ms; the input stays open meanwhile
        wait_until(written, 30, "the open transaction's records in the log")
    # Input still open, as at a terminal: the interrupt alone must stop it.
    child.send_signal(signal.SIGINT)
    child.wait(timeout=30)
    _, stderr = child.communicate(timeout=30)
    assert child.returncode == 130, stderr
    assert "interrupted: aborted the open transaction (3 records)" in stderr
    time.sleep(0.5)
    assert consume(cluster, topic, "read_committed") == []
    assert consume(cluster, topic, "read_uncommitted") == ["open-0", "open-1",
                                                                   "open-2"]
