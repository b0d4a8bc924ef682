"""The Kafka listener of a gateway serving TLS, with SCRAM required, ACLs enforced and
a short SASL session lifetime: confluent-kafka (librdkafka) with SSL (a client
certificate, whose name is the principal the ACLs judge), SASL_SSL with SCRAM-SHA-512
and with PLAIN (offered over TLS only) produces and consumes; a plaintext client is
refused; a lapsed session closes its connection unless it re-authenticated (KIP-368);
Kafka requests are counted in the gateway's metrics as the gRPC ones are; a certificate
rotated on disk is served on the Kafka port without a restart.

One cluster for the module (the rotation test runs last: it changes the certificates)."""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Producer as RdProducer
from confluent_kafka import TopicPartition as RdTopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic as RdNewTopic
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest
from kio.schema.describe_cluster.v0.response import DescribeClusterResponse
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from strand import Admin, NewTopic
from strand.launcher import Cluster
from strand.launcher.service_metrics import scrape
from strand.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclPermissionType,
    Operation,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from strand.security.scram import ScramClientExchange
from strand.security.settings import client_tls_settings
from tests.support.cluster import unique
from tests.support.kafka_wire import RawKafkaClient
from tests.support.security import SECURED_GATEWAY_ARGS, SUPERUSER, secured_spec
from tests.support.tls import CA, cert, key, presented_name, rotate, service_tls

pytestmark = pytest.mark.slow

TIMEOUT_S = 30
SESSION_S = 5  # the gateway's --session-lifetime: short, so lapses are seen
CERTIFICATE_USER = "alice"  # tests/support/tls/client.pem's common name
# confluent-kafka's configuration (its annotations: values of these types).
Config = dict[str, str | int | float | bool]


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    directory = tmp_path_factory.mktemp("kafka-tls")
    certs = directory / "certs"
    spec = secured_spec(directory, "kafka-tls", tls=service_tls(certs), metrics=True)
    spec = replace(spec, gateway_args=(*SECURED_GATEWAY_ARGS,
                                       "--session-lifetime", str(SESSION_S)))
    cluster = Cluster(spec).start()
    yield cluster, certs
    cluster.stop()


@pytest.fixture(scope="module")
def cluster(tls_cluster: tuple[Cluster, Path]) -> Cluster:
    return tls_cluster[0]


@pytest.fixture(scope="module")
def sdk(cluster: Cluster) -> Iterator[Admin]:
    with Admin(cluster.bootstrap, **client_tls_settings(True, str(CA), None, None,
                                                        *SUPERUSER)) as admin:
        yield admin


def ssl_config(cluster: Cluster, **extra: str) -> Config:
    """confluent-kafka over TLS presenting the client certificate (User:alice)."""
    return {"bootstrap.servers": cluster.kafka_bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": str(CA), "ssl.certificate.location": str(cert("client")),
            "ssl.key.location": str(key("client")), **extra}


def sasl_ssl_config(cluster: Cluster, user: str, password: str,
                    mechanism: str = "SCRAM-SHA-512", **extra: str) -> Config:
    return {"bootstrap.servers": cluster.kafka_bootstrap, "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(CA), "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password, **extra}


def grant(sdk: Admin, principal: str, resource: ResourceType, name: str,
          *operations: Operation) -> None:
    sdk.create_acls([AclBinding(ResourcePattern(resource, name, PatternType.LITERAL),
                                AccessControlEntry(principal, "*", operation,
                                                   AclPermissionType.ALLOW))
                     for operation in operations])


def grant_topic_and_group(sdk: Admin, principal: str, topic: str, group: str) -> None:
    grant(sdk, principal, ResourceType.TOPIC, topic, Operation.WRITE, Operation.READ,
          Operation.DESCRIBE)
    grant(sdk, principal, ResourceType.GROUP, group, Operation.READ)


def produce(config: Config, topic: str, values: list[bytes]) -> list[KafkaError]:
    """Send ``values`` to partition 0; the delivery errors (none: all written)."""
    producer = RdProducer({**config, "message.timeout.ms": "15000"})
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=delivered)
    assert producer.flush(TIMEOUT_S) == 0
    return errors


