"""Client quotas throttle, as Kafka's do: a client over its produce or fetch byte rate
gets its answers delayed by the throttle time, which the answer carries; a client
without a quota is never throttled; quotas are set, listed and removed through the
Admin API (stored in etcd, applied by the gateway at once). Rates are the benchmark's
to measure (make bench-quotas): here only that throttling happens, to whom, and that
the delay is the one announced."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from strand import Admin, NewTopic
from strand.client.channel import open_channel
from strand.launcher import Cluster
from strand.records import BatchBuilder
from strand.security.quota_fields import FilterComponent
from strand.security.quotas import DEFAULT, QuotaEntity
from strand.v1 import common_pb2 as pb
from strand.v1 import gateway_pb2_grpc
from tests.support.cluster import cluster_spec, unique

pytestmark = pytest.mark.slow

QUOTA = 1_000_000  # bytes/s
BATCH = 1_000_000  # bytes of records per produce


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = Cluster(cluster_spec(tmp_path_factory.mktemp("quotas"), "quotas")).start()
    yield started
    started.stop()


def big_batch() -> bytes:
    builder = BatchBuilder()
    for _ in range(BATCH // 10_000):
        builder.append(b"x" * 10_000)
    return builder.build()


def produce(stub: gateway_pb2_grpc.GatewayStub, topic: str, records: bytes
            ) -> tuple[pb.ProduceResponse, float]:
    start = time.monotonic()
    response = stub.Produce(pb.ProduceRequest(acks=1, timeout_ms=10_000, topics=[
        pb.TopicProduceData(topic=topic, partitions=[
            pb.PartitionProduceData(partition=0, records=records)])]), timeout=60)
    assert response.topics[0].partitions[0].error_code == 0
    return response, time.monotonic() - start


def test_a_client_over_its_quota_is_throttled_and_others_are_not(cluster: Cluster) -> None:
    topic, limited, free = unique("quota"), unique("limited"), unique("free")
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "60000"})])
        admin.alter_client_quotas(QuotaEntity(client_id=limited),
                                  set={"producer_byte_rate": QUOTA})
        assert admin.describe_client_quotas([FilterComponent("client-id", "EXACT", limited)]) \
            == [(QuotaEntity(client_id=limited), {"producer_byte_rate": QUOTA})]
    records = big_batch()
    with open_channel(cluster.bootstrap, client_id=limited) as limited_channel, \
            open_channel(cluster.bootstrap, client_id=free) as free_channel:
        limited_stub = gateway_pb2_grpc.GatewayStub(limited_channel)
        free_stub = gateway_pb2_grpc.GatewayStub(free_channel)
        throttled = None
        # 11 windows of 1 s: the rate passes 1 MB/s once more than ~11 MB came quickly
        for _ in range(30):
            answer, took = produce(limited_stub, topic, records)
            assert produce(free_stub, topic, records)[0].throttle_time_ms == 0
            if answer.throttle_time_ms > 0:
                throttled = answer.throttle_time_ms, took
                break
        assert throttled is not None, "30 MB at full speed, never throttled"
        throttle_ms, took = throttled
        assert took >= throttle_ms / 1000 * 0.95, "the answer was not delayed by its throttle"
    with Admin(cluster.bootstrap) as admin:
        admin.alter_client_quotas(QuotaEntity(client_id=limited), remove=["producer_byte_rate"])
        assert admin.describe_client_quotas() == []


def test_quota_entities_and_validation(cluster: Cluster) -> None:
    user = unique("user")
    with Admin(cluster.bootstrap) as admin:
        admin.alter_client_quotas(QuotaEntity(user=user, client_id=DEFAULT),
                                  set={"consumer_byte_rate": 2e6, "request_percentage": 50})
        admin.alter_client_quotas(QuotaEntity(user=DEFAULT), set={"producer_byte_rate": 1e7})
        listed = dict(admin.describe_client_quotas())
        assert listed[QuotaEntity(user=user, client_id=DEFAULT)] == {
            "consumer_byte_rate": 2e6, "request_percentage": 50}
        assert listed[QuotaEntity(user=DEFAULT)] == {"producer_byte_rate": 1e7}
        assert admin.describe_client_quotas([FilterComponent("user", "DEFAULT")],
                                            strict=True) == [
            (QuotaEntity(user=DEFAULT), {"producer_byte_rate": 1e7})]
        with pytest.raises(ValueError, match="positive"):
            admin.alter_client_quotas(QuotaEntity(user=user), set={"producer_byte_rate": -1})
        with pytest.raises(ValueError, match="unknown quota"):
            admin.alter_client_quotas(QuotaEntity(user=user), set={"bytes": 1})
        admin.alter_client_quotas(QuotaEntity(user=user, client_id=DEFAULT),
                                  remove=["consumer_byte_rate", "request_percentage"])
        admin.alter_client_quotas(QuotaEntity(user=DEFAULT), remove=["producer_byte_rate"])
        assert admin.describe_client_quotas() == []


def calls_in(stub: gateway_pb2_grpc.GatewayStub, seconds: float) -> int:
    """How many Metadata calls one client gets answered, back to back, in ``seconds``."""
    calls, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        stub.Metadata(pb.MetadataRequest(), timeout=10)
        calls += 1
    return calls


def test_the_request_time_quota_throttles_a_busy_client(cluster: Cluster) -> None:
    """request_percentage: the share of the gateway's time (its CPU time handling the
    client's requests) a client may take. A client calling flat out is held to a small
    share; a client without that quota is not; the delay shows in throttle_time_ms."""
    busy, free, topic = unique("busy"), unique("free"), unique("timed")
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        admin.alter_client_quotas(QuotaEntity(client_id=busy), set={"request_percentage": 0.1})
    with open_channel(cluster.bootstrap, client_id=busy) as busy_channel, \
            open_channel(cluster.bootstrap, client_id=free) as free_channel:
        busy_stub = gateway_pb2_grpc.GatewayStub(busy_channel)
        free_stub = gateway_pb2_grpc.GatewayStub(free_channel)
        free_calls = calls_in(free_stub, 3)
        busy_calls = calls_in(busy_stub, 3)
        # A Metadata call costs the gateway's event loop tens of µs: 0.1 % of its time
        # (1 ms/s) is some tens of calls a second, far fewer than a free client gets.
        assert busy_calls < free_calls / 3, (busy_calls, free_calls)
        answer, took = produce(busy_stub, topic, small_batch())
        assert answer.throttle_time_ms > 0
        assert took >= answer.throttle_time_ms / 1000 * 0.9
        assert produce(free_stub, topic, small_batch())[0].throttle_time_ms == 0
    with Admin(cluster.bootstrap) as admin:
        admin.alter_client_quotas(QuotaEntity(client_id=busy), remove=["request_percentage"])


def small_batch() -> bytes:
    builder = BatchBuilder()
    builder.append(b"small")
    return builder.build()
