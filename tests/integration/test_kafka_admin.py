"""The Kafka listener's admin APIs with unchanged Kafka admin clients against a local
cluster of real processes: confluent-kafka's AdminClient (librdkafka) and
kafka-python's KafkaAdminClient create, describe, alter and delete topics and their
configs, add partitions, list topics and describe the cluster; the results agree with Strand's own
SDK both ways; OffsetForLeaderEpoch answers where each leader epoch ends after a
leader change (raw kio requests)."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

# The defining modules: confluent_kafka.admin re-exports these without declaring them.
from confluent_kafka.admin._config import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from confluent_kafka.cimpl import NewPartitions
from confluent_kafka.cimpl import NewTopic as RdNewTopic
from kafka.admin import ConfigResource as PyConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewPartitions as PyNewPartitions
from kafka.admin import NewTopic as PyNewTopic
from kio.schema.alter_configs.v2 import request as alter2
from kio.schema.alter_configs.v2.response import AlterConfigsResponse as AlterConfigsV2
from kio.schema.delete_topics.v6 import request as delete6
from kio.schema.delete_topics.v6.response import DeleteTopicsResponse as DeleteTopicsV6
from kio.schema.describe_cluster.v1 import request as cluster1
from kio.schema.describe_cluster.v1.response import DescribeClusterResponse as DescribeClusterV1
from kio.schema.describe_configs.v4 import request as describe4
from kio.schema.describe_configs.v4.response import DescribeConfigsResponse as DescribeConfigsV4
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.offset_for_leader_epoch.v4 import request as epoch4
from kio.schema.offset_for_leader_epoch.v4.response import (
    OffsetForLeaderEpochResponse as EpochResponseV4,
)
from kio.schema.types import TopicName
from kio.static.primitive import i8, i32, i32Timedelta

from strand import Admin, NewTopic, Producer
from strand.launcher import Cluster
from tests.support.cluster import start_sdk_cluster, unique
from tests.support.kafka_wire import RawKafkaClient

pytestmark = pytest.mark.slow

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = start_sdk_cluster(tmp_path_factory.mktemp("kafka-admin"), nodes=2,
                                name="kafka-admin")
    yield started
    started.stop()


@pytest.fixture(scope="module")
def kafka_admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})


@pytest.fixture(scope="module")
def sdk(cluster: Cluster) -> Iterator[Admin]:
    with Admin(cluster.bootstrap) as admin:
        yield admin


@pytest.fixture(scope="module")
def py_admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap,
                              request_timeout_ms=TIMEOUT_S * 1000)
    yield client
    client.close()


def _eventually(check: Callable[[], bool], what: str, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(0.2)


def _error_of(future: Any) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=TIMEOUT_S)
    error: KafkaError = raised.value.args[0]
    return error


def _shape(cluster: Cluster, topic: str) -> tuple[int, set[int]]:
    """(partitions, replication factors) of ``topic`` as Strand's SDK sees it."""
    with Admin(cluster.bootstrap) as admin:
        partitions = admin.describe_topics([topic])[0].partitions
    return len(partitions), {len(p.replicas) for p in partitions}


# -- CreateTopics --------------------------------------------------------------------------------

