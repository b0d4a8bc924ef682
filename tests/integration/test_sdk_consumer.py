"""The SDK's Consumer against a real cluster: assign, poll, seek, positions, iteration,
pause/resume, auto_offset_reset, offsets queries and typed errors."""

from __future__ import annotations

import itertools
import threading
import time
from typing import TYPE_CHECKING

import pytest

from strand import (
    Admin,
    Consumer,
    ConsumerRecord,
    NewTopic,
    NoOffsetForPartitionError,
    Producer,
    TopicPartition,
)
from strand.errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError
from tests.support.waiting import poll_records

if TYPE_CHECKING:
    from tests.support.cluster import SdkCluster

T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


@pytest.fixture(scope="module")
def orders(sdk_cluster: SdkCluster) -> SdkCluster:
    """Topic ``orders``: 2 partitions with 100 records each, values 'p<partition>-<i>',
    timestamps 1_000_000 + i."""
    with Admin(sdk_cluster.bootstrap) as admin:
        # Kept whole: time retention would delete records stamped in 1970 at the storage
        # node's next maintenance round (every 5 s), racing the tests that read them.
        admin.create_topics([NewTopic("orders", 2, 1, config={"retention.ms": "-1"})])
    with Producer(sdk_cluster.bootstrap, batch_size=2048) as producer:
        for p in (0, 1):
            for i in range(100):
                producer.send("orders", f"p{p}-{i}".encode(), key=str(i).encode(), partition=p,
                              timestamp_ms=1_000_000 + i)
    return sdk_cluster


def offsets(records: list[ConsumerRecord], tp: TopicPartition) -> list[int]:
    return [r.offset for r in records if (r.topic, r.partition) == tp]


def test_assign_poll_and_positions(orders: SdkCluster) -> None:
    with Consumer(orders.bootstrap, max_poll_records=30) as consumer:
        assert consumer.assignment() == set()
        consumer.assign([T0, ("orders", 1)])
        assert consumer.assignment() == {T0, T1}
        assert consumer.position(T0) == 0  # 'earliest' by default
        first = consumer.poll(timeout_ms=5000)
        assert 0 < sum(len(r) for r in first.values()) <= 30
        records = [r for rs in first.values() for r in rs] + poll_records(consumer, 170)
        assert offsets(records, T0) == list(range(100))
        assert offsets(records, T1) == list(range(100))
        assert all(r.value == f"p{r.partition}-{r.offset}".encode() for r in records)
        assert all(r.timestamp == 1_000_000 + r.offset for r in records)
        assert consumer.position(T0) == consumer.position(T1) == 100
        assert consumer.highwater(T0) == 100
        assert consumer.poll(timeout_ms=100) == {}
        assert consumer.beginning_offsets([T0, T1]) == {T0: 0, T1: 0}
        assert consumer.end_offsets([T0, T1]) == {T0: 100, T1: 100}
        assert consumer.offsets_for_times({T0: 1_000_042, T1: 9_000_000}) == {T0: 42, T1: None}
        assert consumer.partitions_for("orders") == [0, 1]
        with pytest.raises(UnknownTopicOrPartitionError):
            consumer.partitions_for("no-such-topic")


def test_seek_and_seek_to_beginning_and_end(orders: SdkCluster) -> None:
    with Consumer(orders.bootstrap) as consumer:
        consumer.assign([T0, T1])
        consumer.seek(T0, 95)
        consumer.seek_to_end(T1)
        assert consumer.position(T1) == 100
        records = poll_records(consumer, 5)
        assert offsets(records, T0) == [95, 96, 97, 98, 99]
        assert offsets(records, T1) == []
        consumer.seek(T0, 10)  # back again: buffered data is dropped
        assert [r.offset for r in poll_records(consumer, 3, max_records=3)] == [10, 11, 12]
        assert consumer.position(T0) == 13
        consumer.seek_to_beginning()
        assert consumer.position(T0) == 0 and consumer.position(T1) == 0
        records = poll_records(consumer, 200)
        assert offsets(records, T0) == list(range(100))
        assert offsets(records, T1) == list(range(100))
        with pytest.raises(ValueError):
            consumer.seek(TopicPartition("orders", 7), 0)  # not assigned
        with pytest.raises(ValueError):
            consumer.seek(T0, -1)


def test_seek_into_the_middle_of_a_batch(orders: SdkCluster) -> None:
    """Fetches return whole batches: records before the position are skipped."""
    with Consumer(orders.bootstrap) as consumer:
        consumer.assign([T1])
        for start in (1, 7, 50, 99):
            consumer.seek(T1, start)
            records = poll_records(consumer, 100 - start)
            assert offsets(records, T1) == list(range(start, 100))


