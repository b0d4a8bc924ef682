"""A whole cluster on mutual TLS (every listener, every call between the services,
etcd's client port, the SDK's clients): produce, transactions and a consumer group
work end to end; a plaintext client and a client without a certificate of the
cluster's CA are refused, and a client's certificate gets nothing from a storage node
or the controller (service identities only); the certificates rotated on disk under
a running producer are served to new connections without a restart and without a
failed send."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from click.testing import CliRunner
from grpc_health.v1 import health_pb2, health_pb2_grpc

from strand import Admin, Consumer, NewTopic, Producer, TopicPartition
from strand.cli.main import cli
from strand.client.channel import TransportError
from strand.launcher import Cluster
from strand.launcher.etcd_reads import EtcdUnreachable, etcd_range
from strand.security.settings import ClientTlsSettings
from strand.security.tls import ClientTls
from strand.v1 import common_pb2, controller_pb2_grpc, storage_pb2_grpc
from strand_operator.cli import parse_args
from strand_operator.strand_gateway import StrandGateway
from tests.support.cluster import cluster_spec, unique
from tests.support.tls import (
    CA,
    SERVICE_NAMES,
    cert,
    client_tls,
    key,
    presented_name,
    rotate,
    service_tls,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    directory = tmp_path_factory.mktemp("tls")
    certs = directory / "certs"
    spec = cluster_spec(directory, "tls", storage_nodes=2, coordinators=1,
                        coordinator_args=("--shards", "2", "--initial-rebalance-delay-ms", "0"),
                        tls=service_tls(certs, require_client_cert=True,
                                        service_names=SERVICE_NAMES))
    cluster = Cluster(spec).start()
    yield cluster, certs
    cluster.stop()


def secured() -> ClientTlsSettings:
    return client_tls("client").as_settings()


def new_topic(cluster: Cluster, name: str) -> str:
    """A new topic (2 partitions, RF 2) named ``name``-<random>, created over TLS."""
    topic = unique(name)
    with Admin(cluster.bootstrap, **secured()) as admin:
        admin.create_topics([NewTopic(topic, 2, 2)])
    return topic


def read_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    values: list[bytes] = []
    with Consumer(bootstrap, group_id=unique("tls-readers"), auto_offset_reset="earliest",
                  isolation_level="read_committed", **secured()) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(values) < count:
            assert time.monotonic() < deadline, f"read {len(values)} of {count}"
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records if r.value is not None)
        consumer.commit()
    return values


def test_produce_transactions_and_a_group_over_mutual_tls(
        tls_cluster: tuple[Cluster, Path]) -> None:
    cluster, _ = tls_cluster
    topic = new_topic(cluster, "tls")
    with Producer(cluster.bootstrap, **secured()) as producer:
        for i in range(50):
            producer.send(topic, value=f"plain-{i}".encode())
    with Producer(cluster.bootstrap, transactional_id=unique("tls-tx"), **secured()) as txn:
        txn.init_transactions()
        txn.begin_transaction()
        for i in range(50):
            txn.send(topic, value=f"txn-{i}".encode())
        txn.commit_transaction()
    values = read_all(cluster.bootstrap, topic, 100)
    assert sorted(values) == sorted([f"plain-{i}".encode() for i in range(50)]
                                    + [f"txn-{i}".encode() for i in range(50)])


def test_plaintext_and_strangers_are_refused(tls_cluster: tuple[Cluster, Path]) -> None:
    cluster, _ = tls_cluster
    refused = [
        ClientTlsSettings(),  # plaintext
        client_tls(None).as_settings(),  # TLS without a client certificate
        client_tls("stranger").as_settings(),  # a certificate of another CA
    ]
    for settings in refused:
        with Admin(cluster.bootstrap, request_timeout_ms=1000, **settings) as admin, \
                pytest.raises(TransportError) as refusal:
            admin.list_topics()
        assert refusal.value.status == "UNAVAILABLE", settings


def test_rotated_certificates_are_served_under_a_running_producer(
        tls_cluster: tuple[Cluster, Path]) -> None:
    cluster, certs = tls_cluster
    topic = new_topic(cluster, "tls-rotation")
    assert presented_name(cluster.bootstrap) == "strand-service"
    failures: list[BaseException] = []
    sent = 0
    stop = threading.Event()

    def produce() -> None:
        nonlocal sent
        with Producer(cluster.bootstrap, linger_ms=2, **secured()) as producer:
            while not stop.is_set():
                futures = [producer.send(topic, value=f"r-{sent + i}".encode())
                           for i in range(20)]
                for future in futures:
                    try:
                        future.result(timeout=30)
                    except BaseException as exc:
                        failures.append(exc)
                sent += len(futures)
                time.sleep(0.01)

    thread = threading.Thread(target=produce, name="tls-producer")
    thread.start()
    try:
        time.sleep(1.5)
        before = sent
        rotate(certs)
        # Every listener serves the new pair to new connections, without a restart.
        for process in [*cluster.storage, *cluster.gateways, *cluster.coordinators,
                        *cluster.txn_coordinators, *cluster.controllers]:
            assert presented_name(process.address) == "strand-service-rotated", process.id
        time.sleep(1.5)
        assert sent > before, "the producer stopped sending during the rotation"
    finally:
        stop.set()
        thread.join(60)
    assert not thread.is_alive()
    assert failures == []
    # A new connection after the rotation reads every record sent.
    values = read_all(cluster.bootstrap, topic, sent)
    assert sorted(values) == sorted(f"r-{i}".encode() for i in range(sent))
    with Consumer(cluster.bootstrap, **secured()) as consumer:
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in range(2)])
    assert sum(ends.values()) == sent


def test_the_cli_speaks_tls(tls_cluster: tuple[Cluster, Path]) -> None:
    cluster, _ = tls_cluster
    topic = unique("tls-cli")
    tls = ["--tls-ca", str(CA), "--tls-cert", str(cert("client")),
           "--tls-key", str(key("client"))]
    runner = CliRunner()
    created = runner.invoke(cli, ["--bootstrap", cluster.bootstrap, *tls, "topic", "create",
                                  topic, "--partitions", "1", "--replication-factor", "2"])
    assert created.exit_code == 0, created.output
    listed = runner.invoke(cli, ["--bootstrap", cluster.bootstrap, *tls, "topic", "list"])
    assert listed.exit_code == 0 and topic in listed.output, listed.output
    # The same files from the environment.
    env = {"STRAND_TLS_CA": str(CA), "STRAND_TLS_CERT": str(cert("client")),
           "STRAND_TLS_KEY": str(key("client"))}
    listed = runner.invoke(cli, ["--bootstrap", cluster.bootstrap, "topic", "list"], env=env)
    assert listed.exit_code == 0 and topic in listed.output, listed.output
    # Plaintext: refused, and said so; a key that is not the certificate's: named.
    plain = runner.invoke(cli, ["--bootstrap", cluster.bootstrap, "topic", "list"])
    assert plain.exit_code == 1 and "cannot connect to the gateway" in plain.output, \
        plain.output
    wrong = runner.invoke(cli, ["--bootstrap", cluster.bootstrap, "--tls-ca", str(CA),
                                "--tls-cert", str(cert("client")), "--tls-key",
                                str(key("service")), "topic", "list"])
    assert wrong.exit_code == 1 and "do not load as a pair" in wrong.output, wrong.output


def test_etcd_serves_the_services_over_tls_only(tls_cluster: tuple[Cluster, Path]) -> None:
    cluster, _ = tls_cluster
    prefix = f"/strand/{cluster.spec.name}/"
    keys = etcd_range(cluster.etcd.endpoint, prefix, prefix=True, tls=cluster.etcd_tls)
    assert any("/brokers/" in key for key in keys), sorted(keys)[:10]
    with pytest.raises(EtcdUnreachable):  # plaintext
        etcd_range(cluster.etcd.endpoint, prefix, prefix=True)
    with pytest.raises(EtcdUnreachable):  # TLS without a client certificate
        etcd_range(cluster.etcd.endpoint, prefix, prefix=True, tls=client_tls(None))


def test_the_operator_reaches_the_cluster_over_tls(tls_cluster: tuple[Cluster, Path]) -> None:
    """The operator's --tls-* options (STRAND_TLS_* in its pod) reach its Admin."""
    cluster, _ = tls_cluster
    config = parse_args(["--bootstrap", cluster.bootstrap, "--namespace", "default",
                         "--cluster", "tls", "--tls-ca", str(CA),
                         "--tls-cert", str(cert("client")), "--tls-key", str(key("client"))])
    gateway = StrandGateway(config.bootstrap, tls=config.security)
    try:
        brokers = asyncio.run(gateway.brokers())
    finally:
        gateway.close()
    assert sorted(b.id for b in brokers) == [1, 2]
    plaintext = StrandGateway(cluster.bootstrap, request_timeout_s=1)
    try:
        with pytest.raises(TransportError):
            asyncio.run(plaintext.brokers())
    finally:
        plaintext.close()


def test_only_the_services_are_served_by_storage_nodes_and_the_controller(
        tls_cluster: tuple[Cluster, Path]) -> None:
    """A client certificate of the cluster's CA reaches the gateway, not a storage node
    or the controller around it; a service certificate does; health checks are open."""
    cluster, certs = tls_cluster
    node, controller = cluster.storage[0].address, cluster.controllers[0].address
    as_client, as_service = client_tls("client"), ClientTls(CA, certs / "service.pem",
                                                            certs / "service-key.pem")
    with grpc.secure_channel(node, as_client.credentials()) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            storage_pb2_grpc.StorageStub(channel).ListOffsets(
                common_pb2.ListOffsetsRequest(), timeout=5)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "'alice' is not a service identity" in str(refused.value.details())
        health = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
    with grpc.secure_channel(controller, as_client.credentials()) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            controller_pb2_grpc.ControllerStub(channel).CreateTopics(
                common_pb2.CreateTopicsRequest(), timeout=5)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with grpc.secure_channel(node, as_service.credentials()) as channel:
        storage_pb2_grpc.StorageStub(channel).ListOffsets(
            common_pb2.ListOffsetsRequest(), timeout=5)
