"""The gateway's Kafka listener with unchanged Kafka clients, end to end: kcat
(librdkafka), kafka-python, aiokafka and confluent-kafka against a local cluster of
real processes, records crossing between them and Strand's own SDK, and the protocol
itself (fetch sessions, unsupported versions, bad frames) with raw kio requests."""

from __future__ import annotations

import asyncio
import datetime
import json
import shutil
import subprocess
import time
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.fetch.v12 import request as fetch12
from kio.schema.fetch.v12.response import FetchResponse as FetchResponseV12
from kio.schema.fetch.v13 import request as fetch13
from kio.schema.fetch.v13.response import FetchResponse as FetchResponseV13
from kio.schema.metadata.v12 import request as metadata12
from kio.schema.metadata.v12.response import MetadataResponse as MetadataResponseV12
from kio.schema.types import TopicName
from kio.serial import entity_reader
from kio.static.primitive import i8, i32, i32Timedelta, i64

from strand import Admin, Consumer, NewTopic, Producer, TopicPartition
from strand.launcher import Cluster
from strand.security.quotas import QuotaEntity
from tests.support.cluster import unique
from tests.support.kafka_wire import RawKafkaClient

pytestmark = pytest.mark.slow

CODECS = (None, "gzip", "snappy", "lz4", "zstd")


@pytest.fixture(scope="module")
def cluster(txn_cluster: Cluster) -> Cluster:
    """The package's shared cluster (three storage nodes, a group and a transaction
    coordinator): these tests use topics of their own and stop nothing."""
    return txn_cluster


def new_topic(cluster: Cluster, name: str, partitions: int = 2, replicas: int = 1) -> str:
    topic = unique(name)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, replicas,
                                      config={"retention.ms": "-1"})])
    return topic


def kcat(*args: str, stdin: str | None = None) -> str:
    path = shutil.which("kcat")
    if path is None:
        pytest.fail("kcat is not installed: run `make test-deps`")
    done = subprocess.run([path, *args], input=stdin, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, f"kcat {' '.join(args)}: {done.stderr}"
    return done.stdout


def kafka_consume(cluster: Cluster, topic: str, partition: int, count: int) -> list[Any]:
    consumer = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap,
                             enable_auto_commit=False, consumer_timeout_ms=5000)
    try:
        tp = KafkaTopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        records = []
        for record in consumer:
            records.append(record)
            if len(records) == count:
                break
        return records
    finally:
        consumer.close()


# -- kcat (librdkafka) ----------------------------------------------------------------------

def test_kcat_lists_metadata(cluster: Cluster) -> None:
    topic = new_topic(cluster, "kcat-meta", partitions=3, replicas=3)
    listing = json.loads(kcat("-b", cluster.kafka_bootstrap, "-L", "-J", "-t", topic))
    host, port = cluster.kafka_bootstrap.split(":")
    assert listing["brokers"] == [{"id": 0, "name": f"{host}:{port}"}]
    [described] = listing["topics"]
    assert described["topic"] == topic
    # Every partition led by the gateways' broker; replicas and ISR: the storage nodes.
    assert [(p["partition"], p["leader"], sorted(r["id"] for r in p["replicas"]),
             sorted(r["id"] for r in p["isrs"])) for p in described["partitions"]] == [
        (index, 0, [1, 2, 3], [1, 2, 3]) for index in range(3)]


def test_kcat_produces_and_consumes_keys_and_headers(cluster: Cluster) -> None:
    topic = new_topic(cluster, "kcat-data", partitions=1)
    kcat("-b", cluster.kafka_bootstrap, "-P", "-t", topic, "-K", ":", "-H", "trace=abc",
         "-H", "n=1", stdin="k1:v1\nk2:v2\nk3:v3\n")
    out = kcat("-b", cluster.kafka_bootstrap, "-C", "-t", topic, "-e", "-q", "-f",
               "%p|%o|%k|%s|%h\n")
    assert out.splitlines() == [f"0|{i}|k{i + 1}|v{i + 1}|trace=abc,n=1" for i in range(3)]


# -- kafka-python -----------------------------------------------------------------------------

