"""The chart's security values, run (test_chart_processes.py's machinery, with
certificates): every container of the chart rendered with a security value set
started as a local process with its command, args, environment and mounted Secrets
exactly as rendered — so a wrong flag, path, certificate name or credential in the
chart fails here.

- ci/secure-values.yaml: certificates from cert-manager (local: cert_manager.py
  issues the rendered Certificates with a test CA), mutual TLS between the services
  and on etcd, clients on TLS with SCRAM-SHA-512 logins (the bootstrap user of the
  chart's generated Secret), authentication required, ACLs enforced. A SCRAM client
  produces and consumes in a group (the coordinators log in as the bootstrap user);
  a client without a login, with a wrong password, in plaintext, or with a
  certificate of the CA at a storage node is refused; a user gets nothing until an
  ACL allows it; the `helm test` pod and the operator work; a Kafka client logs in
  with SCRAM over TLS on the Kafka port, a plaintext one gets nothing.
- ci/existing-secrets-values.yaml: the same names issued into the given Secrets (an
  outside PKI), mutual TLS at the gateway too and no SCRAM: principals are the
  certificates' common names; the coordinators are services by their certificates,
  the operator and the `helm test` pod super users by theirs; a Kafka client
  presents its certificate on the Kafka port, one without is refused.

The probes (readiness, before each next stage) are the chart's: gRPC health on the
plaintext health port, etcd's /health on its plaintext metrics port."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import yaml
from confluent_kafka.admin import AdminClient
from grpc_health.v1 import health_pb2, health_pb2_grpc

from strand import Admin, Consumer, NewTopic, Producer
from strand.client.channel import TransportError
from strand.errors import AuthenticationError, TopicAuthorizationFailedError
from strand.launcher import wait_until
from strand.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclPermissionType,
    Operation,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from strand.security.settings import ClientTlsSettings, client_tls_settings
from strand.v1 import common_pb2, storage_pb2_grpc
from tests.k8s.chart.cert_manager import issue_certificates
from tests.k8s.chart.local_pods import LOCALHOST
from tests.k8s.chart.test_chart_processes import (
    KAFKA_PORT,
    SERVE_TIMEOUT,
    SMALL,
    VENV_BIN,
    ChartCluster,
    boot,
    kcat,
    run_kcat,
    start_stage,
)
from tests.k8s.chart.tools import EXISTING_SECRETS, REPO, SECURE, render
from tests.support.certificates import CertificateAuthority

pytestmark = pytest.mark.slow

TOPIC_EXAMPLE = REPO / "k8s" / "examples" / "topic-orders.yaml"
# The second cluster with one storage node (replication on mutual TLS is the first's):
# less to start and stop.
ONE_NODE = (*SMALL, "storage.replicas=1")


@dataclass
class SecureCluster:
    """A chart cluster and what its clients need: the CA file, a directory for files."""

    chart: ChartCluster
    ca: CertificateAuthority
    files: Path

    @property
    def bootstrap(self) -> str:
        return self.chart.bootstrap

    def ca_file(self) -> str:
        path = self.files / "ca.crt"
        path.write_bytes(self.ca.pem)
        return str(path)

    def client(self, common_name: str, ca: CertificateAuthority | None = None) -> tuple[str, str]:
        """A client certificate of ``ca`` (the cluster's) for ``common_name``: its files."""
        issued = (ca or self.ca).issue(common_name, server=False)
        cert, key = self.files / f"{common_name}.crt", self.files / f"{common_name}.key"
        cert.write_bytes(issued.cert_pem)
        key.write_bytes(issued.key_pem)
        return str(cert), str(key)

    def settings(self, user: tuple[str, str] | None = None,
                 certificate: str | None = None) -> ClientTlsSettings:
        """TLS to the gateway (verified with the CA), as SCRAM ``user`` and/or with the
        client certificate of ``certificate`` (a common name)."""
        cert, key = self.client(certificate) if certificate else (None, None)
        name, password = user or (None, None)
        return client_tls_settings(True, self.ca_file(), cert, key, name, password)


@pytest.fixture(scope="class")
def scram_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    directory = tmp_path_factory.mktemp("chart-secure")
    ca = CertificateAuthority("strand-ca")
    manifests = render([SECURE], SMALL)
    with boot(manifests, directory, issue_certificates(manifests, ca)) as chart:
        yield SecureCluster(chart, ca, directory)


@pytest.fixture(scope="class")
def mtls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    directory = tmp_path_factory.mktemp("chart-existing-secrets")
    ca = CertificateAuthority("outside-pki")
    manifests = render([EXISTING_SECRETS], ONE_NODE)
    with boot(manifests, directory, existing_secrets(ca)) as chart:
        yield SecureCluster(chart, ca, directory)


def existing_secrets(ca: CertificateAuthority) -> dict[str, dict[str, bytes]]:
    """What an outside PKI issued into the Secrets the value set names: the names
    the chart's README asks for, those of the chart's own Certificates (rendered with
    cert-manager on, read here), under the given Secret names."""
    values = yaml.safe_load(EXISTING_SECRETS.read_text())
    given: dict[str, str] = values["tls"]["existingSecrets"]
    with_cert_manager = render([EXISTING_SECRETS], [*ONE_NODE, "tls.certManager.enabled=true"])
    issued = issue_certificates(with_cert_manager, ca)
    chart_names = {"helmTest": "helm-test"}
    return {secret: issued[f"strand-{chart_names.get(key, key)}-tls"]
            for key, secret in given.items()}


def admin_login(cluster: SecureCluster) -> tuple[str, str]:
    """The bootstrap user and the password of the chart's generated Secret."""
    password = cluster.chart.pods.secrets["strand-superuser"]["password"].decode()
    return "admin", password


def allow(principal: str, resource_type: ResourceType, name: str) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, PatternType.LITERAL),
                      AccessControlEntry(principal, "*", Operation.ALL,
                                         AclPermissionType.ALLOW))


