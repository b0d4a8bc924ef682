"""The controller as real processes on a real etcd: election, fenced topic admin,
validation with typed errors, and failover when the active controller is killed.

Storage nodes are stood in for by broker registrations (tests/support/controllers.py).
"""

from __future__ import annotations

import time

import pytest

from strand.cluster.model import PartitionRecord, TopicRecord
from strand.errors import ErrorCode
from strand.launcher import EtcdServer, ServiceProcess
from strand.v1 import common_pb2 as pb
from strand.v1 import controller_pb2_grpc
from tests.support.controllers import (
    KEYS,
    LEASE_TTL,
    RACKS,
    active_controller,
    etcd_prefix,
    split,
    stub_for,
)
from tests.support.waiting import wait_until


def create(stub: controller_pb2_grpc.ControllerStub, name: str, partitions: int = 6,
           replication_factor: int = 3, **configs: str) -> pb.TopicResult:
    response = stub.CreateTopics(pb.CreateTopicsRequest(topics=[pb.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor,
        configs=configs)]), timeout=10)
    result: pb.TopicResult = response.topics[0]
    return result


def test_create_topic_writes_rack_aware_metadata(controllers: list[ServiceProcess],
                                                  etcd: EtcdServer) -> None:
    active, standby = split(controllers, etcd.endpoint)
    result = create(stub_for(active.address), "orders", 6, 3, **{"retention.ms": "60000"})
    assert ErrorCode(result.error_code) == ErrorCode.NONE, result.error_message
    topic = TopicRecord.from_json(etcd_prefix(etcd.endpoint, KEYS.topic("orders"))[
        KEYS.topic("orders")])
    assert (topic.partitions, topic.replication_factor) == (6, 3)
    assert topic.config == {"retention.ms": "60000"} and topic.topic_id == result.topic_id
    records = [PartitionRecord.from_json(v) for v in
               etcd_prefix(etcd.endpoint, KEYS.topic_partitions("orders")).values()]
    assert sorted(r.partition for r in records) == list(range(6))
    leaders: dict[int, int] = {}
    for record in records:
        assert len({RACKS[b] for b in record.replicas}) == 3  # one replica per rack
        assert record.leader == record.replicas[0] and record.isr == record.replicas
        leaders[record.leader] = leaders.get(record.leader, 0) + 1
    assert max(leaders.values()) - min(leaders.values()) <= 1
    # the standby refuses admin with a typed error and writes nothing
    refused = create(stub_for(standby.address), "other")
    assert ErrorCode(refused.error_code) == ErrorCode.NOT_CONTROLLER
    assert KEYS.topic("other") not in etcd_prefix(etcd.endpoint, KEYS.topics)


