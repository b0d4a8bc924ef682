"""Replication with real processes: RF 3, acks=all, min.insync.replicas=2.

* Followers copy the leader's batches byte for byte, and the ISR is every replica.
* SIGKILL of a partition leader mid-stream: the controller elects another in-sync
  replica (after the lease TTL), producers retry there, and every acknowledged
  record is read back at its acknowledged offset.
* The killed node restarts, truncates what diverged, catches up, rejoins the ISR
  and leads again the partitions it is the preferred replica of.
* SIGTERM of a leader (controlled shutdown) fails no produce at all.
* Reassignment: new replicas copy first, then the replica list switches (RF 1 -> 3,
  then off the leader's node to RF 2), and the removed node deletes its copy.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from strand import Admin, Consumer, NewTopic, Producer, TopicPartition
from strand.errors import InvalidReplicaAssignmentError
from strand.producer import RecordFuture
from tests.support.cluster import placement
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from tests.support.cluster import SdkCluster

PARTITIONS = 3
CONFIG = {"min.insync.replicas": "2"}


def _log_bytes(data_dir: Path, topic: str, partition: int) -> bytes:
    directory = data_dir / f"{topic}-{partition}"
    return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))


def _read_all(cluster: SdkCluster, topic: str,
              partitions: int = PARTITIONS) -> dict[tuple[int, int], bytes]:
    seen: dict[tuple[int, int], bytes] = {}
    with Consumer(cluster.bootstrap) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(
                consumer.position(tp) < ends[tp] for tp in tps):
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    key = (record.partition, record.offset)
                    assert key not in seen, f"offset {key} read twice"
                    seen[key] = record.value or b""
    return seen


def _produce_through(cluster: SdkCluster, topic: str, count: int,
                     fault: Callable[[], None]) -> list[RecordFuture]:
    """Send ``count`` records (acks=all) and run ``fault`` a quarter of the way in."""
    futures: list[RecordFuture] = []
    quarter = threading.Event()
    with Producer(cluster.bootstrap, acks="all", linger_ms=5, batch_size=8192,
                  request_timeout_ms=8000, delivery_timeout_ms=60_000,
                  retry_backoff_ms=100) as producer:
        def produce() -> None:
            for i in range(count):
                futures.append(producer.send(topic, f"v{i}".encode(), partition=i % PARTITIONS))
                if i == count // 4:
                    quarter.set()
                if i % 100 == 0:
                    time.sleep(0.02)

        writer = threading.Thread(target=produce)
        writer.start()
        assert quarter.wait(30)
        fault()
        writer.join(120)
        assert not writer.is_alive()
        producer.flush(timeout=90)
    return futures


def _check_acknowledged(cluster: SdkCluster, topic: str, futures: list[RecordFuture]) -> None:
    """Every acknowledged record is read back at its acknowledged offset (record i was
    sent with value ``v<i>``)."""
    read = _read_all(cluster, topic)
    lost, wrong = [], []
    for i, future in enumerate(futures):
        if future.exception() is not None:
            continue
        metadata = future.result()
        where = (metadata.partition, metadata.offset)
        if where not in read:
            lost.append(where)
        elif read[where] != f"v{i}".encode():
            wrong.append((where, read[where]))
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:5]}"
    assert not wrong, f"{len(wrong)} offsets hold another record, e.g. {wrong[:5]}"


def test_followers_copy_the_leader_byte_for_byte(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    cluster = sdk_cluster_factory(nodes=3)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("copied", PARTITIONS, 3, config=CONFIG)])
    with Producer(cluster.bootstrap, acks="all", linger_ms=2, batch_size=4096) as producer:
        futures = [producer.send("copied", b"x" * (i % 300), key=str(i).encode())
                   for i in range(3000)]
        producer.flush(timeout=60)
    assert all(f.exception() is None for f in futures)
    state = placement(cluster, "copied")
    assert all(sorted(isr) == [1, 2, 3] for _, isr in state.values()), state

    def identical() -> bool:
        return all(len({_log_bytes(cluster.data_dir(n), "copied", p) for n in (1, 2, 3)})
                   == 1 for p in range(PARTITIONS))

    wait_until(identical, 20, "every replica's log to equal its leader's")
    assert sum(len(_log_bytes(cluster.data_dir(1), "copied", p))
               for p in range(PARTITIONS)) > 400_000


def test_leader_sigkill_loses_no_acknowledged_record(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    cluster = sdk_cluster_factory(nodes=3)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("killed", PARTITIONS, 3, config=CONFIG)])
    victim_id = placement(cluster, "killed")[0][0]
    assert victim_id is not None
    victim = cluster.storage[victim_id - 1]
    killed: list[float] = []

    def kill() -> None:
        victim.kill()
        killed.append(time.monotonic())

    futures = _produce_through(cluster, "killed", 3000, kill)
    failed = [f.exception() for f in futures if f.exception() is not None]
    assert not failed, f"{len(failed)} records failed, e.g. {failed[0]!r}"
    state = placement(cluster, "killed")
    assert all(leader not in (None, victim_id) for leader, _ in state.values()), state
    assert all(victim_id not in isr for _, isr in state.values()), state
    _check_acknowledged(cluster, "killed", futures)

    # The node comes back: it catches up and rejoins every ISR.
    cluster.storage[victim_id - 1] = cluster.storage_node(
        victim_id, port=victim.listen_port).start()
    wait_until(lambda: all(len(isr) == 3 for _, isr in placement(cluster, "killed").values()),
               40, "the restarted node to rejoin every ISR")
    # And leads again where it is the preferred replica (restored every 2 s here).
    with Admin(cluster.bootstrap) as admin:
        preferred = {p.partition: p.replicas[0]
                     for p in admin.describe_topics(["killed"])[0].partitions}
    assert victim_id in preferred.values()
    wait_until(lambda: {p: leader for p, (leader, _) in placement(cluster, "killed").items()}
               == preferred, 20, "preferred leaders to be restored")
    wait_until(lambda: all(
        len({_log_bytes(cluster.data_dir(n), "killed", p) for n in (1, 2, 3)}) == 1
        for p in range(PARTITIONS)), 20, "the replicas to be identical again")


def test_leader_sigterm_fails_no_produce(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    cluster = sdk_cluster_factory(nodes=3)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("moved", PARTITIONS, 3, config=CONFIG)])
    victim_id = placement(cluster, "moved")[0][0]
    assert victim_id is not None
    victim = cluster.storage[victim_id - 1]
    futures = _produce_through(cluster, "moved", 3000, victim.stop)
    failed = [f.exception() for f in futures if f.exception() is not None]
    assert not failed, f"{len(failed)} records failed, e.g. {failed[0]!r}"
    assert victim.process is not None and victim.process.returncode == 0
    _check_acknowledged(cluster, "moved", futures)


def test_reassignment_copies_then_switches_and_changes_the_replication_factor(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    cluster = sdk_cluster_factory(nodes=3)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("moving", 1, 1, replica_assignment={0: [1]})])
        with Producer(cluster.bootstrap, acks="all") as producer:
            for i in range(2000):
                producer.send("moving", f"v{i}".encode(), partition=0)
            producer.flush(timeout=30)

        # RF 1 -> 3: nodes 2 and 3 copy the data, join the ISR, then the list switches.
        admin.alter_partition_reassignments({("moving", 0): [1, 2, 3]})
        wait_until(lambda: not admin.list_partition_reassignments(["moving"]), 30,
                   "the reassignment to complete")
        part = admin.describe_topics(["moving"])[0].partitions[0]
        assert part.replicas == (1, 2, 3) and sorted(part.isr) == [1, 2, 3]
        wait_until(lambda: len({_log_bytes(cluster.data_dir(n), "moving", 0)
                                for n in (1, 2, 3)}) == 1, 20, "identical copies")

        # Move off node 1 (the leader) to RF 2: leadership moves, node 1 deletes its copy.
        admin.alter_partition_reassignments({("moving", 0): [3, 2]})
        wait_until(lambda: not admin.list_partition_reassignments(["moving"]), 30,
                   "the second reassignment to complete")
        part = admin.describe_topics(["moving"])[0].partitions[0]
        assert part.replicas == (3, 2) and part.leader in (2, 3) and 1 not in part.isr
        wait_until(lambda: not (cluster.data_dir(1) / "moving-0").exists(), 20,
                   "node 1 to delete its copy")

        # Bad targets are refused with typed errors and change nothing.
        with pytest.raises(InvalidReplicaAssignmentError):
            admin.alter_partition_reassignments({("moving", 0): [2, 2]})
        with pytest.raises(InvalidReplicaAssignmentError):
            admin.alter_partition_reassignments({("moving", 0): [2, 9]})
    read = _read_all(cluster, "moving", partitions=1)
    assert [read[(0, i)] for i in range(2000)] == [f"v{i}".encode() for i in range(2000)]