def test_create_topics_defaults_explicit_and_configs(cluster: Cluster,
                                                     kafka_admin: AdminClient,
                                                     py_admin: KafkaAdminClient) -> None:
    plain, sized, placed = unique("k-plain"), unique("k-sized"), unique("k-placed")
    futures = kafka_admin.create_topics([
        RdNewTopic(plain),  # -1 and -1: the broker defaults
        RdNewTopic(sized, num_partitions=3, replication_factor=2,
                      config={"retention.ms": "3600000", "cleanup.policy": "compact"}),
        RdNewTopic(placed, num_partitions=2, replica_assignment=[[2, 1], [1, 2]]),
    ], operation_timeout=TIMEOUT_S)
    for future in futures.values():
        future.result(timeout=TIMEOUT_S)
    # Answered once this gateway's metadata has them: the next Metadata lists them.
    listed = {t["name"]: t for t in py_admin.describe_topics([plain, sized, placed])}
    assert [len(listed[name]["partitions"]) for name in (plain, sized, placed)] == [1, 3, 2]
    assert _shape(cluster, plain) == (1, {1})
    assert _shape(cluster, sized) == (3, {2})
    with Admin(cluster.bootstrap) as admin:
        configs = admin.describe_configs(sized)
        assert configs["retention.ms"].value == "3600000"
        assert not configs["retention.ms"].is_default
        assert admin.describe_configs(plain)["retention.ms"].is_default
        placement = {p.partition: p.replicas
                     for p in admin.describe_topics([placed])[0].partitions}
    assert placement == {0: (2, 1), 1: (1, 2)}


def test_create_topics_validate_only_and_typed_errors(cluster: Cluster,
                                                      kafka_admin: AdminClient) -> None:
    checked, existing = unique("k-checked"), unique("k-existing")
    kafka_admin.create_topics([RdNewTopic(existing, 1, 1)])[existing].result(TIMEOUT_S)
    futures = kafka_admin.create_topics([
        RdNewTopic(checked, 2, 1),
        RdNewTopic(unique("k-toomany"), 1, 3),
        RdNewTopic(unique("k-badconfig"), 1, 1, config={"retention.ms": "soon"}),
        RdNewTopic(unique("k-unknownconfig"), 1, 1, config={"no.such.config": "1"}),
        RdNewTopic(unique("k-zero"), 0, 1),
        RdNewTopic(existing, 1, 1),
    ], validate_only=True)
    results = list(futures.values())
    results[0].result(timeout=TIMEOUT_S)  # valid: fine, and not created
    codes = [_error_of(future).code() for future in results[1:]]
    assert codes == [KafkaError.INVALID_REPLICATION_FACTOR, KafkaError.INVALID_CONFIG,
                     KafkaError.INVALID_CONFIG, KafkaError.INVALID_PARTITIONS,
                     KafkaError.TOPIC_ALREADY_EXISTS]
    with Admin(cluster.bootstrap) as admin:
        assert checked not in admin.list_topics()


def test_create_topics_with_kafka_python(cluster: Cluster,
                                         py_admin: KafkaAdminClient) -> None:
    topic = unique("py-created")
    py_admin.create_topics([PyNewTopic(topic, 2, 1, topic_configs={"retention.ms": "60000"})])
    assert _shape(cluster, topic) == (2, {1})
    with Admin(cluster.bootstrap) as admin:
        assert admin.describe_configs(topic)["retention.ms"].value == "60000"


# -- configs -------------------------------------------------------------------------------------

def test_describe_configs_of_a_topic_made_with_the_sdk(cluster: Cluster,
                                                       kafka_admin: AdminClient) -> None:
    topic = unique("sdk-made")
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "120000"})])
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = kafka_admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    retention = entries["retention.ms"]
    assert retention.value == "120000"
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not retention.is_read_only and not retention.is_sensitive
    assert [s.name for s in retention.synonyms.values()] == ["retention.ms", "log.retention.ms"]
    policy = entries["cleanup.policy"]
    assert (policy.value, policy.source) == ("delete", ConfigSource.DEFAULT_CONFIG.value)


def test_describe_the_broker_resource(cluster: Cluster, kafka_admin: AdminClient,
                                      py_admin: KafkaAdminClient) -> None:
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    entries = kafka_admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    assert entries["num.partitions"].value == "1"
    assert entries["log.retention.ms"].value == str(7 * 24 * 3600 * 1000)
    assert all(e.is_read_only for e in entries.values())
    # Another broker id (librdkafka would send that to a broker 7, which is not listed).
    with RawKafkaClient(cluster.kafka_bootstrap) as raw:
        answer = raw.call(describe4.DescribeConfigsRequest(resources=(
            describe4.DescribeConfigsResource(resource_type=i8(4), resource_name="7",
                                              configuration_keys=None),)),
            DescribeConfigsV4)
    (elsewhere,) = answer.results
    assert elsewhere.error_code == KafkaErrorCode.invalid_request
    assert "not this broker" in (elsewhere.error_message or "")