@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_kafka_python_produces_every_codec(cluster: Cluster, acks: int | str) -> None:
    topic = new_topic(cluster, "kp-codecs", partitions=1)
    for codec in CODECS:
        producer = KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap,
                                 compression_type=codec, acks=acks,
                                 enable_idempotence=False, linger_ms=5)
        try:
            futures = [producer.send(topic, key=f"{codec}-{i}".encode(),
                                     value=f"value {i} {codec}".encode() * 20,
                                     headers=[("codec", str(codec).encode())], partition=0)
                       for i in range(5)]
            producer.flush(timeout=30)
            metadata = [future.get(timeout=30) for future in futures]
        finally:
            producer.close()
        if acks != 0:  # acks=0: no answer, so no offsets
            assert [m.offset for m in metadata] == list(range(
                metadata[0].offset, metadata[0].offset + 5))
    records = kafka_consume(cluster, topic, 0, 5 * len(CODECS))
    assert [r.offset for r in records] == list(range(5 * len(CODECS)))
    assert [(r.key, r.value, r.headers) for r in records] == [
        (f"{codec}-{i}".encode(), f"value {i} {codec}".encode() * 20,
         [("codec", str(codec).encode())]) for codec in CODECS for i in range(5)]


def test_kafka_python_lists_offsets_by_time(cluster: Cluster) -> None:
    topic = new_topic(cluster, "kp-times", partitions=1)
    producer = KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap,
                             enable_idempotence=False)
    try:
        for i in range(10):
            producer.send(topic, value=b"x", partition=0, timestamp_ms=1_000_000 + 10 * i)
        producer.flush(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        tp = KafkaTopicPartition(topic, 0)
        found = consumer.offsets_for_times({tp: 1_000_035})[tp]
        assert found is not None and (found.offset, found.timestamp) == (4, 1_000_040)
        assert consumer.offsets_for_times({tp: 9_000_000})[tp] is None
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 10}
    finally:
        consumer.close()


# -- aiokafka ---------------------------------------------------------------------------------

def test_aiokafka_produces_and_consumes(cluster: Cluster) -> None:
    topic = new_topic(cluster, "aio", partitions=2)

    async def scenario() -> list[Any]:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.kafka_bootstrap,
                                    compression_type="zstd", acks="all")
        await producer.start()
        try:
            for i in range(6):
                await producer.send_and_wait(topic, f"v{i}".encode(), key=f"k{i}".encode(),
                                             headers=[("i", str(i).encode())],
                                             partition=i % 2)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            tps = [AioTopicPartition(topic, p) for p in (0, 1)]
            consumer.assign(tps)
            got: list[Any] = []
            while len(got) < 6:
                batch = await consumer.getmany(*tps, timeout_ms=5000)
                assert batch, f"only {len(got)} of 6 records came"
                got.extend(r for records in batch.values() for r in records)
            assert await consumer.end_offsets(tps) == {tps[0]: 3, tps[1]: 3}
            return got
        finally:
            await consumer.stop()

    got = asyncio.run(scenario())
    assert sorted((r.partition, r.offset, r.key, r.value, tuple(r.headers)) for r in got) == \
        sorted((i % 2, i // 2, f"k{i}".encode(), f"v{i}".encode(), (("i", str(i).encode()),))
               for i in range(6))


# -- both paths: the SDK over gRPC, Kafka clients over the Kafka listener --------------------

def test_sdk_records_read_back_identically_by_kafka_clients(cluster: Cluster) -> None:
    topic = new_topic(cluster, "sdk-to-kafka", partitions=1)
    sent = [(f"k{i}".encode() if i % 3 else None, f"value-{i}".encode(),
             [("h", str(i).encode()), ("empty", None)], 1_700_000_000_000 + i)
            for i in range(20)]
    with Producer(cluster.bootstrap, compression_type="lz4") as producer:
        for key, value, headers, timestamp in sent:
            producer.send(topic, value, key=key, headers=headers, partition=0,
                          timestamp_ms=timestamp)
    records = kafka_consume(cluster, topic, 0, len(sent))
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in records] == [
        (offset, key, value, headers, timestamp)
        for offset, (key, value, headers, timestamp) in enumerate(sent)]


