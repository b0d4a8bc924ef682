"""Issue 16: Kafka's consumer-group APIs on the gateway's Kafka listener, with unchanged
Kafka clients in a real cluster (the package's ``txn_cluster``).

- kafka-python and aiokafka produce, consume in a group and commit; the Strand SDK's Admin sees
  those committed offsets, and offsets the SDK sets are where they resume.
- confluent-kafka (librdkafka): three members of a cooperative-sticky group, joining
  one by one and one leaving, consume every record exactly once across members.
- confluent-kafka's AdminClient lists, describes and deletes the groups.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import ConsumerGroupState, KafkaException
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from strand import Admin, NewTopic, Producer, TopicPartition
from tests.support.cluster import SdkCluster, unique
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(txn_cluster: SdkCluster) -> SdkCluster:
    return txn_cluster


def new_topic(cluster: SdkCluster, prefix: str, partitions: int, records: int) -> str:
    """A topic (RF 1) holding ``records`` records "0", "1", … keyed alike, spread by key."""
    topic = unique(prefix)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    produce(cluster, topic, range(records))
    return topic


def produce(cluster: SdkCluster, topic: str, values: range) -> None:
    with Producer(cluster.bootstrap) as producer:
        for i in values:
            producer.send(topic, key=str(i).encode(), value=str(i).encode())
        producer.flush()


def test_kafka_python_commits_are_the_sdks_and_back(cluster: SdkCluster) -> None:
    topic = new_topic(cluster, "kp", 2, 0)
    producer = KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap)
    for i in range(10):
        producer.send(topic, key=str(i).encode(), value=str(i).encode())
    producer.flush()
    producer.close()
    group = unique("kp-group")
    consumer = KafkaConsumer(topic, bootstrap_servers=cluster.kafka_bootstrap,
                             group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=20_000)
    try:
        values = []
        read_at: dict[bytes, int] = {}  # each record's offset in its partition
        for record in consumer:
            values.append(record.value)
            read_at[record.value] = record.offset
            if len(values) == 10:
                break
        consumer.commit()
        committed = {p: consumer.committed(KafkaTopicPartition(topic, p)) for p in (0, 1)}
    finally:
        consumer.close()
    assert sorted(values, key=int) == [str(i).encode() for i in range(10)]
    assert sum(committed.values()) == 10
    with Admin(cluster.bootstrap) as admin:
        assert admin.list_group_offsets(group) == {
            TopicPartition(topic, p): offset for p, offset in committed.items()}
        # The other way round: offsets the SDK sets are where Kafka clients resume.
        admin.alter_group_offsets(group, {TopicPartition(topic, 0): 1,
                                          TopicPartition(topic, 1): 1})
    resumed = KafkaConsumer(topic, bootstrap_servers=cluster.kafka_bootstrap,
                            group_id=group, enable_auto_commit=False,
                            consumer_timeout_ms=20_000)
    try:
        again = []
        for record in resumed:
            again.append(record.value)
            if len(again) == 10 - 2:
                break
        assert resumed.poll(timeout_ms=1_000) == {}  # the records before them: not again
    finally:
        resumed.close()
    assert sorted(again, key=int) == sorted(
        (value for value, offset in read_at.items() if offset >= 1), key=int)


def test_aiokafka_commits_are_the_sdks_and_back(cluster: SdkCluster) -> None:
    topic = new_topic(cluster, "aio", 2, 10)
    group = unique("aio-group")

    async def consume(expected: int) -> tuple[list[bytes], dict[int, int | None]]:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=cluster.kafka_bootstrap,
                                    group_id=group, auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            values: list[bytes] = []
            while len(values) < expected:
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 30)
                values.extend(r.value for records in batches.values() for r in records)
            await consumer.commit()
            committed = {p: await consumer.committed(AioTopicPartition(topic, p))
                         for p in (0, 1)}
            return values, committed
        finally:
            await consumer.stop()

    values, committed = asyncio.run(consume(10))
    assert sorted(values, key=int) == [str(i).encode() for i in range(10)]
    with Admin(cluster.bootstrap) as admin:
        assert admin.list_group_offsets(group) == {
            TopicPartition(topic, p): offset for p, offset in committed.items()}
        partition_0 = committed[0] or 0
        admin.alter_group_offsets(group, {TopicPartition(topic, 0): partition_0 - 1})
    async def produce_more() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.kafka_bootstrap)
        await producer.start()
        try:
            for i in (10, 11):
                await producer.send_and_wait(topic, key=str(i).encode(), value=str(i).encode())
        finally:
            await producer.stop()

    asyncio.run(produce_more())
    # The record the SDK rewound partition 0 by, and the two new ones.
    again, _ = asyncio.run(consume(3))
    assert len(again) == 3 and {b"10", b"11"} <= set(again)


class Member:
    """One confluent-kafka consumer of the cooperative-sticky group. It commits where it
    read up to in each partition it gives up, as it gives it up (Kafka's "commit on
    revoke"), so the partition's next owner starts right there."""

    def __init__(self, cluster: SdkCluster, group: str, topic: str) -> None:
        self.topic = topic
        self.assigned: set[int] = set()
        self.positions: dict[int, int] = {}  # partition -> the offset after the last read
        # (partitions held, partitions revoked) of each revocation: cooperative
        # rebalancing takes only the moving partitions, eager ones take everything.
        self.revocations: list[tuple[int, int]] = []
        self.consumer = ConfluentConsumer({
            "bootstrap.servers": cluster.kafka_bootstrap, "group.id": group,
            "partition.assignment.strategy": "cooperative-sticky",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 10_000, "heartbeat.interval.ms": 500})
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)

    def _assigned(self, consumer: ConfluentConsumer,
                  partitions: list[ConfluentTopicPartition]) -> None:
        self.assigned |= {p.partition for p in partitions}

    def _revoked(self, consumer: ConfluentConsumer,
                 partitions: list[ConfluentTopicPartition]) -> None:
        self.revocations.append((len(self.assigned), len(partitions)))
        read = [ConfluentTopicPartition(self.topic, p.partition,
                                        self.positions.pop(p.partition))
                for p in partitions if p.partition in self.positions]
        if read:
            consumer.commit(offsets=read, asynchronous=False)
        self.assigned -= {p.partition for p in partitions}

    def poll(self, seen: Counter[bytes]) -> None:
        record = self.consumer.poll(0.1)
        if record is None:
            return
        if record.error() is not None:
            raise KafkaException(record.error())
        value, partition, offset = record.value(), record.partition(), record.offset()
        assert value is not None and partition is not None and offset is not None
        seen[value] += 1
        self.positions[partition] = offset + 1