def test_incremental_alter_configs_seen_by_the_sdk(sdk: Admin,
                                                   kafka_admin: AdminClient) -> None:
    topic = unique("k-altered")
    sdk.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "120000"})])
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact",
                    incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("max.message.bytes", "200000",
                    incremental_operation=AlterConfigOpType.SET),
    ])
    kafka_admin.incremental_alter_configs([resource])[resource].result(timeout=TIMEOUT_S)

    def applied() -> bool:
        configs = sdk.describe_configs(topic)
        return (set(configs["cleanup.policy"].value.split(",")) == {"delete", "compact"}
                and configs["retention.ms"].is_default
                and configs["max.message.bytes"].value == "200000")

    _eventually(applied, "the incremental alteration")
    wrong = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND)])
    error = _error_of(kafka_admin.incremental_alter_configs([wrong])[wrong])
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "not a list" in error.str()
    broker = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[
        ConfigEntry("log.retention.ms", "5", incremental_operation=AlterConfigOpType.SET)])
    error = _error_of(kafka_admin.incremental_alter_configs([broker])[broker])
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "read-only" in error.str()


def test_legacy_alter_configs_replaces_the_overrides(cluster: Cluster, sdk: Admin,
                                                     py_admin: KafkaAdminClient) -> None:
    topic = unique("py-altered")
    sdk.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "120000"})])
    # kafka-python re-sends the topic's other overrides itself (its legacy alter keeps them).
    py_admin.alter_configs([PyConfigResource(ConfigResourceType.TOPIC, topic,
                                             configs={"segment.ms": "600000"})],
                           incremental=False)
    _eventually(lambda: sdk.describe_configs(topic)["segment.ms"].value == "600000",
                "kafka-python's alteration")
    assert sdk.describe_configs(topic)["retention.ms"].value == "120000"
    modified = py_admin.describe_configs(  # kafka-python's default: the overrides only
        [PyConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
    assert set(modified) == {"retention.ms", "segment.ms"}
    assert (modified["segment.ms"]["value"], modified["segment.ms"]["config_source"],
            modified["segment.ms"]["config_type"]) == ("600000", "DYNAMIC_TOPIC_CONFIG", "LONG")
    # The protocol's own meaning: the configs given become the whole set of overrides.
    with RawKafkaClient(cluster.kafka_bootstrap) as raw:
        answer = raw.call(alter2.AlterConfigsRequest(validate_only=False, resources=(
            alter2.AlterConfigsResource(resource_type=i8(2), resource_name=topic, configs=(
                alter2.AlterableConfig(name="max.message.bytes", value="300000"),)),)),
            AlterConfigsV2)
    assert answer.responses[0].error_code == KafkaErrorCode.none

    def replaced() -> bool:
        configs = sdk.describe_configs(topic)
        return (configs["max.message.bytes"].value == "300000"
                and configs["retention.ms"].is_default and configs["segment.ms"].is_default)

    _eventually(replaced, "the legacy alteration")


# -- partitions, deletion, the cluster -------------------------------------------------------

def test_create_partitions(cluster: Cluster, kafka_admin: AdminClient,
                           py_admin: KafkaAdminClient) -> None:
    topic = unique("k-grown")
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    checked = kafka_admin.create_partitions([NewPartitions(topic, 5)], validate_only=True)
    checked[topic].result(timeout=TIMEOUT_S)
    assert _shape(cluster, topic) == (1, {1})
    grown = kafka_admin.create_partitions([NewPartitions(topic, 3,
                                                         replica_assignment=[[2], [1]])])
    grown[topic].result(timeout=TIMEOUT_S)
    with Admin(cluster.bootstrap) as admin:
        replicas = {p.partition: p.replicas for p in admin.describe_topics([topic])[0].partitions}
    assert replicas[1] == (2,) and replicas[2] == (1,)
    shrink = kafka_admin.create_partitions([NewPartitions(topic, 2)])
    assert _error_of(shrink[topic]).code() == KafkaError.INVALID_PARTITIONS
    py_admin.create_partitions({topic: PyNewPartitions(total_count=4)})
    assert _shape(cluster, topic)[0] == 4


def test_delete_topics_by_name_and_by_id(cluster: Cluster, sdk: Admin,
                                         kafka_admin: AdminClient,
                                         py_admin: KafkaAdminClient) -> None:
    by_name, by_py, by_id = unique("k-gone"), unique("py-gone"), unique("id-gone")
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(name, 1, 1) for name in (by_name, by_py, by_id)])
        topic_id = uuid.UUID(admin.describe_topics([by_id])[0].topic_id)
    kafka_admin.delete_topics([by_name])[by_name].result(timeout=TIMEOUT_S)
    py_admin.delete_topics([by_py])
    with RawKafkaClient(cluster.kafka_bootstrap) as raw:
        answer = raw.call(delete6.DeleteTopicsRequest(topics=(
            delete6.DeleteTopicState(name=None, topic_id=topic_id),
            delete6.DeleteTopicState(name=None, topic_id=uuid.uuid4())),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=30))), DeleteTopicsV6)
    first, unknown = answer.responses
    assert (first.name, first.topic_id, first.error_code) == (by_id, topic_id,
                                                              KafkaErrorCode.none)
    assert unknown.error_code == KafkaErrorCode.unknown_topic_id

    # Answered once this gateway's metadata no longer has them.
    assert not {by_name, by_py, by_id} & set(sdk.list_topics())
    assert not {by_name, by_py, by_id} & set(py_admin.list_topics())
    missing = kafka_admin.delete_topics([by_name])[by_name]
    assert _error_of(missing).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_cluster(cluster: Cluster, kafka_admin: AdminClient,
                          py_admin: KafkaAdminClient) -> None:
    described = kafka_admin.describe_cluster(
        include_authorized_operations=True).result(timeout=TIMEOUT_S)
    host, port = cluster.kafka_bootstrap.rsplit(":", 1)
    assert [(n.id, n.host, n.port) for n in described.nodes] == [(0, host, int(port))]
    assert described.controller.id == 0
    with Admin(cluster.bootstrap) as admin:
        assert described.cluster_id == admin.describe_cluster().cluster_id
    py_described = py_admin.describe_cluster()
    assert py_described["cluster_id"] == described.cluster_id
    with RawKafkaClient(cluster.kafka_bootstrap) as raw:
        answer = raw.call(cluster1.DescribeClusterRequest(
            include_cluster_authorized_operations=True, endpoint_type=i8(1)),
            DescribeClusterV1)
        controllers = raw.call(cluster1.DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=i8(2)),
            DescribeClusterV1)
    # No authorizer: every cluster operation (KIP-430's bits: CREATE 5 ... IDEMPOTENT_WRITE 12).
    assert answer.cluster_authorized_operations == sum(
        1 << code for code in (5, 7, 8, 9, 10, 11, 12))
    assert [(b.broker_id, b.host, b.port) for b in answer.brokers] == [(0, host, int(port))]
    assert controllers.error_code == KafkaErrorCode.invalid_request