def consume(config: Config, topic: str, group: str, count: int) -> list[bytes]:
    consumer = RdConsumer({**config, "group.id": group, "enable.auto.commit": "false"})
    try:
        consumer.assign([RdTopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                values.append(message.value() or b"")
        return values
    finally:
        consumer.close()


def new_topic(sdk: Admin, name: str) -> str:
    topic = unique(name)
    sdk.create_topics([NewTopic(topic, 1, 1)])
    return topic


def raw_tls(cluster: Cluster, with_certificate: bool = False) -> RawKafkaClient:
    context = ssl.create_default_context(cafile=CA)
    if with_certificate:
        context.load_cert_chain(cert("client"), key("client"))
    return RawKafkaClient(cluster.kafka_bootstrap, tls=context)


def describe_cluster(raw: RawKafkaClient) -> KafkaErrorCode:
    answer = raw.call(DescribeClusterRequest(include_cluster_authorized_operations=False),
                      DescribeClusterResponse)
    code: KafkaErrorCode = answer.error_code
    return code


def scram(raw: RawKafkaClient, user: str, password: str) -> SaslAuthenticateResponse:
    handshake = raw.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"),
                         SaslHandshakeResponse)
    assert handshake.error_code == KafkaErrorCode.none
    exchange = ScramClientExchange(user, password)
    first = raw.call(SaslAuthenticateRequest(auth_bytes=exchange.first().encode()),
                     SaslAuthenticateResponse)
    assert first.error_code == KafkaErrorCode.none
    final: SaslAuthenticateResponse = raw.call(SaslAuthenticateRequest(
        auth_bytes=exchange.final(first.auth_bytes.decode()).encode()),
        SaslAuthenticateResponse)
    return final


@pytest.fixture(scope="module")
def user(sdk: Admin) -> tuple[str, str]:
    name = unique("tls-user")
    sdk.upsert_scram_user(name, f"{name}-secret")
    return name, f"{name}-secret"


# -- SSL: the client certificate is the principal ----------------------------------------------

def test_ssl_client_certificate_names_the_principal_the_acls_judge(cluster: Cluster,
                                                                   sdk: Admin) -> None:
    principal = f"User:{CERTIFICATE_USER}"
    topic, group = new_topic(sdk, "ssl-data"), unique("ssl-group")
    denied = produce(ssl_config(cluster), topic, [b"refused"])
    assert [error.code() for error in denied] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    created = unique("ssl-created")
    grant(sdk, principal, ResourceType.TOPIC, created, Operation.CREATE)
    admin = AdminClient(ssl_config(cluster))
    refused = unique("ssl-refused")
    futures = admin.create_topics([RdNewTopic(created, 1, 1), RdNewTopic(refused, 1, 1)])
    futures[created].result(timeout=TIMEOUT_S)
    with pytest.raises(KafkaException) as raised:
        futures[refused].result(timeout=TIMEOUT_S)
    assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert principal in raised.value.args[0].str()
    grant_topic_and_group(sdk, principal, topic, group)
    values = [f"ssl-{i}".encode() for i in range(5)]
    assert produce(ssl_config(cluster), topic, values) == []
    assert consume(ssl_config(cluster), topic, group, len(values)) == values


# -- SASL_SSL: SCRAM and PLAIN --------------------------------------------------------------------

def test_sasl_ssl_with_scram_and_plain_produce_and_consume(cluster: Cluster, sdk: Admin,
                                                           user: tuple[str, str]) -> None:
    topic, group = new_topic(sdk, "sasl-ssl"), unique("sasl-ssl-group")
    grant_topic_and_group(sdk, f"User:{user[0]}", topic, group)
    scram_config = sasl_ssl_config(cluster, *user)
    values = [f"scram-{i}".encode() for i in range(5)]
    assert produce(scram_config, topic, values) == []
    plain_config = sasl_ssl_config(cluster, *user, mechanism="PLAIN")
    plain_values = [f"plain-{i}".encode() for i in range(5)]
    assert produce(plain_config, topic, plain_values) == []
    assert consume(scram_config, topic, group, 10) == values + plain_values
    wrong = sasl_ssl_config(cluster, user[0], "wrong", mechanism="PLAIN")
    with pytest.raises(KafkaException) as raised:
        AdminClient(wrong).list_topics(timeout=3)
    assert raised.value.args[0].code() in (KafkaError._AUTHENTICATION, KafkaError._TRANSPORT,
                                           KafkaError._ALL_BROKERS_DOWN)


def test_a_librdkafka_client_outlives_its_session_by_reauthenticating(
        cluster: Cluster, sdk: Admin, user: tuple[str, str]) -> None:
    """librdkafka re-authenticates before the session lapses (KIP-368): one producer
    keeps writing over several session lifetimes."""
    topic, group = new_topic(sdk, "reauth"), unique("reauth-group")
    grant_topic_and_group(sdk, f"User:{user[0]}", topic, group)
    config = sasl_ssl_config(cluster, *user)
    producer = RdProducer({**config, "message.timeout.ms": "15000"})
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    deadline = time.monotonic() + 2.5 * SESSION_S
    sent: list[bytes] = []
    while time.monotonic() < deadline:
        sent.append(f"r{len(sent)}".encode())
        producer.produce(topic, sent[-1], partition=0, on_delivery=delivered)
        assert producer.flush(TIMEOUT_S) == 0
        time.sleep(0.5)
    assert errors == []
    assert consume(config, topic, group, len(sent)) == sent


# -- raw requests: refusals and session lifetime ---------------------------------------------

def test_a_plaintext_client_is_refused_on_the_tls_port(cluster: Cluster) -> None:
    with RawKafkaClient(cluster.kafka_bootstrap, timeout_s=10) as raw, \
            pytest.raises(OSError):
        describe_cluster(raw)
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap,
                         "security.protocol": "PLAINTEXT"})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)


