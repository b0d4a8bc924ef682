"""A producer keeps going through a storage node's SIGKILL and restart: the retries
deliver every record, in order per partition, and the consumer sees each once.

One replica per partition, so the killed node's partitions have no leader until it
is back (the producer retries NOT_LEADER_OR_FOLLOWER / LEADER_NOT_AVAILABLE /
transport failures meanwhile). The producer has no idempotence yet: a batch whose
append happened but whose answer was lost with the process would be written twice
by its retry. The test counts such duplicates separately from losses so that a
failure says which one happened.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from strand import Admin, Consumer, NewTopic, Producer, TopicPartition
from strand.producer import RecordFuture

if TYPE_CHECKING:
    from tests.support.cluster import SdkCluster

TOPIC = "failover"
PARTITIONS = 4
RECORDS = 4000


@pytest.mark.parametrize("in_flight", [1, 5])
def test_produce_survives_storage_node_kill_and_restart(
        sdk_cluster_factory: Callable[..., SdkCluster], in_flight: int) -> None:
    """in_flight=1: order holds across retries; 5 (the default): no loss either, but a
    retried batch may land after batches sent later (Kafka's contract too)."""
    cluster = sdk_cluster_factory(nodes=2)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
        leaders = {p.partition: p.leader for p in admin.describe_topics([TOPIC])[0].partitions}
    assert set(leaders.values()) == {1, 2}
    victim = cluster.storage[0]
    futures: list[RecordFuture] = []
    halfway = threading.Event()
    done_at: dict[int, float] = {}  # record -> when its delivery completed

    with Producer(cluster.bootstrap, linger_ms=5, batch_size=4096, request_timeout_ms=5000,
                  delivery_timeout_ms=60_000, retry_backoff_ms=50,
                  max_in_flight_requests=in_flight) as producer:
        def produce() -> None:
            for i in range(RECORDS):
                future = producer.send(TOPIC, str(i).encode(), partition=i % PARTITIONS)
                future.add_done_callback(
                    lambda _, i=i: done_at.__setitem__(i, time.monotonic()))  # type: ignore[misc]
                futures.append(future)
                if i == RECORDS // 4:
                    halfway.set()
                if i % 100 == 0:
                    time.sleep(0.02)  # spread the sends over the outage

        writer = threading.Thread(target=produce)
        writer.start()
        assert halfway.wait(10)
        victim.kill()  # SIGKILL, mid-stream
        killed_at = time.monotonic()
        time.sleep(1.0)
        cluster.storage[0] = victim = cluster.storage_node(1, port=victim.listen_port).start()
        restarted_at = time.monotonic()
        writer.join(60)
        assert not writer.is_alive()
        producer.flush(timeout=60)

    failed = [f.exception() for f in futures if f.exception() is not None]
    assert not failed, f"{len(failed)} records failed, e.g. {failed[0]!r}"
    acked = [f.result() for f in futures]
    assert len(acked) == RECORDS
    # The outage was crossed: records for the killed node's partitions sent while it
    # was down were delivered only after it came back; the others' went on meanwhile.
    victims = {p for p, leader in leaders.items() if leader == 1}
    waited = [i for i in range(RECORDS) if i % PARTITIONS in victims
              and done_at[i] >= restarted_at]
    during = [i for i in range(RECORDS) if i % PARTITIONS not in victims
              and killed_at < done_at[i] < restarted_at]
    assert waited and during, (len(waited), len(during))

    values: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    offsets: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    with Consumer(cluster.bootstrap, fetch_max_wait_ms=100) as consumer:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        ends = consumer.end_offsets(consumer.assignment())
        deadline = time.monotonic() + 30
        while (any(consumer.position(tp) < end for tp, end in ends.items())
               and time.monotonic() < deadline):
            for tp, records in consumer.poll(timeout_ms=200).items():
                values[tp.partition].extend(int(r.value or b"-1") for r in records)
                offsets[tp.partition].extend(r.offset for r in records)

    seen = Counter(v for vs in values.values() for v in vs)
    lost = sorted(set(range(RECORDS)) - set(seen))
    duplicated = sorted(v for v, n in seen.items() if n > 1)
    assert not lost, f"{len(lost)} acknowledged records are missing, e.g. {lost[:10]}"
    assert not duplicated, (
        f"{len(duplicated)} records were written twice by retries (no idempotence yet), "
        f"e.g. {duplicated[:10]}")
    for p in range(PARTITIONS):
        # Where the acknowledgements said, and in send order if in_flight is 1.
        assert offsets[p] == list(range(len(offsets[p])))
        assert sorted(md.offset for md in acked if md.partition == p) == offsets[p]
        by_offset = {md.offset: int(i) for i, md in enumerate(acked) if md.partition == p}
        assert [by_offset[o] for o in offsets[p]] == values[p]
        if in_flight == 1:
            assert values[p] == sorted(values[p])


def test_clients_ride_through_a_gateway_restart(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    """The gateway is SIGKILLed and comes back on the same address: the producer's
    retries and the consumer's fetches reconnect on their own."""
    cluster = sdk_cluster_factory(nodes=1)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("gw-restart", 2, 1)])
    tps = [TopicPartition("gw-restart", p) for p in range(2)]
    with Producer(cluster.bootstrap, retry_backoff_ms=50) as producer, \
            Consumer(cluster.bootstrap, fetch_max_wait_ms=100, retry_backoff_ms=50) as consumer:
        consumer.assign(tps)
        first = [producer.send("gw-restart", f"a{i}".encode(), partition=i % 2)
                 for i in range(100)]
        producer.flush()
        cluster.gateway.kill()
        during = [producer.send("gw-restart", f"b{i}".encode(), partition=i % 2)
                  for i in range(100)]
        assert consumer.poll(timeout_ms=300) is not None  # fails quietly meanwhile
        time.sleep(0.5)
        cluster.gateway.start()  # a new process on the same port
        producer.flush(timeout=30)
        assert all(f.exception() is None for f in first + during)
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(values) < 200 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(r.value or b"" for r in records)
        assert sorted(values) == sorted([f"a{i}".encode() for i in range(100)]
                                        + [f"b{i}".encode() for i in range(100)])