def test_list_topics_lists_every_topic(cluster: Cluster, kafka_admin: AdminClient,
                                       sdk: Admin) -> None:
    """AdminClient.list_topics() asks Metadata (v12) for every topic with bytes after
    the body (librdkafka's unshrunk array-count placeholder): answered, as Kafka does,
    not a closed connection."""
    topic = unique("listed")
    sdk.create_topics([NewTopic(topic, 3, 1)])
    listing = kafka_admin.list_topics(timeout=TIMEOUT_S)
    assert topic in listing.topics
    assert set(listing.topics) == set(sdk.list_topics(include_internal=True))
    assert sorted(listing.topics[topic].partitions) == [0, 1, 2]
    host, port = cluster.kafka_bootstrap.rsplit(":", 1)
    assert [(b.id, str(b.host), b.port) for b in listing.brokers.values()] == [
        (0, host, int(port))]
    # One topic by name: the request without bytes after its body, answered alike.
    assert list(kafka_admin.list_topics(topic, timeout=TIMEOUT_S).topics) == [topic]


# -- OffsetForLeaderEpoch ----------------------------------------------------------------------

def _epoch_end(cluster: Cluster, topic: str, epoch: int,
               current: int = -1) -> tuple[KafkaErrorCode, int, int]:
    with RawKafkaClient(cluster.kafka_bootstrap) as raw:
        answer = raw.call(epoch4.OffsetForLeaderEpochRequest(topics=(
            epoch4.OffsetForLeaderTopic(topic=TopicName(topic), partitions=(
                epoch4.OffsetForLeaderPartition(partition=i32(0),
                                                current_leader_epoch=i32(current),
                                                leader_epoch=i32(epoch)),)),)),
            EpochResponseV4)
    (result,) = answer.topics[0].partitions
    return result.error_code, result.leader_epoch, result.end_offset


