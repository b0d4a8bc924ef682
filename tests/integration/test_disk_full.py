"""A storage node whose disk fills up (issue 11, point 4), on a real 20 MB tmpfs.

Node 1's data directory is a tmpfs the test mounts and fills. Node 1 leads two
partitions (acks=1 and acks=all with min.insync.replicas=2) and follows a third.
Expected, as Kafka does for a failed log directory: the write that does not fit
fails cleanly with KAFKA_STORAGE_ERROR and leaves no partial batch; leadership moves
to an in-sync replica and node 1 leaves the ISRs; acks=all goes on with the two
other replicas. Once space is back node 1 recovers by itself (no restart): it
rejoins every ISR, and every acknowledged record is on every replica.
"""

from __future__ import annotations

import contextlib
import os
from functools import partial
from pathlib import Path

from strand import Admin, Consumer, NewTopic, Producer, TopicPartition
from strand.errors import CorruptRecordError, ErrorCode, StorageError
from strand.launcher import Cluster
from tests.support.cluster import cluster_spec, placement
from tests.support.log_files import torn_segments, values_on_disk
from tests.support.tmpfs import small_tmpfs
from tests.support.waiting import poll_records, wait_until

ACKS1, ACKS_ALL, FOLLOWED = "full-acks1", "full-acksall", "full-followed"
RECORD = 20_000  # bytes: larger than any scrap of space a failed write leaves
FREE_BEFORE_FILLING = 3 << 20


def _send_until_refused(cluster: Cluster, topic: str, acks: int | str,
                        acknowledged: list[bytes]) -> StorageError:
    """Send records one by one (no retries) until the leader refuses one; the error."""
    with Producer(cluster.bootstrap, acks=acks, retries=0, linger_ms=0) as producer:
        for i in range(2000):
            value = f"{topic}-{i:05d}-".encode().ljust(RECORD, b".")
            try:
                producer.send(topic, value).result(timeout=30)
            except StorageError as exc:
                return exc
            acknowledged.append(value)
    raise AssertionError(f"{topic}: the full disk refused no record")


def _holds(data_dir: Path, topic: str, values: list[bytes]) -> bool:
    """The replica's segment files hold exactly ``values``."""
    with contextlib.suppress(CorruptRecordError):  # a batch being appended right now
        return values_on_disk(data_dir / f"{topic}-0") == values
    return False


def test_a_full_disk_moves_leadership_and_heals_by_itself(tmp_path: Path) -> None:
    spec = cluster_spec(tmp_path, "diskfull", storage_nodes=3,
                        storage_args=("--disk-probe-interval", "0.5",
                                      "--replica-lag-time-max-ms", "4000"))
    cluster = Cluster(spec)
    with small_tmpfs(cluster.data_dir(1), "20m") as disk:
        filler = disk / "filler"
        try:
            cluster.start()
            with Admin(cluster.bootstrap) as admin:
                admin.create_topics([
                    NewTopic(ACKS1, 1, 3, replica_assignment={0: [1, 2, 3]}),
                    NewTopic(ACKS_ALL, 1, 3, replica_assignment={0: [1, 2, 3]},
                             config={"min.insync.replicas": "2"}),
                    NewTopic(FOLLOWED, 1, 3, replica_assignment={0: [2, 1, 3]}),
                ])
            for topic, leader in ((ACKS1, 1), (ACKS_ALL, 1), (FOLLOWED, 2)):
                wait_until(partial(_placed, cluster, topic, {leader}, {1, 2, 3}), 30,
                           f"{topic} to be led by node {leader} and fully in sync")
            acked: dict[str, list[bytes]] = {ACKS1: [], ACKS_ALL: [], FOLLOWED: []}
            with Producer(cluster.bootstrap, acks="all") as producer:
                for topic in acked:
                    value = f"{topic}-before".encode()
                    producer.send(topic, value).result(timeout=30)
                    acked[topic].append(value)
            free = _free_bytes(disk)
            filler.write_bytes(bytes(max(0, free - FREE_BEFORE_FILLING)))

            # The disk fills: clean KAFKA_STORAGE_ERROR, no torn batch.
            refused = _send_until_refused(cluster, ACKS1, 1, acked[ACKS1])
            assert refused.code == ErrorCode.KAFKA_STORAGE_ERROR
            assert "No space left on device" in str(refused)
            refused = _send_until_refused(cluster, ACKS_ALL, "all", acked[ACKS_ALL])
            assert refused.code == ErrorCode.KAFKA_STORAGE_ERROR
            assert torn_segments(disk) == []

            # Leadership moves to in-sync replicas; node 1 leaves the ISRs.
            for topic in (ACKS1, ACKS_ALL):
                wait_until(partial(_placed, cluster, topic, {2, 3}, {2, 3}), 30,
                           f"{topic}'s leadership and ISR to leave the full node")
            with Producer(cluster.bootstrap, acks=1) as producer:
                value = b"acks=1 on the new leader"
                producer.send(ACKS1, value).result(timeout=30)
                acked[ACKS1].append(value)
            with Producer(cluster.bootstrap, acks="all") as producer:
                for topic in (ACKS_ALL, FOLLOWED):  # node 1 cannot follow FOLLOWED any more
                    for i in range(3):
                        value = f"{topic}-acks=all without node 1-{i}".encode()
                        producer.send(topic, value.ljust(RECORD, b".")).result(timeout=30)
                        acked[topic].append(value.ljust(RECORD, b"."))
            wait_until(partial(_placed, cluster, FOLLOWED, {2}, {2, 3}), 30,
                       "the full follower to leave the ISR")
            assert torn_segments(disk) == []

            # Space comes back: node 1 recovers by itself and rejoins every ISR.
            filler.unlink()
            for topic in acked:
                wait_until(partial(_placed, cluster, topic, {1, 2, 3}, {1, 2, 3}), 60,
                           f"node 1 to rejoin the ISR of {topic}")
            with Producer(cluster.bootstrap, acks="all") as producer:
                for topic in acked:
                    value = f"{topic}-after recovery".encode()
                    producer.send(topic, value).result(timeout=30)
                    acked[topic].append(value)
            for topic, values in acked.items():
                for node in (1, 2, 3):
                    wait_until(partial(_holds, cluster.data_dir(node), topic, values), 30,
                               f"node {node} to hold every acknowledged record of {topic}")
                with Consumer(cluster.bootstrap) as consumer:
                    consumer.assign([TopicPartition(topic, 0)])
                    read = poll_records(consumer, len(values), timeout=30)
                assert [r.value for r in read] == values
            for node in (1, 2, 3):
                assert torn_segments(cluster.data_dir(node)) == []
        finally:
            cluster.stop()


def _placed(cluster: Cluster, topic: str, leaders: set[int], isr: set[int]) -> bool:
    """The partition is led by one of ``leaders`` and its ISR is exactly ``isr``."""
    leader, current = placement(cluster, topic)[0]
    return leader in leaders and set(current) == isr


def _free_bytes(path: Path) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize
