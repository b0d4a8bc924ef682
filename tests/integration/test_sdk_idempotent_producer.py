"""Issue 12, point 2, the SDK side: an idempotent Producer delivers every record
exactly once, in send order per partition, although answers are lost (a produce
call's deadline passes while storage still appends it, so the producer retries what
was written) and a partition's leader is SIGKILLed mid-stream. The same run without
idempotence writes records twice.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

import grpc
import pytest

from strand import Admin, Consumer, NewTopic, Producer, TopicPartition
from strand.errors import ErrorCode, InvalidProducerEpochError, RecordTooLargeError
from strand.producer import RecordFuture
from strand.records import BatchBuilder
from strand.v1 import gateway_pb2_grpc
from tests.support.cluster import SdkCluster, placement
from tests.support.raw_produce import produce
from tests.support.waiting import wait_until

PARTITIONS = 2
RECORDS = 3000


def _create(cluster: SdkCluster, topic: str) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 3,
                                      config={"min.insync.replicas": "2"})])
    wait_until(lambda: all(len(p[1]) == 3 for p in placement(cluster, topic).values()), 30,
               "all replicas in sync")


def _read(cluster: SdkCluster, topic: str, at_least: int) -> dict[int, list[int]]:
    """Every record of ``topic`` per partition, as the int each value holds."""
    out: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    with Consumer(cluster.bootstrap, fetch_max_wait_ms=100) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            polled = consumer.poll(timeout_ms=200)
            for tp, records in polled.items():
                out[tp.partition].extend(int(r.value or b"") for r in records)
            if polled:
                quiet_since = time.monotonic()
            elif (sum(map(len, out.values())) >= at_least
                  and time.monotonic() - quiet_since > 1.0):
                break
    return out


def _produce_through_faults(cluster: SdkCluster, topic: str, idempotent: bool,
                            kill_leader: bool, retries: int = 2_147_483_647
                            ) -> tuple[dict[int, list[int]], list[BaseException]]:
    """RECORDS records over lost answers (a 40 ms request deadline) and, with
    ``kill_leader``, a SIGKILL of partition 0's leader halfway; returns what was read
    and the records' failures."""
    _create(cluster, topic)
    futures: list[RecordFuture] = []
    halfway = threading.Event()
    with Producer(cluster.bootstrap, enable_idempotence=idempotent, linger_ms=2,
                  batch_size=2048, request_timeout_ms=40, delivery_timeout_ms=90_000,
                  retry_backoff_ms=20, retries=retries) as producer:
        def produce() -> None:
            for i in range(RECORDS):
                futures.append(producer.send(topic, str(i).encode(), partition=i % PARTITIONS))
                if i == RECORDS // 2:
                    halfway.set()
                if i % 50 == 0:
                    time.sleep(0.01)

        writer = threading.Thread(target=produce)
        writer.start()
        assert halfway.wait(60)
        if kill_leader:
            leader = placement(cluster, topic)[0][0]
            assert leader is not None
            cluster.storage[leader - 1].kill()
        writer.join(120)
        assert not writer.is_alive()
        producer.flush(timeout=120)
    failed = [e for e in (f.exception() for f in futures) if e is not None]
    return _read(cluster, topic, RECORDS - len(failed)), failed


def _check_exactly_once_in_order(read: dict[int, list[int]]) -> None:
    for partition, values in read.items():
        expected = list(range(partition, RECORDS, PARTITIONS))
        twice = [v for v, n in Counter(values).items() if n > 1]
        assert not twice, f"partition {partition}: {len(twice)} records written twice"
        lost = sorted(set(expected) - set(values))
        assert not lost, f"partition {partition}: {len(lost)} records lost, e.g. {lost[:5]}"
        assert values == expected, f"partition {partition}: records out of send order"


@pytest.mark.parametrize("kill_leader", [False, True], ids=["lost-answers", "leader-kill"])
def test_idempotent_producer_writes_each_record_once_in_order(
        sdk_cluster_factory: Callable[..., SdkCluster], kill_leader: bool) -> None:
    cluster = sdk_cluster_factory(nodes=3, txn_coordinators=1)
    read, failed = _produce_through_faults(cluster, "exactly-once", idempotent=True,
                                           kill_leader=kill_leader)
    assert not failed, f"{len(failed)} records failed, e.g. {failed[0]!r}"
    _check_exactly_once_in_order(read)