def _leader(cluster: Cluster, topic: str) -> tuple[int | None, int, tuple[int, ...]]:
    with Admin(cluster.bootstrap) as admin:
        (partition,) = admin.describe_topics([topic])[0].partitions
    return partition.leader, partition.leader_epoch, partition.isr


def _produce(cluster: Cluster, topic: str, count: int) -> None:
    with Producer(cluster.bootstrap, acks="all") as producer:
        for i in range(count):
            producer.send(topic, value=f"r{i}".encode(), partition=0)
        producer.flush()


def test_offset_for_leader_epoch_after_a_leader_change(cluster: Cluster) -> None:
    topic = unique("epochs")
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 2)])
    _eventually(lambda: len(_leader(cluster, topic)[2]) == 2, "both replicas in sync")
    _produce(cluster, topic, 5)
    leader, first_epoch, _ = _leader(cluster, topic)
    assert leader is not None
    assert _epoch_end(cluster, topic, first_epoch) == (KafkaErrorCode.none, first_epoch, 5)
    _eventually(lambda: len(_leader(cluster, topic)[2]) == 2, "the follower caught up")
    old_leader = cluster.process(f"storage-{leader}")
    old_leader.stop()
    try:
        _eventually(lambda: _leader(cluster, topic)[0] not in (None, leader),
                    "a new leader")
        _, second_epoch, _ = _leader(cluster, topic)
        assert second_epoch > first_epoch
        _produce(cluster, topic, 3)
        # The old epoch ends where the new leader's began; the current one at the end.
        assert _epoch_end(cluster, topic, first_epoch) == (KafkaErrorCode.none,
                                                           first_epoch, 5)
        assert _epoch_end(cluster, topic, second_epoch, current=second_epoch) == (
            KafkaErrorCode.none, second_epoch, 8)
        # A client still on the old leader's epoch is fenced; one ahead is told so.
        assert _epoch_end(cluster, topic, first_epoch, current=first_epoch)[0] == \
            KafkaErrorCode.fenced_leader_epoch
        assert _epoch_end(cluster, topic, first_epoch, current=second_epoch + 1)[0] == \
            KafkaErrorCode.unknown_leader_epoch
        assert _epoch_end(cluster, topic, second_epoch + 5) == (KafkaErrorCode.none, -1, -1)
    finally:
        old_leader.start()
    assert _epoch_end(cluster, unique("no-such-topic"), 0)[0] == \
        KafkaErrorCode.unknown_topic_or_partition
