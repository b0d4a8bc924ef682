"""The Kafka listener of a gateway requiring client certificates (mutual TLS, service
identities named by --tls-service-names) and enforcing ACLs: a client without a
certificate of the cluster's CA is refused in the handshake, a client certificate's
common name is the principal the ACLs judge, and a service certificate is a super
user, as on the gRPC listener."""

from __future__ import annotations

import ssl
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic as RdNewTopic
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest
from kio.schema.describe_cluster.v0.response import DescribeClusterResponse

from strand import Admin
from strand.launcher import Cluster
from tests.support.cluster import cluster_spec, unique
from tests.support.kafka_wire import RawKafkaClient
from tests.support.tls import CA, SERVICE_NAMES, cert, client_tls, key, service_tls

pytestmark = pytest.mark.slow

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("kafka-mtls")
    spec = cluster_spec(directory, "kafka-mtls",
                        tls=service_tls(directory / "certs", require_client_cert=True,
                                        service_names=SERVICE_NAMES),
                        gateway_args=("--authorizer", "acl", "--super-users", "User:admin"))
    started = Cluster(spec).start()
    yield started
    started.stop()


def admin_as(cluster: Cluster, name: str) -> AdminClient:
    """confluent-kafka's AdminClient over TLS presenting ``name``'s certificate."""
    return AdminClient({"bootstrap.servers": cluster.kafka_bootstrap,
                        "security.protocol": "SSL", "ssl.ca.location": str(CA),
                        "ssl.certificate.location": str(cert(name)),
                        "ssl.key.location": str(key(name))})


def describe_cluster(cluster: Cluster, context: ssl.SSLContext) -> DescribeClusterResponse:
    with RawKafkaClient(cluster.kafka_bootstrap, timeout_s=10, tls=context) as raw:
        answer: DescribeClusterResponse = raw.call(
            DescribeClusterRequest(include_cluster_authorized_operations=False),
            DescribeClusterResponse)
    return answer


def test_a_client_without_a_certificate_is_refused(cluster: Cluster) -> None:
    with pytest.raises(OSError):  # in the handshake, or at the first request
        describe_cluster(cluster, ssl.create_default_context(cafile=CA))
    stranger = ssl.create_default_context(cafile=CA)
    stranger.load_cert_chain(cert("stranger"), key("stranger"))  # another CA's
    with pytest.raises(OSError):
        describe_cluster(cluster, stranger)
    with pytest.raises(KafkaException):
        AdminClient({"bootstrap.servers": cluster.kafka_bootstrap,
                     "security.protocol": "SSL", "ssl.ca.location": str(CA)}
                    ).list_topics(timeout=3)


def test_the_certificate_is_the_principal_and_a_service_is_a_super_user(
        cluster: Cluster) -> None:
    ordinary, service = unique("by-alice"), unique("by-service")
    alice, service_admin = admin_as(cluster, "client"), admin_as(cluster, "service")
    refused = alice.create_topics([RdNewTopic(ordinary, 1, 1)])
    with pytest.raises(KafkaException) as raised:
        refused[ordinary].result(timeout=TIMEOUT_S)
    assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "User:alice" in raised.value.args[0].str()
    created = service_admin.create_topics([RdNewTopic(service, 1, 1)])
    created[service].result(timeout=TIMEOUT_S)
    with Admin(cluster.bootstrap, **client_tls("service").as_settings()) as sdk:
        topics = sdk.list_topics()
    assert service in topics and ordinary not in topics