def test_without_idempotence_lost_answers_write_records_twice(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    """The same faults without idempotence: the check above fires (retries duplicate).
    Two retries per batch bound the copies (each retry of a lost answer writes again,
    so unbounded retries can livelock until delivery_timeout_ms)."""
    cluster = sdk_cluster_factory(nodes=3)
    read, _ = _produce_through_faults(cluster, "at-least-once", idempotent=False,
                                      kill_leader=False, retries=2)
    with pytest.raises(AssertionError, match="written twice"):
        _check_exactly_once_in_order(read)


def test_without_a_transaction_coordinator_records_fail_saying_why(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    """No coordinator hands out producer ids: the records expire after
    delivery_timeout_ms (no hang) with an error naming the cause and the ways out."""
    cluster = sdk_cluster_factory(nodes=1, txn_coordinators=0)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("no-coordinator", 1, 1)])
    with Producer(cluster.bootstrap, linger_ms=0,
                  request_timeout_ms=1_000, delivery_timeout_ms=3_000,
                  retry_backoff_ms=100) as producer:
        started = time.monotonic()
        error = producer.send("no-coordinator", b"x").exception(timeout=30)
        assert time.monotonic() - started < 10
        producer.close(timeout=0)
    assert error is not None
    assert "no producer id" in str(error) and "enable_idempotence=False" in str(error)


def test_a_fenced_epoch_ends_the_producer(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    """Another writer with the producer's id at a newer epoch: the producer's next batch
    is refused with INVALID_PRODUCER_EPOCH, which is fatal: send() raises it."""
    cluster = sdk_cluster_factory(nodes=1, txn_coordinators=1)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("fenced", 1, 1)])
    with Producer(cluster.bootstrap, enable_idempotence=True, linger_ms=0) as producer:
        producer.send("fenced", b"first").result(timeout=30)
        tm = producer._transaction_manager  # the id the coordinator gave it
        assert tm is not None and tm.has_producer_id
        newer = BatchBuilder(producer_id=tm.producer_id, producer_epoch=tm.epoch + 1,
                             base_sequence=0)
        newer.append(b"newer")
        stub = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(cluster.bootstrap))
        assert int(produce(stub, "fenced", newer.build()).error_code) == ErrorCode.NONE
        error = producer.send("fenced", b"stale").exception(timeout=30)
        assert isinstance(error, InvalidProducerEpochError)
        with pytest.raises(InvalidProducerEpochError):
            producer.send("fenced", b"after")


def test_a_bump_does_not_write_again_a_batch_whose_answer_was_lost(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    """KIP-360's duplicate risk with real processes. "kept" (RF 2) is appended by its
    leader while the follower is paused, so acks=all times out: the producer cannot
    know it was written. Meanwhile a record too large for "small" fails for good:
    that sequence gap bumps the epoch. Renumbered under the new epoch, "kept"'s retry
    would be appended a second time; it must stay on its old epoch and sequence, so
    that storage answers it with its original offset once the ISR shrinks."""
    # A paused follower leaves the ISR within ~2 s.
    cluster = sdk_cluster_factory(nodes=2, storage_args=(
        "--replica-lag-time-max-ms", "1500", "--maintenance-interval", "0.25"))
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([  # both led by node 1; node 2 follows "kept"
            NewTopic("kept", replica_assignment={0: [1, 2]}),
            NewTopic("small", replica_assignment={0: [1]},
                     config={"max.message.bytes": "1024"})])
    wait_until(lambda: placement(cluster, "kept")[0] == (1, (1, 2)), 30,
               "node 1 leading kept, both replicas in sync")
    with Producer(cluster.bootstrap, linger_ms=0, request_timeout_ms=600,
                  retry_backoff_ms=50, delivery_timeout_ms=60_000) as producer:
        assert producer.send("kept", b"first").result(timeout=30).offset == 0
        producer.send("small", b"ok").result(timeout=30)
        follower = cluster.storage[1]
        follower.pause()
        try:
            kept = producer.send("kept", b"second")
            too_large = producer.send("small", b"x" * 4096)
            assert isinstance(too_large.exception(timeout=30), RecordTooLargeError)
            tm = producer._transaction_manager
            assert tm is not None
            wait_until(lambda: tm.epoch >= 1, 30, "the epoch bump after the gap")
            offset = kept.result(timeout=60).offset  # once the paused node leaves the ISR
        finally:
            follower.resume()
        assert producer.send("kept", b"third").result(timeout=30).offset == offset + 1
    assert _values(cluster, "kept") == [b"first", b"second", b"third"]


def _values(cluster: SdkCluster, topic: str) -> list[bytes | None]:
    with Consumer(cluster.bootstrap, fetch_max_wait_ms=100) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        values: list[bytes | None] = []
        while consumer.position(tp) < end:
            values.extend(r.value for r in consumer.poll(timeout_ms=500).get(tp, []))
        return values