@pytest.mark.parametrize(
    ("name", "partitions", "factor", "configs", "code"),
    [
        ("bad name!", 3, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("x" * 250, 3, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("zero", 0, 1, {}, ErrorCode.INVALID_PARTITIONS),
        ("too-many-replicas", 3, 4, {}, ErrorCode.INVALID_REPLICATION_FACTOR),
        ("unknown-config", 3, 1, {"no.such.key": "1"}, ErrorCode.INVALID_CONFIG),
        ("bad-config", 3, 1, {"retention.ms": "soon"}, ErrorCode.INVALID_CONFIG),
        ("out-of-range", 3, 1, {"min.cleanable.dirty.ratio": "2"}, ErrorCode.INVALID_CONFIG),
    ],
)
def test_bad_requests_get_typed_errors_and_write_nothing(
        controllers: list[ServiceProcess], etcd: EtcdServer, name: str, partitions: int,
        factor: int, configs: dict[str, str], code: ErrorCode) -> None:
    active, _ = split(controllers, etcd.endpoint)
    result = create(stub_for(active.address), name, partitions, factor, **configs)
    assert ErrorCode(result.error_code) == code, result.error_message
    assert result.error_message
    assert etcd_prefix(etcd.endpoint, KEYS.topics) == {}
    assert etcd_prefix(etcd.endpoint, KEYS.partitions) == {}


def test_admin_lifecycle(controllers: list[ServiceProcess], etcd: EtcdServer) -> None:
    active, _ = split(controllers, etcd.endpoint)
    stub = stub_for(active.address)
    assert ErrorCode(create(stub, "events", 4, 2).error_code) == ErrorCode.NONE
    assert ErrorCode(create(stub, "events", 4, 2).error_code) == ErrorCode.TOPIC_ALREADY_EXISTS
    grown = stub.CreatePartitions(pb.CreatePartitionsRequest(topics=[
        pb.CreatePartitionsRequest.Topic(name="events", count=7)]), timeout=10).topics[0]
    assert ErrorCode(grown.error_code) == ErrorCode.NONE, grown.error_message
    shrink = stub.CreatePartitions(pb.CreatePartitionsRequest(topics=[
        pb.CreatePartitionsRequest.Topic(name="events", count=3)]), timeout=10).topics[0]
    assert ErrorCode(shrink.error_code) == ErrorCode.INVALID_PARTITIONS
    assert len(etcd_prefix(etcd.endpoint, KEYS.topic_partitions("events"))) == 7
    altered = stub.AlterConfigs(pb.AlterConfigsRequest(topics=[pb.AlterConfigsRequest.Topic(
        name="events", ops=[pb.AlterConfigsRequest.Op(key="cleanup.policy", value="compact")])]),
        timeout=10).topics[0]
    assert ErrorCode(altered.error_code) == ErrorCode.NONE, altered.error_message
    bad = stub.AlterConfigs(pb.AlterConfigsRequest(topics=[pb.AlterConfigsRequest.Topic(
        name="events", ops=[pb.AlterConfigsRequest.Op(key="segment.bytes", value="1")])]),
        timeout=10).topics[0]
    assert ErrorCode(bad.error_code) == ErrorCode.INVALID_CONFIG
    topic = TopicRecord.from_json(etcd_prefix(etcd.endpoint, KEYS.topic("events"))[
        KEYS.topic("events")])
    assert topic.config == {"cleanup.policy": "compact"} and topic.partitions == 7
    deleted = stub.DeleteTopics(pb.DeleteTopicsRequest(topics=["events", "ghost"]), timeout=10)
    assert [t.error_code for t in deleted.topics] == [
        ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert etcd_prefix(etcd.endpoint, KEYS.prefix + "topics/") == {}
    assert etcd_prefix(etcd.endpoint, KEYS.partitions) == {}


def test_killed_controller_is_replaced_by_the_standby(controllers: list[ServiceProcess],
                                                      etcd: EtcdServer) -> None:
    active, standby = split(controllers, etcd.endpoint)
    assert ErrorCode(create(stub_for(active.address), "before").error_code) == ErrorCode.NONE
    killed_at = time.monotonic()
    active.kill()
    wait_until(lambda: (r := active_controller(etcd.endpoint)) is not None
               and r.address == standby.address, 4 * LEASE_TTL + 5, "the standby to take over")
    takeover = time.monotonic() - killed_at
    assert takeover <= 2 * LEASE_TTL + 2, f"takeover took {takeover:.1f}s"
    result = create(stub_for(standby.address), "after")
    assert ErrorCode(result.error_code) == ErrorCode.NONE, result.error_message
    assert set(etcd_prefix(etcd.endpoint, KEYS.topics)) == {KEYS.topic("before"),
                                                           KEYS.topic("after")}


def test_names_differing_only_by_dot_and_underscore_collide(controllers: list[ServiceProcess],
                                                            etcd: EtcdServer) -> None:
    active, _ = split(controllers, etcd.endpoint)
    stub = stub_for(active.address)
    assert ErrorCode(create(stub, "metrics.cpu", 1, 1).error_code) == ErrorCode.NONE
    clash = create(stub, "metrics_cpu", 1, 1)
    assert ErrorCode(clash.error_code) == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert "collides" in clash.error_message