def test_kafka_client_records_read_back_identically_by_the_sdk(cluster: Cluster) -> None:
    topic = new_topic(cluster, "kafka-to-sdk", partitions=1)
    sent = [(f"k{i}".encode(), f"value-{i}".encode() if i % 4 else None,
             [("h", str(i).encode())], 1_600_000_000_000 + i) for i in range(20)]
    producer = KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap,
                             compression_type="gzip", enable_idempotence=False)
    try:
        for key, value, headers, timestamp in sent:
            producer.send(topic, key=key, value=value, headers=headers, partition=0,
                          timestamp_ms=timestamp)
        producer.flush(timeout=30)
    finally:
        producer.close()
    with Consumer(cluster.bootstrap) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        got: list[Any] = []
        while len(got) < len(sent):
            polled = consumer.poll(timeout_ms=5000)
            assert polled, f"only {len(got)} of {len(sent)} records came"
            got.extend(r for records in polled.values() for r in records)
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in got] == [
        (offset, key, value, headers, timestamp)
        for offset, (key, value, headers, timestamp) in enumerate(sent)]


def test_read_committed_skips_aborted_transactions(cluster: Cluster) -> None:
    topic = new_topic(cluster, "txn-read", partitions=1, replicas=3)
    with Producer(cluster.bootstrap, transactional_id=unique("kafka-wire")) as producer:
        producer.init_transactions(30)
        for outcome in ("committed", "aborted", "committed-too"):
            producer.begin_transaction()
            for i in range(3):
                producer.send(topic, f"{outcome}-{i}".encode(), partition=0)
            producer.flush(30)
            if outcome == "aborted":
                producer.abort_transaction(30)
            else:
                producer.commit_transaction(30)

    def values(isolation_level: str) -> list[bytes]:
        consumer = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap,
                                 isolation_level=isolation_level, enable_auto_commit=False,
                                 consumer_timeout_ms=3000)
        try:
            tp = KafkaTopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            return [record.value for record in consumer]
        finally:
            consumer.close()

    expected = [f"{o}-{i}".encode() for o in ("committed", "committed-too") for i in range(3)]
    assert values("read_committed") == expected
    assert len(values("read_uncommitted")) == 9


def test_confluent_kafka_produces_and_consumes(cluster: Cluster) -> None:
    from confluent_kafka import Consumer as RdConsumer
    from confluent_kafka import Producer as RdProducer
    from confluent_kafka import TopicPartition as RdTopicPartition

    topic = new_topic(cluster, "rdkafka", partitions=1)
    producer = RdProducer({"bootstrap.servers": cluster.kafka_bootstrap, "acks": "all",
                           "compression.type": "snappy", "enable.idempotence": False})
    for i in range(50):
        producer.produce(topic, value=f"v{i}".encode(), key=f"k{i}".encode(), partition=0,
                         headers=[("i", str(i).encode())])
    assert producer.flush(30) == 0
    consumer = RdConsumer({"bootstrap.servers": cluster.kafka_bootstrap,
                           "group.id": unique("unused"), "enable.auto.commit": False})
    try:
        consumer.assign([RdTopicPartition(topic, 0, 0)])
        got: list[Any] = []
        while len(got) < 50:
            message = consumer.poll(10)
            assert message is not None, f"only {len(got)} of 50 records came"
            assert message.error() is None, message.error()
            got.append(message)
    finally:
        consumer.close()
    assert [(m.offset(), m.key(), m.value(), m.headers()) for m in got] == [
        (i, f"k{i}".encode(), f"v{i}".encode(), [("i", str(i).encode())]) for i in range(50)]


# -- the protocol, raw -----------------------------------------------------------------------

def _fetch12(topic: str, partitions: dict[int, int], session_id: int, epoch: int,
             forgotten: tuple[int, ...] = ()) -> fetch12.FetchRequest:
    return fetch12.FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=100)), min_bytes=i32(0),
        isolation_level=i8(0), session_id=i32(session_id), session_epoch=i32(epoch),
        topics=(fetch12.FetchTopic(topic=TopicName(topic), partitions=tuple(
            fetch12.FetchPartition(partition=i32(p), fetch_offset=i64(offset),
                                   partition_max_bytes=i32(1 << 20))
            for p, offset in partitions.items())),) if partitions else (),
        forgotten_topics_data=(fetch12.ForgottenTopic(topic=TopicName(topic), partitions=tuple(
            i32(p) for p in forgotten)),) if forgotten else ())