def produce_and_consume(bootstrap: str, settings: ClientTlsSettings, topic: str,
                        group: str) -> list[bytes]:
    """Ten records through an idempotent producer (a transaction coordinator's
    producer id) and back through a group member (a group coordinator's offsets)."""
    sent = [f"{topic}-{i}".encode() for i in range(10)]
    with Producer(bootstrap, **settings) as producer:
        for value in sent:
            producer.send(topic, value)
        producer.flush(timeout=30)
    received: list[bytes] = []
    with Consumer(bootstrap, group_id=group, auto_offset_reset="earliest",
                  enable_auto_commit=False, **settings) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(received) < len(sent) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                received += [r.value for r in records if r.value is not None]
        consumer.commit()
    assert sorted(received) == sorted(sent)
    return received


def run_helm_test_pod(cluster: ChartCluster) -> subprocess.CompletedProcess[str]:
    (pod,) = cluster.pods.of_component("helm-test")
    local = cluster.pods.container(pod, pod.containers()[0],
                                   {"PATH": f"{VENV_BIN}:{os.environ['PATH']}"})
    return subprocess.run(local.argv, env={**os.environ, **local.env}, capture_output=True,
                          text=True, timeout=180, check=False)


def operator_creates_the_example_topic(cluster: ChartCluster, settings: ClientTlsSettings,
                                       replicas: int = 3) -> None:
    """The operator's pod started, the example Topic (with ``replicas``) becomes a topic."""
    (process,) = start_stage(cluster.pods, ("operator",), cluster.api, cluster.kubeconfig,
                             cluster.logs)
    cluster.processes.append(process)
    process.wait_serving(SERVE_TIMEOUT)
    topic = yaml.safe_load(TOPIC_EXAMPLE.read_text())
    topic["spec"]["replicas"] = replicas
    topic["metadata"].update(namespace="strand", uid="uid-orders", generation=1,
                             resourceVersion="1", creationTimestamp="2026-01-01T00:00:00Z")
    cluster.api.request("POST", "/apis/strand.io/v1/namespaces/strand/topics", topic)
    with Admin(cluster.bootstrap, **settings) as admin:
        wait_until(lambda: topic["metadata"]["name"] in admin.list_topics(), 60,
                   "the operator to create the example topic through the secured gateway")
    assert process.running()


