"""Bytes flipped in a sealed segment while a node was stopped (issue 11, point 6):
found before they are served (the fetch path verifies every batch) or by the
background scrub, never served, and repaired from an in-sync replica.

Three storage nodes, one partition on all three, small segments. Node 1 or 3 is
stopped, one byte flipped inside a batch of one of its sealed segments, and it is
started again. Then consumers get every record intact (no CORRUPT_MESSAGE), the node
logs the damage, cuts its log there and fetches the rest again from the leader, so
that its log is byte for byte the other replicas', and it is back in the ISR.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from strand import Admin, Consumer, NewTopic, Producer, TopicPartition
from strand.launcher import Cluster
from tests.support.cluster import placement, sdk_spec
from tests.support.waiting import poll_until, wait_until

TOPIC = "integrity"
RECORDS = 600
SEGMENT_BYTES = 16 * 1024


def value(i: int) -> bytes:
    return f"{i:06d}".encode() * 30


def log_bytes(data_dir: Path) -> bytes | None:
    """The partition's batches as one byte string (segment boundaries may differ
    between replicas; the batches may not); None if a segment went away while being
    read (a repair or a retention swaps segments: the caller polls again)."""
    directory = data_dir / f"{TOPIC}-0"
    try:
        return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))
    except FileNotFoundError:
        return None


def flip_a_byte_in_a_sealed_segment(data_dir: Path) -> Path:
    """Flip one byte inside the records of a batch in the middle of the second
    segment (sealed: the log has more after it); returns the segment's path."""
    segments = sorted((data_dir / f"{TOPIC}-0").glob("*.log"))
    assert len(segments) >= 3, f"expected several segments, got {segments}"
    path = segments[1]
    data = bytearray(path.read_bytes())
    position = 0
    while True:  # to the batch holding the segment's middle byte
        size = int.from_bytes(data[position + 8 : position + 12], "big") + 12
        if position + size > len(data) // 2:
            break
        position += size
    target = position + 61 + (size - 61) // 2  # past the 61-byte header: under the CRC
    data[target] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


def cluster_of_three(tmp_path: Path, *storage_args: str) -> Cluster:
    """Not started: ``with`` starts and stops it."""
    spec = replace(sdk_spec(tmp_path, nodes=3, name="integrity"), storage_args=storage_args)
    return Cluster(spec)


def create_and_fill(cluster: Cluster) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, config={"segment.bytes": str(SEGMENT_BYTES)},
                                      replica_assignment={0: [1, 2, 3]})])
    # One request in flight: a retried batch cannot land after later ones.
    with Producer(cluster.bootstrap, acks="all", batch_size=2048, linger_ms=0,
                  max_in_flight_requests=1) as producer:
        for i in range(RECORDS):
            producer.send(TOPIC, value(i), partition=0)
        producer.flush(timeout=60)
    wait_until(lambda: placement(cluster, TOPIC)[0] == (1, (1, 2, 3)), 30,
               "node 1 leading with every replica in sync")


def restart_with_damage(cluster: Cluster, node: int) -> Path:
    victim = cluster.storage[node - 1]
    victim.stop()
    damaged = flip_a_byte_in_a_sealed_segment(cluster.data_dir(node))
    cluster.storage[node - 1] = cluster.storage_node(node, port=victim.listen_port).start()
    return damaged


def wait_repaired(cluster: Cluster, node: int) -> None:
    """The node's log equals a healthy replica's, and it is back in the ISR."""
    healthy = 2
    def repaired() -> bool:
        mine = log_bytes(cluster.data_dir(node))
        return (mine is not None and mine == log_bytes(cluster.data_dir(healthy))
                and node in placement(cluster, TOPIC)[0][1])

    wait_until(repaired, 60,
               f"node {node}'s log repaired and back in the ISR")


def consume_all(cluster: Cluster) -> list[bytes]:
    values: list[bytes] = []
    with Consumer(cluster.bootstrap) as consumer:
        consumer.assign([TopicPartition(TOPIC, 0)])
        poll_until(consumer, lambda: len(values) >= RECORDS, 60, f"{RECORDS} records",
                   each=lambda record: values.append(record.value or b""))
    return values


def test_a_leader_with_a_damaged_segment_serves_no_corrupt_batch_and_repairs(
        tmp_path: Path) -> None:
    """The damaged node leads again (preferred leader) before anything reads the damaged
    batch; the scrub is off, so the consumer's fetch is what finds it."""
    with cluster_of_three(tmp_path, "--scrub-rate", "0") as cluster:
        create_and_fill(cluster)
        restart_with_damage(cluster, 1)
        # Back in sync (it misses nothing at the tail), so preferred leader again.
        wait_until(lambda: placement(cluster, TOPIC)[0] == (1, (1, 2, 3)), 60,
                   "the damaged node leading again")

        assert consume_all(cluster) == [value(i) for i in range(RECORDS)]

        wait_repaired(cluster, 1)
        node_log = cluster.storage[0].log_path.read_text(errors="replace")
        assert "stored batch failed verification" in node_log
        assert "damaged log cut; fetching the rest again from the leader" in node_log


def test_the_scrub_finds_damage_in_a_follower_and_repairs_it(tmp_path: Path) -> None:
    """Node 3 only follows: nothing reads its copy, the scrub finds the damage."""
    with cluster_of_three(tmp_path, "--scrub-rate", "64", "--scrub-interval", "1") as cluster:
        create_and_fill(cluster)
        restart_with_damage(cluster, 3)

        wait_repaired(cluster, 3)
        node_log = cluster.storage[2].log_path.read_text(errors="replace")
        assert '"found_by": "scrub"' in node_log
        assert "damaged log cut; fetching the rest again from the leader" in node_log
        assert consume_all(cluster) == [value(i) for i in range(RECORDS)]
