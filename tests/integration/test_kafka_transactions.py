"""Issue 16: Kafka's producer-id and transaction APIs on the gateway's Kafka listener,
with confluent-kafka (librdkafka) unchanged, in a real cluster (``txn_cluster``).

- An idempotent producer (enable.idempotence) writes; every record is there once.
- A transactional consume-transform-produce: records read from an input topic are
  written transformed to an output topic, and the input offsets committed with the
  transaction (send_offsets_to_transaction); a read_committed consumer sees them, the
  SDK sees the group's offsets.
- An aborted transaction: a read_committed consumer never sees its records (a
  read_uncommitted one does: they were written).
- DescribeTransactions and ListTransactions show an open transaction.
- One producer instance runs transaction after transaction (its epoch kept).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kio.schema.describe_transactions.v0 import request as describe_request
from kio.schema.describe_transactions.v0 import response as describe_response
from kio.schema.errors import ErrorCode as KafkaError
from kio.schema.list_transactions.v1 import request as list_request
from kio.schema.list_transactions.v1 import response as list_response
from kio.schema.types import TransactionalId
from kio.static.primitive import i64

from strand import Admin, Consumer, NewTopic, TopicPartition
from tests.support.cluster import SdkCluster, unique
from tests.support.kafka_wire import RawKafkaClient

pytestmark = pytest.mark.slow

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def cluster(txn_cluster: SdkCluster) -> SdkCluster:
    return txn_cluster


def new_topics(cluster: SdkCluster, *prefixes: str, partitions: int = 1) -> list[str]:
    names = [unique(prefix) for prefix in prefixes]
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1) for name in names])
    return names


def read_all(cluster: SdkCluster, topic: str, isolation: str, expected: int,
             settle_s: float = 2.0) -> list[bytes]:
    """Every record of ``topic`` a confluent-kafka consumer of ``isolation`` reads: once
    ``expected`` are there, a little longer, so that extra ones would show."""
    consumer = ConfluentConsumer({
        "bootstrap.servers": cluster.kafka_bootstrap, "group.id": unique("reader"),
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "isolation.level": isolation})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            record = consumer.poll(0.2)
            value = record.value() if record is not None and record.error() is None else None
            if value is not None:
                values.append(value)
            if len(values) >= expected:
                deadline = min(deadline, time.monotonic() + settle_s)
    finally:
        consumer.close()
    return values


def transactional(cluster: SdkCluster, prefix: str,
                  transactional_id: str | None = None) -> ConfluentProducer:
    producer = ConfluentProducer({"bootstrap.servers": cluster.kafka_bootstrap,
                                  "transactional.id": transactional_id or unique(prefix)})
    producer.init_transactions(TIMEOUT_S)
    return producer


def test_idempotent_producer_writes_each_record_once(cluster: SdkCluster) -> None:
    (topic,) = new_topics(cluster, "idempotent", partitions=2)
    producer = ConfluentProducer({"bootstrap.servers": cluster.kafka_bootstrap,
                                  "enable.idempotence": True, "linger.ms": 5})
    for i in range(50):
        producer.produce(topic, key=str(i).encode(), value=str(i).encode())
    assert producer.flush(TIMEOUT_S) == 0
    with Consumer(cluster.bootstrap) as consumer:
        parts = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < 50 and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                values.extend(r.value for r in records if r.value is not None)
        ends = consumer.end_offsets(parts)
    assert sorted(values, key=int) == [str(i).encode() for i in range(50)]
    assert sum(ends.values()) == 50  # nothing written twice


@pytest.fixture
def source(cluster: SdkCluster) -> Iterator[tuple[str, str, ConfluentConsumer, str]]:
    """An input topic of 5 records "r0".."r4", an output topic, and a consumer of a
    new group that has read the 5 input records (not committed)."""
    source_topic, sink_topic = new_topics(cluster, "ctp-in", "ctp-out")
    producer = ConfluentProducer({"bootstrap.servers": cluster.kafka_bootstrap})
    for i in range(5):
        producer.produce(source_topic, value=f"r{i}".encode())
    assert producer.flush(TIMEOUT_S) == 0
    group = unique("ctp-group")
    consumer = ConfluentConsumer({
        "bootstrap.servers": cluster.kafka_bootstrap, "group.id": group,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "isolation.level": "read_committed"})
    consumer.subscribe([source_topic])
    yield source_topic, sink_topic, consumer, group
    consumer.close()


def _read_source(consumer: ConfluentConsumer, count: int) -> list[object]:
    records: list[object] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(records) < count and time.monotonic() < deadline:
        record = consumer.poll(0.2)
        if record is not None and record.error() is None:
            records.append(record)
    assert len(records) == count
    return records


def test_consume_transform_produce_commits_records_and_offsets(
        cluster: SdkCluster, source: tuple[str, str, ConfluentConsumer, str]) -> None:
    source_topic, sink_topic, consumer, group = source
    records = _read_source(consumer, 5)
    producer = transactional(cluster, "ctp")
    producer.begin_transaction()
    for record in records:
        producer.produce(sink_topic, value=record.value().upper())  # type: ignore[attr-defined]
    producer.send_offsets_to_transaction(
        [ConfluentTopicPartition(source_topic, 0, 5)], consumer.consumer_group_metadata(),
        TIMEOUT_S)
    producer.commit_transaction(TIMEOUT_S)
    assert read_all(cluster, sink_topic, "read_committed", 5) == [
        f"R{i}".encode() for i in range(5)]
    with Admin(cluster.bootstrap) as admin:
        assert admin.list_group_offsets(group) == {TopicPartition(source_topic, 0): 5}
    committed = consumer.committed([ConfluentTopicPartition(source_topic, 0)], TIMEOUT_S)
    assert committed[0].offset == 5


def test_aborted_transaction_is_never_read_committed(
        cluster: SdkCluster, source: tuple[str, str, ConfluentConsumer, str]) -> None:
    source_topic, sink_topic, consumer, group = source
    records = _read_source(consumer, 5)
    producer = transactional(cluster, "aborting")
    producer.begin_transaction()
    for record in records:
        producer.produce(sink_topic, value=record.value())  # type: ignore[attr-defined]
    producer.send_offsets_to_transaction(
        [ConfluentTopicPartition(source_topic, 0, 5)], consumer.consumer_group_metadata(),
        TIMEOUT_S)
    assert producer.flush(TIMEOUT_S) == 0
    producer.abort_transaction(TIMEOUT_S)
    # A committed transaction after it, by another producer: the reader gets this far.
    after = transactional(cluster, "after-abort")
    after.begin_transaction()
    after.produce(sink_topic, value=b"committed")
    after.commit_transaction(TIMEOUT_S)
    assert read_all(cluster, sink_topic, "read_committed", 1) == [b"committed"]
    assert len(read_all(cluster, sink_topic, "read_uncommitted", 6)) == 6
    with Admin(cluster.bootstrap) as admin:
        assert admin.list_group_offsets(group) == {}  # the aborted offsets are gone


def test_an_open_transaction_is_described_and_listed(cluster: SdkCluster) -> None:
    (topic,) = new_topics(cluster, "described", partitions=2)
    transactional_id = unique("described")
    producer = transactional(cluster, "described", transactional_id)
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=1)
    assert producer.flush(TIMEOUT_S) == 0
    try:
        with RawKafkaClient(cluster.kafka_bootstrap) as wire:
            listed = wire.call(list_request.ListTransactionsRequest(
                state_filters=("Ongoing",), producer_id_filters=(), duration_filter=i64(-1)),
                list_response.ListTransactionsResponse)
            described = wire.call(describe_request.DescribeTransactionsRequest(
                transactional_ids=(TransactionalId(transactional_id),
                                   TransactionalId(unique("unknown")))),
                describe_response.DescribeTransactionsResponse)
    finally:
        producer.abort_transaction(TIMEOUT_S)
    assert listed.error_code is KafkaError.none
    assert transactional_id in {t.transactional_id for t in listed.transaction_states}
    state, unknown = described.transaction_states
    assert (state.error_code, state.transaction_state) == (KafkaError.none, "Ongoing")
    assert [(t.topic, t.partitions) for t in state.topics] == [(topic, (1,))]
    assert state.producer_id >= 0
    assert unknown.error_code is KafkaError.transactional_id_not_found


def test_a_producer_runs_transaction_after_transaction(cluster: SdkCluster) -> None:
    """librdkafka keeps its epoch from one transaction to the next (EndTxn before v5,
    transaction version 1): the coordinator keeps it too for such an end."""
    (topic,) = new_topics(cluster, "serial")
    producer = transactional(cluster, "serial")
    for i in range(3):
        producer.begin_transaction()
        producer.produce(topic, value=str(i).encode())
        producer.commit_transaction(TIMEOUT_S)
    assert read_all(cluster, topic, "read_committed", 3) == [b"0", b"1", b"2"]
