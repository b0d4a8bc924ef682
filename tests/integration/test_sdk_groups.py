"""SDK consumers in a group (real processes): subscribe, partitions shared once among
the members, a member leaving hands its partitions over, committed offsets resume a
new member where the group stopped (nothing re-read, nothing skipped), and a member
killed with SIGKILL loses its partitions to the others after its session timeout."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from strand import Admin, Consumer, NewTopic, Producer, TopicPartition
from tests.support.rebalance import Recorder

if TYPE_CHECKING:
    from tests.support.cluster import SdkCluster

TOPIC = "grouped"
PARTITIONS = 4


def consumer(cluster: SdkCluster) -> Consumer:
    return Consumer(cluster.bootstrap, group_id="readers", session_timeout_ms=6000,
                    heartbeat_interval_ms=500, auto_commit_interval_ms=200,
                    max_poll_interval_ms=20_000)


def test_a_group_shares_partitions_and_resumes_from_commits(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    cluster = sdk_cluster_factory(nodes=3, coordinators=1)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])
    with Producer(cluster.bootstrap, acks="all") as producer:
        for i in range(400):
            producer.send(TOPIC, f"v{i}".encode(), partition=i % PARTITIONS)
        producer.flush(timeout=30)

    seen: dict[str, list[tuple[int, int]]] = {"a": [], "b": []}
    recorders = {"a": Recorder(), "b": Recorder()}
    stop = threading.Event()

    def run(name: str, until: threading.Event) -> None:
        with consumer(cluster) as member:
            member.subscribe([TOPIC], listener=recorders[name])
            while not until.is_set():
                for records in member.poll(timeout_ms=200).values():
                    seen[name].extend((r.partition, r.offset) for r in records)

    stop_a = threading.Event()
    threads = [threading.Thread(target=run, args=("a", stop_a)),
               threading.Thread(target=run, args=("b", stop))]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        a, b = recorders["a"].owned, recorders["b"].owned
        if a and b and not a & b and len(a | b) == PARTITIONS \
                and len(seen["a"]) + len(seen["b"]) >= 400:
            break
        time.sleep(0.1)
    a, b = recorders["a"].owned, recorders["b"].owned
    assert a and b and not a & b, (a, b)  # each partition to exactly one member
    assert a | b == {TopicPartition(TOPIC, p) for p in range(PARTITIONS)}

    # a leaves (close() commits and leaves at once): b takes every partition over.
    stop_a.set()
    threads[0].join(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(recorders["b"].owned) < PARTITIONS:
        time.sleep(0.1)
    assert len(recorders["b"].owned) == PARTITIONS
    stop.set()
    threads[1].join(30)

    every = seen["a"] + seen["b"]
    assert {(p, o) for p, o in every} == {(p, o) for p in range(PARTITIONS) for o in range(100)}

    # A new member of the group starts at the committed offsets: nothing is re-read.
    with Producer(cluster.bootstrap, acks="all") as producer:
        for i in range(8):
            producer.send(TOPIC, f"late{i}".encode(), partition=i % PARTITIONS)
        producer.flush(timeout=30)
    late: list[bytes] = []
    with consumer(cluster) as member:
        member.subscribe(TOPIC)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(late) < 8:
            for records in member.poll(timeout_ms=300).values():
                late.extend(r.value or b"" for r in records)
        assert member.committed(TopicPartition(TOPIC, 0)) is not None
    assert sorted(late) == sorted(f"late{i}".encode() for i in range(8))


MEMBER_SCRIPT = """
import sys, time
from strand import Consumer
consumer = Consumer(sys.argv[1], group_id="killable", session_timeout_ms=3000,
                    heartbeat_interval_ms=300, max_poll_interval_ms=20000)
consumer.subscribe(["{topic}"])
while True:
    consumer.poll(timeout_ms=200)
"""


def test_a_killed_members_partitions_go_to_the_others_after_its_session(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    cluster = sdk_cluster_factory(nodes=3, coordinators=1)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("killable", PARTITIONS, 3)])
    victim = subprocess.Popen(
        [sys.executable, "-c", MEMBER_SCRIPT.format(topic="killable"), cluster.bootstrap],
        stdout=subprocess.DEVNULL)
    try:
        recorder = Recorder()
        with Consumer(cluster.bootstrap, group_id="killable", session_timeout_ms=3000,
                      heartbeat_interval_ms=300, max_poll_interval_ms=20_000) as survivor:
            survivor.subscribe(["killable"], listener=recorder)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not (
                    0 < len(recorder.owned) < PARTITIONS):
                survivor.poll(timeout_ms=200)
            shared = set(recorder.owned)
            assert 0 < len(shared) < PARTITIONS, shared  # the victim holds the others
            victim.kill()  # SIGKILL: no LeaveGroup, only the session timeout tells
            killed_at = time.monotonic()
            while time.monotonic() < killed_at + 30 and len(recorder.owned) < PARTITIONS:
                survivor.poll(timeout_ms=200)
            took = time.monotonic() - killed_at
            assert len(recorder.owned) == PARTITIONS
            assert took >= 2.0, took  # not before the victim's session could expire
    finally:
        victim.kill()
        victim.wait()
