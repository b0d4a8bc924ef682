"""The SDK's Producer against a real cluster (etcd, controller, two storage nodes and a
gateway as processes): keyed partitioning, headers, every codec, callbacks, flush,
close, acks, typed errors, and a cluster that cannot be reached."""

from __future__ import annotations

import itertools
import threading
import time
from typing import TYPE_CHECKING

import pytest

from strand import (
    Admin,
    BufferExhaustedError,
    Consumer,
    ConsumerRecord,
    NewTopic,
    Producer,
    ProducerClosedError,
    RecordMetadata,
    TopicPartition,
)
from strand.errors import RecordTooLargeError, RequestTimedOutError, UnknownTopicOrPartitionError
from strand.launcher import free_port
from strand.producer import RecordFuture, default_partition
from strand.records import TimestampType

if TYPE_CHECKING:
    from tests.support.cluster import SdkCluster


def create(cluster: SdkCluster, name: str, partitions: int, **config: str) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1, config=config)])


def consume_all(cluster: SdkCluster, topic: str, partitions: int, expected: int,
                timeout: float = 20) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    with Consumer(cluster.bootstrap, fetch_max_wait_ms=100) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                out.extend(records)
        time.sleep(0.2)  # nothing more may come
        for records in consumer.poll(timeout_ms=100).values():
            out.extend(records)
    return out


def test_keyed_records_land_on_murmur2_partitions_with_headers(sdk_cluster: SdkCluster) -> None:
    create(sdk_cluster, "keyed", 6)
    keys = [f"user-{i}".encode() for i in range(60)]
    with Producer(sdk_cluster.bootstrap, linger_ms=2) as producer:
        futures = [producer.send("keyed", f"value-{i}".encode(), key=key,
                                 headers=[("n", str(i).encode()), ("empty", None)],
                                 timestamp_ms=1_700_000_000_000 + i)
                   for i, key in enumerate(keys)]
        producer.flush()
        metadata = [f.result(timeout=0) for f in futures]
        assert producer.partitions_for("keyed") == list(range(6))
    for key, md in zip(keys, metadata, strict=True):
        assert md.topic == "keyed"
        assert md.partition == default_partition(key, 6)
        assert md.serialized_key_size == len(key)
    # Offsets per partition are 0..n-1 in send order.
    by_partition: dict[int, list[int]] = {}
    for md in metadata:
        by_partition.setdefault(md.partition, []).append(md.offset)
    assert len(by_partition) > 1
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))
    records = consume_all(sdk_cluster, "keyed", 6, len(keys))
    assert len(records) == len(keys)
    for record in records:
        i = int(record.value.decode().split("-")[1])  # type: ignore[union-attr]
        assert record.key == keys[i]
        assert record.partition == default_partition(keys[i], 6)
        assert record.headers == [("n", str(i).encode()), ("empty", None)]
        assert record.timestamp == 1_700_000_000_000 + i
        assert record.timestamp_type == TimestampType.CREATE_TIME
        assert (record.partition, record.offset) == (metadata[i].partition, metadata[i].offset)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd", None])
def test_every_compression_codec_round_trips(sdk_cluster: SdkCluster, codec: str | None) -> None:
    topic = f"codec-{codec or 'none'}"
    create(sdk_cluster, topic, 2)
    values = [(f"{codec}-{i}-" * 20).encode() for i in range(300)]
    with Producer(sdk_cluster.bootstrap, compression_type=codec, batch_size=4096) as producer:
        for i, value in enumerate(values):
            producer.send(topic, value, key=str(i % 7).encode())
    # close() delivered everything; each partition got several compressed batches
    records = consume_all(sdk_cluster, topic, 2, len(values))
    assert sorted(r.value for r in records if r.value) == sorted(values)


def test_null_keys_stick_to_a_partition_per_batch(sdk_cluster: SdkCluster) -> None:
    create(sdk_cluster, "sticky", 4)
    with Producer(sdk_cluster.bootstrap, batch_size=2048, linger_ms=50) as producer:
        futures = [producer.send("sticky", b"x" * 100) for _ in range(200)]
        producer.flush()
    partitions = [f.result().partition for f in futures]
    # Runs of one partition (a batch at a time), and more than one partition overall.
    runs = sum(1 for a, b in itertools.pairwise(partitions) if a != b) + 1
    assert len(set(partitions)) > 1
    assert runs < 40  # ~18 records per 2 KiB batch: far fewer switches than records