def _answered(response: Any) -> dict[int, tuple[int, int]]:
    """partition -> (high watermark, bytes of records) of a one-topic fetch answer."""
    return {p.partition_index: (p.high_watermark, len(p.records or b""))
            for topic in response.responses for p in topic.partitions}


def test_incremental_fetch_sessions(cluster: Cluster) -> None:
    # One leader for the three: a fetch spanning leaders answers from the first with
    # news (the others' partitions come back empty, high watermark unknown).
    topic = unique("sessions")
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, replica_assignment={p: [1] for p in range(3)})])
    with Producer(cluster.bootstrap) as producer:
        for p in range(3):
            producer.send(topic, b"first", partition=p)
    with RawKafkaClient(cluster.kafka_bootstrap) as client:
        full = client.call(_fetch12(topic, {0: 0, 1: 0, 2: 0}, 0, 0), FetchResponseV12)
        assert full.error_code == KafkaErrorCode.none and full.session_id != 0
        assert {p: hw for p, (hw, _) in _answered(full).items()} == {0: 1, 1: 1, 2: 1}
        session = full.session_id
        # Nothing changed: the incremental answer names no partition.
        quiet = client.call(_fetch12(topic, {0: 1, 1: 1, 2: 1}, session, 1), FetchResponseV12)
        assert (quiet.session_id, _answered(quiet)) == (session, {})
        with Producer(cluster.bootstrap) as producer:
            producer.send(topic, b"second", partition=1)
        changed = client.call(_fetch12(topic, {}, session, 2), FetchResponseV12)
        answered = _answered(changed)
        assert list(answered) == [1] and answered[1][0] == 2 and answered[1][1] > 0
        # Partition 2 forgotten, then new records there go unmentioned.
        client.call(_fetch12(topic, {1: 2}, session, 3, forgotten=(2,)), FetchResponseV12)
        with Producer(cluster.bootstrap) as producer:
            producer.send(topic, b"third", partition=2)
        assert _answered(client.call(_fetch12(topic, {}, session, 4), FetchResponseV12)) == {}
        stale = client.call(_fetch12(topic, {}, session, 4), FetchResponseV12)
        assert stale.error_code == KafkaErrorCode.invalid_fetch_session_epoch
        unknown = client.call(_fetch12(topic, {}, session + 1, 1), FetchResponseV12)
        assert unknown.error_code == KafkaErrorCode.fetch_session_id_not_found
        # A sessionless full fetch (epoch -1) opens no session.
        sessionless = client.call(_fetch12(topic, {0: 0}, 0, -1), FetchResponseV12)
        assert sessionless.session_id == 0 and list(_answered(sessionless)) == [0]


def test_fetch_by_topic_id_and_metadata_v12(cluster: Cluster) -> None:
    topic = new_topic(cluster, "ids", partitions=1)
    with Producer(cluster.bootstrap) as producer:
        producer.send(topic, b"by id", partition=0)
    with RawKafkaClient(cluster.kafka_bootstrap) as client:
        metadata = client.call(metadata12.MetadataRequest(
            topics=(metadata12.MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False),
            MetadataResponseV12)
        [described] = metadata.topics
        assert described.error_code == KafkaErrorCode.none and described.name == topic
        topic_id = described.topic_id
        ghost = uuid.uuid4()
        fetched = client.call(fetch13.FetchRequest(
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=100)), min_bytes=i32(0),
            topics=tuple(fetch13.FetchTopic(topic_id=tid, partitions=(
                fetch13.FetchPartition(partition=i32(0), fetch_offset=i64(0),
                                       partition_max_bytes=i32(1 << 20)),))
                for tid in (topic_id, ghost)),
            forgotten_topics_data=()), FetchResponseV13)
        by_id = {t.topic_id: t.partitions[0] for t in fetched.responses}
        assert by_id[topic_id].error_code == KafkaErrorCode.none
        assert by_id[topic_id].high_watermark == 1 and by_id[topic_id].records
        assert by_id[ghost].error_code == KafkaErrorCode.unknown_topic_id