def consume_until(members: list[Member], seen: Counter[bytes], total: int,
                  settled: int, timeout_s: float = 60) -> None:
    """Poll every member until ``total`` records are seen and the members hold every
    one of ``settled`` partitions between them, each held once."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for member in members:
            member.poll(seen)
        held = [p for m in members for p in m.assigned]
        if sum(seen.values()) >= total and sorted(held) == list(range(settled)):
            return
    raise AssertionError(f"{sum(seen.values())} of {total} records; assignments "
                         f"{[sorted(m.assigned) for m in members]}")


@pytest.fixture
def members() -> Iterator[list[Member]]:
    joined: list[Member] = []
    yield joined
    for member in joined:
        member.consumer.close()


def test_confluent_cooperative_sticky_group_consumes_each_record_once(
        cluster: SdkCluster, members: list[Member]) -> None:
    topic = new_topic(cluster, "coop", 6, 30)
    group = unique("coop-group")
    seen: Counter[bytes] = Counter()
    members.append(Member(cluster, group, topic))
    consume_until(members, seen, 10, 6)
    for _ in range(2):  # two more join, one by one: the partitions spread over them
        members.append(Member(cluster, group, topic))
        consume_until(members, seen, 10, 6)
        wait_until(lambda: _spread(members, seen), 30, "the partitions spread evenly")
    assert [len(m.assigned) for m in members] == [2, 2, 2]
    # Cooperative: the first member gave up 3 of its 6 partitions, then 1 of its 3 (an
    # eager rebalance takes every partition, each time).
    assert members[0].revocations == [(6, 3), (3, 1)]
    produce(cluster, topic, range(30, 45))
    consume_until(members, seen, 45, 6)
    leaving = members.pop()
    leaving.consumer.close()  # LeaveGroup: the others take its partitions over
    produce(cluster, topic, range(45, 60))
    consume_until(members, seen, 60, 6)
    assert sorted(seen, key=int) == [str(i).encode() for i in range(60)]
    assert set(seen.values()) == {1}, "a record was consumed more than once"


def _spread(members: list[Member], seen: Counter[bytes]) -> bool:
    for member in members:
        member.poll(seen)
    return sorted(len(m.assigned) for m in members) == [6 // len(members)] * len(members)


def test_confluent_admin_lists_describes_and_deletes_groups(cluster: SdkCluster) -> None:
    topic = new_topic(cluster, "admin", 1, 3)
    group = unique("admin-group")
    consumer = ConfluentConsumer({"bootstrap.servers": cluster.kafka_bootstrap,
                                  "group.id": group, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False, "client.id": "lister"})
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    try:
        consumer.subscribe([topic])
        wait_until(lambda: consumer.poll(0.2) is not None, 30, "a record consumed")
        consumer.commit(asynchronous=False)
        listed = admin.list_consumer_groups(request_timeout=20).result()
        assert group in {g.group_id for g in listed.valid}
        described = admin.describe_consumer_groups([group], request_timeout=20)[group].result()
        assert described.state == ConsumerGroupState.STABLE
        assert [m.client_id for m in described.members] == ["lister"]
        assert described.members[0].assignment.topic_partitions[0].topic == topic
    finally:
        consumer.close()
    admin.delete_consumer_groups([group], request_timeout=20)[group].result()
    with Admin(cluster.bootstrap) as sdk:
        assert sdk.list_group_offsets(group) == {}


def test_kafka_python_speaking_kafka_2_0_joins_without_member_id_round(
        cluster: SdkCluster) -> None:
    """A client of Kafka 2.0's protocol (JoinGroup v3, before KIP-394) joins in one
    round: the gateway completes the join the coordinator answers MEMBER_ID_REQUIRED."""
    topic = new_topic(cluster, "kp20", 1, 3)
    group = unique("kp20-group")
    consumer = KafkaConsumer(topic, bootstrap_servers=cluster.kafka_bootstrap,
                             group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=20_000,
                             api_version=(2, 0))
    try:
        values = []
        for record in consumer:
            values.append(record.value)
            if len(values) == 3:
                break
        consumer.commit()
    finally:
        consumer.close()
    assert values == [b"0", b"1", b"2"]
    with Admin(cluster.bootstrap) as admin:
        assert admin.list_group_offsets(group) == {TopicPartition(topic, 0): 3}
