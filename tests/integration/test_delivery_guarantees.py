"""Issue 12, point 7: the README's delivery-guarantees table, row by row (MQTT's
three QoS levels mapped to Strand's producer and consumer settings). Each row is
driven through a real failure, and the test shows what the row promises and what it
allows: the loss at most once allows, the duplicate at least once allows, and
neither for exactly once.

The consumer side of each row runs as its own process
(tests/support/delivery_worker.py) that crashes (``os._exit``) at the point where
its pattern is weakest; a fresh instance then takes over as a user's restarted
service would. The producer side of at least once / exactly once (lost answers,
retries with and without idempotence) is in test_sdk_idempotent_producer.py.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from strand import Admin, Consumer, NewTopic, Producer, TopicPartition
from tests.support.cluster import SdkCluster, unique
from tests.support.delivery_worker import CRASHED

RECORDS = 10
CRASH_AFTER = 4
# The crashed member stays in its group until its session times out; the minimum
# keeps the hand-over short.
SESSION_MS = 6_000


@pytest.fixture(scope="module")
def cluster(txn_cluster: SdkCluster) -> SdkCluster:
    return txn_cluster


def _input(cluster: SdkCluster, topic: str, *outputs: str) -> list[bytes]:
    values = [b"m%d" % i for i in range(RECORDS)]
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(t, 1, 1) for t in (topic, *outputs)])
    with Producer(cluster.bootstrap) as producer:
        for value in values:
            producer.send(topic, value)
    return values


def _crash(cluster: SdkCluster, mode: str, group: str, topic: str, out: str) -> None:
    worker = subprocess.run(
        [sys.executable, "-m", "tests.support.delivery_worker", mode, cluster.bootstrap,
         group, topic, str(CRASH_AFTER), out],
        capture_output=True, text=True, timeout=120)
    assert worker.returncode == CRASHED, worker.stderr[-3000:]


def _group_consumer(cluster: SdkCluster, group: str, topic: str,
                    isolation: str = "read_uncommitted") -> Consumer:
    consumer = Consumer(cluster.bootstrap, group_id=group, enable_auto_commit=False,
                        session_timeout_ms=SESSION_MS, fetch_max_wait_ms=100,
                        isolation_level=isolation)  # type: ignore[arg-type]
    consumer.subscribe([topic])
    return consumer


def _drain(consumer: Consumer, handle: Callable[[bytes], None], until: Callable[[], bool],
           commit_each: bool) -> None:
    """Poll (joining the group after the crashed member's session ends) until
    ``until()``; each batch handled, then committed when ``commit_each``."""
    deadline = time.monotonic() + 60
    while not until():
        assert time.monotonic() < deadline, "the restarted consumer did not catch up"
        for records in consumer.poll(timeout_ms=200).values():
            for record in records:
                handle(record.value or b"")
            if commit_each:
                consumer.commit()


def _read_all(cluster: SdkCluster, topic: str, isolation: str) -> list[bytes]:
    with Consumer(cluster.bootstrap, isolation_level=isolation,  # type: ignore[arg-type]
                  fetch_max_wait_ms=100) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        out: list[bytes] = []
        deadline = time.monotonic() + 30
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                out += [r.value or b"" for r in records]
        return out


def test_at_most_once_an_acknowledged_acks0_record_can_vanish(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    """QoS 0, producer side: with acks=0 a send counts as done once it is on the
    wire. The partition's only replica is frozen when it arrives and dies before
    reading it: the send succeeded, the record is nowhere."""
    cluster = sdk_cluster_factory(nodes=1)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("qos0-producer", 1, 1)])
    node = cluster.storage[0]
    with Producer(cluster.bootstrap, acks=0, enable_idempotence=False,
                  linger_ms=0) as producer:
        assert producer.send("qos0-producer", b"kept").result(timeout=10).offset == -1
        time.sleep(0.5)  # well on disk before the fault
        node.pause()
        try:
            assert producer.send("qos0-producer", b"vanished").result(timeout=10).offset == -1
            time.sleep(0.5)  # on the wire, in the frozen node's socket buffer
        finally:
            node.kill()
        producer.close(timeout=0)
    node.start()
    assert _read_all(cluster, "qos0-producer", "read_uncommitted") == [b"kept"]


def test_at_most_once_commit_before_processing_loses_on_a_crash(
        cluster: SdkCluster) -> None:
    """QoS 0, consumer side: commit, then process. A crash in between skips the
    committed records for good: lost, never duplicated."""
    group = unique("qos0")
    topic = f"{group}-in"
    values = _input(cluster, topic)
    _crash(cluster, "commit-first", group, topic, "-")
    processed: list[bytes] = []
    with _group_consumer(cluster, group, topic) as consumer:
        _drain(consumer, processed.append, lambda: len(processed) >= RECORDS - CRASH_AFTER,
               commit_each=True)
    assert processed == values[CRASH_AFTER:]
    assert not [v for v, n in Counter(processed).items() if n > 1]


def test_at_least_once_processing_before_commit_repeats_on_a_crash(
        cluster: SdkCluster, tmp_path: Path) -> None:
    """QoS 1, consumer side: process, then commit. A crash in between processes the
    same records again: duplicated, never lost."""
    group = unique("qos1")
    topic = f"{group}-in"
    values = _input(cluster, topic)
    out = tmp_path / "processed"
    _crash(cluster, "process-first", group, topic, str(out))
    processed = out.read_bytes().splitlines()
    assert processed == values[:CRASH_AFTER]

    def process(value: bytes) -> None:
        processed.append(value)

    with _group_consumer(cluster, group, topic) as consumer:
        _drain(consumer, process, lambda: len(processed) >= CRASH_AFTER + RECORDS,
               commit_each=True)
    assert set(processed) == set(values), "at least once lost a record"
    twice = sorted(v for v, n in Counter(processed).items() if n > 1)
    assert twice == values[:CRASH_AFTER]


def test_exactly_once_a_crashed_transaction_leaves_no_trace(cluster: SdkCluster) -> None:
    """QoS 2: read_committed in, a transactional producer out, the offsets sent in
    the transaction. The worker crashes after writing its outputs and offsets but
    before commit; the restarted instance (same transactional id) fences it, its
    transaction is aborted, and every input yields exactly one committed output."""
    group = unique("qos2")  # also the transactional id (tests/support/delivery_worker.py)
    topic, output = f"{group}-in", f"{group}-out"
    values = _input(cluster, topic, output)
    _crash(cluster, "transactional", group, topic, output)
    with Producer(cluster.bootstrap, transactional_id=group) as producer, \
            _group_consumer(cluster, group, topic, "read_committed") as consumer:
        producer.init_transactions()
        done: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(done) < RECORDS:
            assert time.monotonic() < deadline, "the restarted pipeline did not catch up"
            polled = consumer.poll(timeout_ms=200)
            if not polled:
                continue
            producer.begin_transaction()
            offsets: dict[TopicPartition, int] = {}
            for tp, records in polled.items():
                for record in records:
                    producer.send(output, record.value, key=record.key)
                    done.append(record.value or b"")
                offsets[tp] = records[-1].offset + 1
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            producer.commit_transaction()
        assert consumer.committed(TopicPartition(topic, 0)) == RECORDS
    assert sorted(_read_all(cluster, output, "read_committed")) == sorted(values)
    # The crashed attempt did write its outputs: read_uncommitted sees them too.
    uncommitted = _read_all(cluster, output, "read_uncommitted")
    assert len(uncommitted) == RECORDS + CRASH_AFTER
    assert sorted(set(uncommitted)) == sorted(values)