class TestSecureValues:
    """ci/secure-values.yaml: cert-manager, mutual TLS between the services, SCRAM
    logins over TLS at the gateway, ACLs. (One cluster per class: the next one boots
    once this one is stopped.)"""

    def test_a_scram_client_produces_and_consumes_over_tls(
            self, scram_cluster: SecureCluster) -> None:
        admin = scram_cluster.settings(admin_login(scram_cluster))
        with Admin(scram_cluster.bootstrap, **admin) as boss:
            boss.create_topics([NewTopic("secure", num_partitions=3, replication_factor=3)])
            wait_until(lambda: len(boss.describe_cluster().brokers) == 3, 30,
                       "the storage nodes to register over mutual TLS")
        produce_and_consume(scram_cluster.bootstrap, admin, "secure", "secure-group")

    def test_clients_without_a_login_or_tls_are_refused(self, scram_cluster: SecureCluster) -> None:
        name, _ = admin_login(scram_cluster)
        for settings, match in ((scram_cluster.settings(), "requires authentication"),
                                (scram_cluster.settings((name, "wrong")),
                                 "invalid username or password")):
            with Admin(scram_cluster.bootstrap, **settings) as stranger, \
                    pytest.raises(AuthenticationError, match=match):
                stranger.list_topics()
        with Admin(scram_cluster.bootstrap, request_timeout_ms=1000) as plaintext, \
                pytest.raises(TransportError) as refusal:
            plaintext.list_topics()
        assert refusal.value.status == "UNAVAILABLE"

    def test_a_user_gets_nothing_until_an_acl_allows_it(self, scram_cluster: SecureCluster) -> None:
        admin = scram_cluster.settings(admin_login(scram_cluster))
        user = scram_cluster.settings(("app", "app-password"))
        with Admin(scram_cluster.bootstrap, **admin) as boss:
            boss.create_topics([NewTopic("acl-guarded", num_partitions=1, replication_factor=3)])
            boss.upsert_scram_user("app", "app-password")
        with Producer(scram_cluster.bootstrap, **user) as producer, \
                pytest.raises(TopicAuthorizationFailedError):
            producer.send("acl-guarded", b"refused").result(30)
        with Admin(scram_cluster.bootstrap, **admin) as boss:
            boss.create_acls([allow("User:app", ResourceType.TOPIC, "acl-guarded"),
                              allow("User:app", ResourceType.GROUP, "app-group")])
        produce_and_consume(scram_cluster.bootstrap, user, "acl-guarded", "app-group")

    def test_storage_nodes_serve_only_the_services(self, scram_cluster: SecureCluster) -> None:
        """A client certificate of the cluster's CA gets nothing from a storage node; the
        plaintext health port answers health checks and nothing else is plaintext."""
        (node, *_) = scram_cluster.chart.pods.of_component("storage")
        address = f"{LOCALHOST}:{node.ports[9090]}"
        cert, key = scram_cluster.client("mallory")
        credentials = grpc.ssl_channel_credentials(
            scram_cluster.ca.pem, Path(key).read_bytes(), Path(cert).read_bytes())
        with grpc.secure_channel(address, credentials) as channel, \
                pytest.raises(grpc.RpcError) as refused:
            storage_pb2_grpc.StorageStub(channel).ListOffsets(common_pb2.ListOffsetsRequest(),
                                                              timeout=5)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "'mallory' is not a service identity" in str(refused.value.details())
        with grpc.insecure_channel(f"{LOCALHOST}:{node.ports[9091]}") as channel:
            answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                               timeout=5)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
            with pytest.raises(grpc.RpcError) as unserved:
                storage_pb2_grpc.StorageStub(channel).ListOffsets(
                    common_pb2.ListOffsetsRequest(), timeout=5)
        assert unserved.value.code() == grpc.StatusCode.UNIMPLEMENTED

    def test_a_kafka_client_logs_in_over_tls_and_sees_the_advertised_broker(
            self, scram_cluster: SecureCluster) -> None:
        """confluent-kafka (librdkafka) on the gateway Service's kafka port: TLS with
        the gateway's certificate (verified against the advertised host), SCRAM-SHA-512
        as the bootstrap user; one broker, id 0, at the advertised address. In
        plaintext a Kafka client gets no metadata."""
        bootstrap = scram_cluster.chart.address("gateway", KAFKA_PORT)
        name, password = admin_login(scram_cluster)
        client = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
                              "ssl.ca.location": scram_cluster.ca_file(),
                              "ssl.endpoint.identification.algorithm": "https",
                              "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": name,
                              "sasl.password": password})
        metadata = client.list_topics(timeout=30)
        assert [(b.id, f"{b.host}:{b.port}") for b in metadata.brokers.values()] == \
            [(0, bootstrap)]
        refused = run_kcat("-b", bootstrap, "-L", "-m", "3")
        assert refused.returncode != 0 and "Failed to acquire metadata" in refused.stderr, \
            refused.stdout + refused.stderr

    def test_the_helm_test_pod_logs_in_over_tls(self, scram_cluster: SecureCluster) -> None:
        done = run_helm_test_pod(scram_cluster.chart)
        assert done.returncode == 0, done.stderr + done.stdout
        assert "produced and consumed 10 records" in done.stdout

    def test_the_operator_logs_in_over_tls(self, scram_cluster: SecureCluster) -> None:
        operator_creates_the_example_topic(
            scram_cluster.chart, scram_cluster.settings(admin_login(scram_cluster)))


