"""The SDK's Admin against a real cluster: topics, partitions, configs, brokers, and
the typed error of every refusal."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import pytest

from strand import Admin, Consumer, NewTopic, Producer, TransportError
from strand.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from strand.launcher import free_port
from strand.producer import default_partition

if TYPE_CHECKING:
    from tests.support.cluster import SdkCluster


def test_topic_lifecycle(sdk_cluster: SdkCluster) -> None:
    with Admin(sdk_cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("adm-a", 3, 2, config={"retention.ms": "60000"}),
                             NewTopic("adm-b", 1, 1)])
        assert {"adm-a", "adm-b"} <= set(admin.list_topics())
        a, b = admin.describe_topics(["adm-a", "adm-b"])
        assert (a.name, len(a.partitions), b.name, len(b.partitions)) == ("adm-a", 3, "adm-b", 1)
        for p in a.partitions:
            assert len(p.replicas) == 2 and set(p.isr) <= set(p.replicas)
            assert p.leader in p.replicas
        assert {p.leader for p in a.partitions} == {1, 2}  # spread over both nodes
        configs = admin.describe_configs("adm-a")
        assert configs["retention.ms"].value == "60000"
        assert not configs["retention.ms"].is_default
        assert configs["cleanup.policy"].is_default

        admin.alter_configs("adm-a", set={"cleanup.policy": "compact"}, delete=["retention.ms"])
        configs = admin.describe_configs("adm-a")
        assert configs["cleanup.policy"].value == "compact"
        assert configs["retention.ms"].is_default

        admin.create_partitions("adm-b", 4)
        assert len(admin.describe_topics(["adm-b"])[0].partitions) == 4

        admin.delete_topics(["adm-a", "adm-b"])
        assert not {"adm-a", "adm-b"} & set(admin.list_topics())
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_topics(["adm-a"])
        # The name is free again.
        admin.create_topics([NewTopic("adm-a", 1, 1)])
        assert len(admin.describe_topics(["adm-a"])[0].partitions) == 1


def test_refusals_raise_typed_errors(sdk_cluster: SdkCluster) -> None:
    with Admin(sdk_cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("adm-typed", 2, 1)])
        with pytest.raises(TopicAlreadyExistsError, match="adm-typed"):
            admin.create_topics([NewTopic("adm-typed", 2, 1)])
        with pytest.raises(InvalidTopicError):
            admin.create_topics([NewTopic("bad name!", 1, 1)])
        with pytest.raises(InvalidConfigError):
            admin.create_topics([NewTopic("adm-badcfg", 1, 1, config={"no.such.key": "1"})])
        with pytest.raises(InvalidConfigError):
            admin.alter_configs("adm-typed", set={"retention.ms": "soon"})
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topics([NewTopic("adm-rf", 1, 3)])  # two storage nodes
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions("adm-typed", 1)  # never fewer
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.create_partitions("adm-missing", 3)
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topics(["adm-missing"])
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_configs("adm-missing")
        # Several topics: the others are done, the first failure is raised and the
        # message names every failure.
        with pytest.raises(TopicAlreadyExistsError) as info:
            admin.create_topics([NewTopic("adm-typed", 1, 1), NewTopic("adm-fresh", 1, 1),
                                 NewTopic("bad name!", 1, 1)])
        assert "bad name!" in str(info.value)
        assert "adm-fresh" in admin.list_topics()
        # validate_only checks without creating.
        admin.create_topics([NewTopic("adm-dry", 1, 1)], validate_only=True)
        assert "adm-dry" not in admin.list_topics()
        with pytest.raises(InvalidTopicError):
            admin.create_topics([NewTopic("..", 1, 1)], validate_only=True)


def test_describe_cluster(sdk_cluster: SdkCluster) -> None:
    with Admin(sdk_cluster.bootstrap) as admin:
        cluster = admin.describe_cluster()
    assert [b.node_id for b in cluster.brokers] == [1, 2]
    assert [b.rack for b in cluster.brokers] == ["r1", "r2"]
    assert cluster.cluster_id
    assert all(b.address.startswith("127.0.0.1:") for b in cluster.brokers)


def test_new_partitions_are_used_by_producers(sdk_cluster: SdkCluster) -> None:
    with Admin(sdk_cluster.bootstrap) as admin, Producer(
            sdk_cluster.bootstrap, metadata_max_age_ms=100) as producer:
        admin.create_topics([NewTopic("adm-grow", 1, 1)])
        assert producer.send("adm-grow", b"v", key=b"k").result(10).partition == 0
        admin.create_partitions("adm-grow", 8)
        key = next(k for k in (f"k{i}".encode() for i in range(100))
                   if default_partition(k, 8) != 0)
        # Within metadata_max_age_ms the producer sees 8 partitions.

        deadline = time.monotonic() + 10
        while producer.partitions_for("adm-grow") != list(range(8)):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        md = producer.send("adm-grow", b"v", key=key).result(10)
        assert md.partition == default_partition(key, 8)


def test_unreachable_gateway_raises_transport_error() -> None:
    with Admin(f"127.0.0.1:{free_port()}", request_timeout_ms=1000) as admin, \
            pytest.raises(TransportError) as info:
        admin.list_topics()
    assert info.value.status == "UNAVAILABLE"
    assert info.value.retriable


def test_reads_wait_out_a_gateway_restart(sdk_cluster: SdkCluster) -> None:
    """Admin reads and Consumer.partitions_for() try again while the gateway is down
    (as Kafka's clients, within their timeout); a change fails at once."""
    with Admin(sdk_cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("adm-restart", 3, 1), NewTopic("adm-restart-b", 2, 1)])
    gateway = sdk_cluster.gateway

    def down_for(seconds: float) -> threading.Timer:
        gateway.stop()
        restart = threading.Timer(seconds, gateway.start)
        restart.start()
        return restart

    with Admin(sdk_cluster.bootstrap, request_timeout_ms=30_000) as admin, \
            Consumer(sdk_cluster.bootstrap) as consumer:
        restart = down_for(1.5)
        try:
            began = time.monotonic()
            with pytest.raises(TransportError):  # whether it was applied is unknown
                admin.create_topics([NewTopic("adm-restart-new", 1, 1)])
            assert time.monotonic() - began < 1.0
            described = admin.describe_topics(["adm-restart"])[0]
            assert [p.partition for p in described.partitions] == [0, 1, 2]
            assert time.monotonic() - began >= 1.0  # it waited for the restart
        finally:
            restart.join()
        restart = down_for(1.5)
        try:
            began = time.monotonic()
            assert consumer.partitions_for("adm-restart-b", timeout_ms=30_000) == [0, 1]
            assert time.monotonic() - began >= 1.0
        finally:
            restart.join()