def test_iteration_blocks_for_records_and_tracks_positions(orders: SdkCluster) -> None:
    with Consumer(orders.bootstrap, consumer_timeout_ms=1000) as consumer:
        consumer.assign([T0])
        first = list(itertools.islice(consumer, 5))
        assert [r.offset for r in first] == [0, 1, 2, 3, 4]
        assert consumer.position(T0) == 5  # exactly past what was handed out
        consumer.seek(T0, 90)
        rest = list(consumer)  # ends after consumer_timeout_ms without records
        assert [r.offset for r in rest] == list(range(90, 100))

    # A record produced later wakes a blocked iteration; close() from elsewhere ends it.
    with Admin(orders.bootstrap) as admin:
        admin.create_topics([NewTopic("live", 1, 1)])
    consumer = Consumer(orders.bootstrap, auto_offset_reset="latest", fetch_max_wait_ms=200)
    consumer.assign([TopicPartition("live", 0)])
    assert consumer.position(TopicPartition("live", 0)) == 0
    got: list[ConsumerRecord] = []

    def read() -> None:
        got.extend(consumer)

    reader = threading.Thread(target=read)
    reader.start()
    with Producer(orders.bootstrap) as producer:
        producer.send("live", b"hello").result(10)
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
    consumer.close()
    reader.join(5)
    assert not reader.is_alive()
    assert [r.value for r in got] == [b"hello"]


def test_pause_and_resume(orders: SdkCluster) -> None:
    with Consumer(orders.bootstrap) as consumer:
        consumer.assign([T0, T1])
        consumer.pause(T1)
        assert consumer.paused() == {T1}
        records = poll_records(consumer, 100)
        time.sleep(0.3)
        records += poll_records(consumer, 1, timeout=0.3)
        assert offsets(records, T0) == list(range(100))
        assert offsets(records, T1) == []
        assert consumer.position(T1) == 0
        consumer.resume(T1)
        assert consumer.paused() == set()
        assert offsets(poll_records(consumer, 100), T1) == list(range(100))


def test_auto_offset_reset(orders: SdkCluster) -> None:
    with Consumer(orders.bootstrap, auto_offset_reset="latest") as consumer:
        consumer.assign([T0])
        assert consumer.position(T0) == 100
        assert consumer.poll(timeout_ms=200) == {}
        consumer.seek(T0, 5000)  # out of range: reset to 'latest'
        assert poll_records(consumer, 1, timeout=1) == []
        assert consumer.position(T0) == 100
    with Consumer(orders.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([T0])
        consumer.seek(T0, 5000)  # out of range: reset to 'earliest'
        assert offsets(poll_records(consumer, 100), T0) == list(range(100))
    with Consumer(orders.bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([T0])
        with pytest.raises(NoOffsetForPartitionError):
            consumer.poll(timeout_ms=100)
        consumer.seek(T0, 98)
        assert offsets(poll_records(consumer, 2), T0) == [98, 99]
        consumer.seek(T0, 5000)
        with pytest.raises(OffsetOutOfRangeError):
            poll_records(consumer, 1, timeout=5)
        consumer.seek_to_beginning(T0)  # an explicit reset is allowed with 'none'
        assert consumer.position(T0) == 0
    with pytest.raises(ValueError):
        Consumer(orders.bootstrap, auto_offset_reset="smallest")  # type: ignore[arg-type]


def test_unknown_partition_is_retried_until_it_exists(orders: SdkCluster) -> None:
    """Assigning a partition that does not exist yet is not an error (Kafka's assign()
    does not check either): the consumer retries, and reads once it appears."""
    with Consumer(orders.bootstrap, retry_backoff_ms=50) as consumer:
        consumer.assign([TopicPartition("later", 0)])
        assert consumer.poll(timeout_ms=300) == {}
        with Admin(orders.bootstrap) as admin:
            admin.create_topics([NewTopic("later", 1, 1)])
        with Producer(orders.bootstrap) as producer:
            producer.send("later", b"finally").result(10)
        records = poll_records(consumer, 1)
        assert [r.value for r in records] == [b"finally"]


def test_many_batches_and_max_records(sdk_cluster: SdkCluster) -> None:
    with Admin(sdk_cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("bulk", 3, 1)])
    with Producer(sdk_cluster.bootstrap, batch_size=16384, compression_type="lz4") as producer:
        for i in range(6000):
            producer.send("bulk", i.to_bytes(4, "big") * 64, key=str(i).encode())
    tps = [TopicPartition("bulk", p) for p in range(3)]
    with Consumer(sdk_cluster.bootstrap, max_partition_fetch_bytes=64 * 1024,
                  fetch_max_bytes=128 * 1024) as consumer:
        consumer.assign(tps)
        seen: dict[TopicPartition, list[int]] = {tp: [] for tp in tps}
        deadline = time.monotonic() + 20
        while sum(map(len, seen.values())) < 6000 and time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=500, max_records=77)
            assert sum(len(r) for r in batch.values()) <= 77
            for tp, records in batch.items():
                seen[tp].extend(r.offset for r in records)
        for tp in tps:
            assert seen[tp] == list(range(len(seen[tp])))
        assert sum(map(len, seen.values())) == 6000