def test_callbacks_run_before_futures_and_report_errors(sdk_cluster: SdkCluster) -> None:
    create(sdk_cluster, "callbacks", 2)
    seen: list[tuple[RecordMetadata | None, BaseException | None]] = []
    threads: set[str] = set()
    done = threading.Event()

    def on_delivery(md: RecordMetadata | None, error: BaseException | None) -> None:
        seen.append((md, error))
        threads.add(threading.current_thread().name)
        if len(seen) == 10:
            done.set()

    with Producer(sdk_cluster.bootstrap, max_block_ms=2000) as producer:
        futures = [producer.send("callbacks", b"v", partition=i % 2, on_delivery=on_delivery)
                   for i in range(10)]
        assert done.wait(10)
        assert all(f.result(timeout=5).offset >= 0 for f in futures)
        assert all(md is not None and error is None for md, error in seen)
        assert all(name.startswith("strand-producer-sender") for name in threads)
        # A partition the topic does not have: refused by send() (metadata known).
        with pytest.raises(UnknownTopicOrPartitionError):
            producer.send("callbacks", b"v", partition=5)
        # A record larger than max_request_size never enters the buffer.
        with pytest.raises(RecordTooLargeError):
            producer.send("callbacks", b"x" * 2_000_000)


def test_send_validates_arguments(sdk_cluster: SdkCluster) -> None:
    create(sdk_cluster, "types", 1)
    with Producer(sdk_cluster.bootstrap) as producer:
        with pytest.raises(TypeError):
            producer.send("types", 42)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            producer.send("types", b"v", key={"a": 1})  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            producer.send("types", b"v", headers=[(1, b"x")])  # type: ignore[list-item]
        with pytest.raises(ValueError):
            producer.send("types", b"v", partition=-1)
        # str is UTF-8 encoded, bytearray copied, dict headers accepted
        md = producer.send("types", "héllo", key=bytearray(b"k"), headers={"h": "v"}).result(10)
    records = consume_all(sdk_cluster, "types", 1, 1)
    assert [(r.key, r.value, r.headers) for r in records] == [
        (b"k", "héllo".encode(), [("h", b"v")])]
    assert records[0].offset == md.offset
    with pytest.raises(ValueError):
        Producer(sdk_cluster.bootstrap, acks=2)
    with pytest.raises(ValueError):
        Producer(sdk_cluster.bootstrap, delivery_timeout_ms=100)  # < linger + request timeout


def test_acks_all_and_zero(sdk_cluster: SdkCluster) -> None:
    create(sdk_cluster, "acks", 1)
    with Producer(sdk_cluster.bootstrap, acks="all") as producer:
        assert producer.send("acks", b"a").result(10).offset == 0
    with Producer(sdk_cluster.bootstrap, acks=0) as producer:
        mds: list[RecordMetadata | None] = []
        futures = [producer.send("acks", b"z", on_delivery=lambda md, _: mds.append(md))
                   for _ in range(5)]
        producer.flush()
        assert [f.result().offset for f in futures] == [-1] * 5
        assert [md.offset for md in mds if md is not None] == [-1] * 5
    assert len(consume_all(sdk_cluster, "acks", 1, 6)) == 6


def test_close_delivers_pending_records_and_then_refuses(sdk_cluster: SdkCluster) -> None:
    create(sdk_cluster, "closing", 3)
    producer = Producer(sdk_cluster.bootstrap, linger_ms=1000, batch_size=1 << 20)
    futures = [producer.send("closing", f"{i}".encode(), key=f"{i}".encode())
               for i in range(500)]
    assert not any(f.done() for f in futures)  # lingering
    started = time.monotonic()
    producer.close()
    assert time.monotonic() - started < 0.9  # close sends at once, it does not linger
    assert all(f.result(timeout=0).offset >= 0 for f in futures)
    with pytest.raises(ProducerClosedError):
        producer.send("closing", b"late")
    producer.close()  # idempotent
    assert len(consume_all(sdk_cluster, "closing", 3, 500)) == 500