def test_plain_is_offered_over_tls(cluster: Cluster) -> None:
    with raw_tls(cluster) as raw:
        handshake = raw.call(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse)
    assert handshake.error_code == KafkaErrorCode.none
    assert handshake.mechanisms == ("SCRAM-SHA-512", "PLAIN")


def test_a_lapsed_session_closes_the_connection(cluster: Cluster,
                                                user: tuple[str, str]) -> None:
    with raw_tls(cluster) as lapsing, raw_tls(cluster) as renewing:
        for raw in (lapsing, renewing):
            answer = scram(raw, *user)
            assert answer.error_code == KafkaErrorCode.none
            assert answer.session_lifetime.total_seconds() == SESSION_S
            assert describe_cluster(raw) == KafkaErrorCode.none
        time.sleep(SESSION_S / 2)
        assert scram(renewing, *user).error_code == KafkaErrorCode.none
        time.sleep(SESSION_S / 2 + 1)
        # The first session has lapsed: the renewed connection goes on, the other is
        # closed at its next request.
        assert describe_cluster(renewing) == KafkaErrorCode.none
        with pytest.raises(OSError):
            describe_cluster(lapsing)


def test_the_client_certificate_authenticates_without_sasl(cluster: Cluster) -> None:
    """Authentication is required: a TLS connection without a certificate must use
    SASL first; one with a certificate is authenticated by it."""
    with raw_tls(cluster, with_certificate=True) as raw:
        assert describe_cluster(raw) == KafkaErrorCode.none
    with raw_tls(cluster) as raw, pytest.raises(OSError):
        describe_cluster(raw)


# -- metrics -----------------------------------------------------------------------------------

def kafka_requests(cluster: Cluster, request: str) -> tuple[float, float]:
    """(strand_requests_total, strand_request_total_time_seconds_count) of the gateway
    for Kafka's ``request`` answered (service="kafka", status="OK")."""
    wanted = {"service": "kafka", "request": request, "status": "OK"}
    counts = {"strand_requests_total": 0.0, "strand_request_total_time_seconds_count": 0.0}
    for sample in scrape(cluster.metrics_ports[cluster.gateway.id]):
        if sample.name in counts and wanted.items() <= sample.labels.items():
            counts[sample.name] += sample.value
    return counts["strand_requests_total"], counts["strand_request_total_time_seconds_count"]


def test_kafka_requests_are_in_the_metrics(cluster: Cluster, sdk: Admin) -> None:
    topic = new_topic(sdk, "metered")
    grant_topic_and_group(sdk, f"User:{CERTIFICATE_USER}", topic, "unused")
    before = kafka_requests(cluster, "Produce")
    assert produce(ssl_config(cluster), topic, [b"one"]) == []
    produce(ssl_config(cluster), topic, [b"two"])
    deadline = time.monotonic() + TIMEOUT_S  # the exporter is read at scrape time
    while kafka_requests(cluster, "Produce")[0] < before[0] + 2:
        assert time.monotonic() < deadline, "the Kafka Produce requests were not counted"
        time.sleep(0.5)
    after = kafka_requests(cluster, "Produce")
    assert after[1] >= before[1] + 2  # timed as well as counted
    assert kafka_requests(cluster, "ApiVersions")[0] > 0


# -- rotation (last: it changes the cluster's certificates) ------------------------------------

def test_a_rotated_certificate_is_served_on_the_kafka_port(
        tls_cluster: tuple[Cluster, Path], sdk: Admin) -> None:
    cluster, certs = tls_cluster
    assert presented_name(cluster.kafka_bootstrap, client=None) == "strand-service"
    rotate(certs)
    deadline = time.monotonic() + TIMEOUT_S
    while presented_name(cluster.kafka_bootstrap, client=None) != "strand-service-rotated":
        assert time.monotonic() < deadline, "the rotated certificate was never served"
        time.sleep(0.2)
    topic = new_topic(sdk, "rotated")
    grant_topic_and_group(sdk, f"User:{CERTIFICATE_USER}", topic, "rotated-group")
    assert produce(ssl_config(cluster), topic, [b"after rotation"]) == []