class TestExistingSecrets:
    """ci/existing-secrets-values.yaml: given Secrets, client certificates at the
    gateway too, no SCRAM."""

    def test_certificates_are_the_principals_at_the_gateway(
            self, mtls_cluster: SecureCluster) -> None:
        """A super user's certificate (the `helm test` pod's name) grants an application's
        certificate its ACLs; the application then produces and consumes in a group (the
        coordinators are services by their certificates); it was refused before."""
        boss = mtls_cluster.settings(certificate="strand-helm-test")
        app = mtls_cluster.settings(certificate="app")
        with Admin(mtls_cluster.bootstrap, **boss) as admin:
            admin.create_topics([NewTopic("by-certificate", num_partitions=3,
                                          replication_factor=1)])
        with Admin(mtls_cluster.bootstrap, **app) as stranger, \
                pytest.raises(TopicAuthorizationFailedError):
            stranger.describe_topics(["by-certificate"])
        with Admin(mtls_cluster.bootstrap, **boss) as admin:
            admin.create_acls([allow("User:app", ResourceType.TOPIC, "by-certificate"),
                               allow("User:app", ResourceType.GROUP, "app-group")])
        produce_and_consume(mtls_cluster.bootstrap, app, "by-certificate", "app-group")

    def test_clients_without_a_certificate_of_the_ca_are_refused(
            self, mtls_cluster: SecureCluster) -> None:
        other = CertificateAuthority("another CA")
        stranger_cert, stranger_key = mtls_cluster.client("stranger", ca=other)
        for settings in (mtls_cluster.settings(),  # TLS, no certificate
                         client_tls_settings(True, mtls_cluster.ca_file(), stranger_cert,
                                             stranger_key)):
            with Admin(mtls_cluster.bootstrap, request_timeout_ms=1000, **settings) as admin, \
                    pytest.raises(TransportError) as refusal:
                admin.list_topics()
            assert refusal.value.status == "UNAVAILABLE"

    def test_a_kafka_client_presents_its_certificate(self, mtls_cluster: SecureCluster) -> None:
        """kcat (librdkafka) over TLS with a super user's certificate (no SASL): broker
        0 at the advertised address; without a certificate the handshake is refused."""
        bootstrap = mtls_cluster.chart.address("gateway", KAFKA_PORT)
        cert, key = mtls_cluster.client("strand-helm-test")
        tls = ("-X", "security.protocol=SSL", "-X", f"ssl.ca.location={mtls_cluster.ca_file()}")
        listing = json.loads(kcat("-b", bootstrap, "-L", "-J", *tls,
                                  "-X", f"ssl.certificate.location={cert}",
                                  "-X", f"ssl.key.location={key}"))
        assert listing["brokers"] == [{"id": 0, "name": bootstrap}]
        refused = run_kcat("-b", bootstrap, "-L", "-m", "3", *tls)
        assert refused.returncode != 0 and "Failed to acquire metadata" in refused.stderr

    def test_the_helm_test_pod_and_the_operator_present_their_certificates(
            self, mtls_cluster: SecureCluster) -> None:
        done = run_helm_test_pod(mtls_cluster.chart)
        assert done.returncode == 0, done.stderr + done.stdout
        operator_creates_the_example_topic(
            mtls_cluster.chart, mtls_cluster.settings(certificate="strand-helm-test"),
            replicas=1)