def test_flush_waits_for_delivery(sdk_cluster: SdkCluster) -> None:
    create(sdk_cluster, "flushing", 2)
    with Producer(sdk_cluster.bootstrap, linger_ms=10_000, batch_size=1 << 20) as producer:
        futures = [producer.send("flushing", b"v") for _ in range(100)]
        producer.flush(timeout=10)
        assert all(f.done() for f in futures)
        # ... and ends: a later record lingers again until the next flush
        after = producer.send("flushing", b"after")
        time.sleep(0.2)
        assert not after.done()
        producer.flush(timeout=10)
        assert after.result(timeout=0).offset >= 0


def test_unknown_topic_times_out_within_max_block_ms(sdk_cluster: SdkCluster) -> None:
    with Producer(sdk_cluster.bootstrap, max_block_ms=500) as producer:
        started = time.monotonic()
        with pytest.raises(UnknownTopicOrPartitionError):
            producer.send("no-such-topic", b"v", key=b"k")
        assert 0.4 < time.monotonic() - started < 3
        # An explicit partition does not block send(); its record fails the same way.
        future = producer.send("no-such-topic-either", b"v", partition=0)
        assert isinstance(future.exception(timeout=5), UnknownTopicOrPartitionError)


def test_unreachable_cluster_blocks_then_raises() -> None:
    dead = f"127.0.0.1:{free_port()}"
    with Producer(dead, max_block_ms=300, buffer_memory=64 * 1024,
                  request_timeout_ms=1000, delivery_timeout_ms=2000) as producer:
        # Keyed: the partition count is needed, and no metadata comes.
        started = time.monotonic()
        with pytest.raises(RequestTimedOutError, match="no metadata"):
            producer.send("t", b"v", key=b"k")
        assert 0.25 < time.monotonic() - started < 3
        # Explicit partition: buffered without metadata until buffer_memory is full.
        futures: list[RecordFuture] = []
        with pytest.raises(BufferExhaustedError):
            for _ in range(1000):
                futures.append(producer.send("t", b"x" * 1000, partition=0))
        assert 40 < len(futures) < 70
        # Undeliverable records fail once delivery_timeout_ms has passed.
        error = futures[0].exception(timeout=10)
        assert isinstance(error, RequestTimedOutError)
        assert all(isinstance(f.exception(timeout=5), RequestTimedOutError) for f in futures)


def test_close_with_timeout_fails_what_cannot_be_delivered() -> None:
    dead = f"127.0.0.1:{free_port()}"
    producer = Producer(dead, max_block_ms=300)
    future = producer.send("t", b"v", partition=0)
    started = time.monotonic()
    producer.close(timeout=0.5)
    assert time.monotonic() - started < 3
    assert isinstance(future.exception(timeout=1), ProducerClosedError)


def test_log_append_time_topics(sdk_cluster: SdkCluster) -> None:
    create(sdk_cluster, "appendtime", 1, **{"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    with Producer(sdk_cluster.bootstrap) as producer:
        md = producer.send("appendtime", b"v", timestamp_ms=5).result(10)
    assert md.timestamp >= before  # the broker's clock, not the record's 5
    [record] = consume_all(sdk_cluster, "appendtime", 1, 1)
    assert record.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert record.timestamp == md.timestamp


def test_pipelined_requests_keep_send_order(sdk_cluster: SdkCluster) -> None:
    """Several calls in flight for the same partitions (max_in_flight_requests=5): with
    no failure, every partition is still appended in send order."""
    create(sdk_cluster, "ordered", 2)
    with Producer(sdk_cluster.bootstrap, batch_size=1024, linger_ms=0,
                  max_request_size=8192) as producer:
        futures = [producer.send("ordered", i.to_bytes(4, "big") * 64, partition=i % 2)
                   for i in range(8000)]
    for p in (0, 1):
        offsets = [f.result().offset for f in futures[p::2]]
        assert offsets == list(range(4000))