def test_unsupported_versions_and_bad_frames(cluster: Cluster) -> None:
    with RawKafkaClient(cluster.kafka_bootstrap) as client:
        served = client.call(ApiVersionsRequest(client_software_name="raw-test",
                                                client_software_version="1.0"),
                             ApiVersionsResponse)
        assert served.error_code == KafkaErrorCode.none
        versions = {k.api_key: (k.min_version, k.max_version) for k in served.api_keys}
        assert versions[18] == (0, 4) and versions[1] == (4, 17) and versions[0] == (3, 11)
        # ApiVersions of a version from the future: v0 answer, with the versions served.
        frame = bytearray(client.encode(ApiVersionsRequest(
            client_software_name="raw-test", client_software_version="1.0")))
        frame[2:4] = (99).to_bytes(2, "big")
        client.send_frame(bytes(frame))
        answer, _ = entity_reader(ApiVersionsV0)(client.receive_frame(), 4)
        assert answer.error_code == KafkaErrorCode.unsupported_version
        assert {k.api_key for k in answer.api_keys} == set(versions)
    with RawKafkaClient(cluster.kafka_bootstrap) as client:  # an API never served: closed
        client.send_frame(b"\x7f\x00\x00\x00\x00\x00\x00\x01\xff\xff")
        with pytest.raises(ConnectionError):
            client.receive_frame()
    with RawKafkaClient(cluster.kafka_bootstrap) as client:  # garbage: closed
        client.send_frame(b"\x00\x03\x00\x0c\x00")
        with pytest.raises(ConnectionError):
            client.receive_frame()
    with RawKafkaClient(cluster.kafka_bootstrap) as client:  # over the size limit: closed
        client.sock.sendall((200 * 1024 * 1024).to_bytes(4, "big"))
        with pytest.raises(ConnectionError):
            client.receive_frame()
    # The listener goes on serving everyone else.
    assert json.loads(kcat("-b", cluster.kafka_bootstrap, "-L", "-J"))["brokers"]


def _requests_in(client: RawKafkaClient, seconds: float) -> tuple[int, int]:
    """(Metadata requests answered in ``seconds``, the longest throttle time told)."""
    request = metadata12.MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                         include_topic_authorized_operations=False)
    deadline = time.monotonic() + seconds
    answered = longest_ms = 0
    while time.monotonic() < deadline:
        answer = client.call(request, MetadataResponseV12)
        answered += 1
        longest_ms = max(longest_ms, int(answer.throttle_time.total_seconds() * 1000))
    return answered, longest_ms


def test_the_request_time_quota_throttles_a_busy_kafka_client(cluster: Cluster) -> None:
    busy, free = unique("kafka-busy"), unique("kafka-free")
    with Admin(cluster.bootstrap) as admin:
        admin.alter_client_quotas(QuotaEntity(client_id=busy), set={"request_percentage": 0.1})
    try:
        with RawKafkaClient(cluster.kafka_bootstrap, client_id=free) as client:
            free_count, free_throttle = _requests_in(client, 2)
        with RawKafkaClient(cluster.kafka_bootstrap, client_id=busy) as client:
            busy_count, busy_throttle = _requests_in(client, 2)
        assert busy_count < free_count / 3, (busy_count, free_count)
        assert busy_throttle > 0 and free_throttle == 0
    finally:
        with Admin(cluster.bootstrap) as admin:
            admin.alter_client_quotas(QuotaEntity(client_id=busy),
                                      remove=["request_percentage"])


def test_authentication_required_allows_only_the_handshake_apis(
        secured_cluster: Cluster) -> None:
    """A gateway requiring authentication answers ApiVersions before it, and closes a
    connection sending anything else first (Kafka's SASL rule)."""
    with RawKafkaClient(secured_cluster.kafka_bootstrap) as client:
        served = client.call(ApiVersionsRequest(client_software_name="raw-test",
                                                client_software_version="1.0"),
                             ApiVersionsResponse)
        assert served.error_code == KafkaErrorCode.none
        client.send_frame(client.encode(metadata12.MetadataRequest(
            topics=None, allow_auto_topic_creation=False,
            include_topic_authorized_operations=False)))
        with pytest.raises(ConnectionError):
            client.receive_frame()
