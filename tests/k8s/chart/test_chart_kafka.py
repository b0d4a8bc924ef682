"""The chart exposes the gateways' Kafka listener (issue 16, point 2; values
gateway.kafka): the gateway Deployment serves it (--kafka-listen, the `kafka`
container port), the gateway Service carries it, the gateways advertise the address
in front of them (the Service's in-cluster name, or the external Service's address),
NetworkPolicies admit it, the gateway's certificate covers it under TLS, and settings
that cannot work are refused. The gateway run with the rendered flags, and
Kafka clients against it: test_chart_processes.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.k8s.chart.test_chart_render import validate
from tests.k8s.chart.tools import (
    CHART,
    DEFAULT,
    KAFKA_EXTERNAL,
    SECURE,
    Manifest,
    helm,
    named,
    of_kind,
    pod_spec,
    render,
)

KAFKA_PORT = 9093
IN_CLUSTER = f"strand-gateway.strand.svc.cluster.local:{KAFKA_PORT}"
EXTERNAL_HOST = "kafka.strand.example.com"
NODE_PORT = ("gateway.kafka.external.enabled=true", "gateway.kafka.external.type=NodePort",
             "gateway.kafka.external.nodePort=31093",
             "gateway.kafka.advertisedHost=node-1.example.com")


def gateway_container(manifests: list[Manifest]) -> dict[str, Any]:
    container: dict[str, Any] = pod_spec(named(manifests, "Deployment", "strand-gateway"))[
        "containers"][0]
    return container


def kafka_flags(container: dict[str, Any]) -> dict[str, str]:
    return dict(a.removeprefix("--").split("=", 1) for a in container["args"]
                if a.startswith("--kafka-"))


def service_port(service: Manifest, name: str) -> dict[str, Any]:
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    assert name in ports, f"Service {service['metadata']['name']} has no port {name!r}"
    port: dict[str, Any] = ports[name]
    return port


def container_port(container: dict[str, Any], name: str) -> int:
    (port,) = [p["containerPort"] for p in container["ports"] if p["name"] == name]
    return int(port)


@pytest.fixture(scope="module")
def default() -> list[Manifest]:
    return render([DEFAULT])


@pytest.fixture(scope="module")
def external() -> list[Manifest]:
    return render([KAFKA_EXTERNAL])


# ------------------------------------------------------------------ in the cluster

def test_the_gateway_serves_kafka_on_its_own_port_by_default(default: list[Manifest]) -> None:
    container = gateway_container(default)
    assert {"name": "kafka", "containerPort": KAFKA_PORT, "protocol": "TCP"} in \
        container["ports"]
    assert kafka_flags(container) == {"kafka-listen": f"0.0.0.0:{KAFKA_PORT}",
                                      "kafka-advertise": IN_CLUSTER,
                                      "kafka-max-request-bytes": "104857600"}
    service = named(default, "Service", "strand-gateway")
    assert service_port(service, "kafka") == {"name": "kafka", "port": KAFKA_PORT,
                                              "targetPort": "kafka", "protocol": "TCP"}
    assert service_port(service, "grpc")["port"] == 9090
    assert not [s for s in of_kind(default, "Service")
                if s["metadata"]["name"].endswith("-kafka-external")]


def test_the_advertised_address_is_the_gateway_service(default: list[Manifest]) -> None:
    """What every Kafka client connects to after bootstrapping: the gateway Service's
    DNS name and its kafka port, which leads to the port the gateways listen on."""
    container = gateway_container(default)
    host, port = kafka_flags(container)["kafka-advertise"].rsplit(":", 1)
    service = named(default, "Service", "strand-gateway")
    name, namespace = service["metadata"]["name"], service["metadata"]["namespace"]
    assert host == f"{name}.{namespace}.svc.cluster.local"
    kafka = service_port(service, "kafka")
    assert int(port) == kafka["port"]
    listen_port = int(kafka_flags(container)["kafka-listen"].rsplit(":", 1)[1])
    assert container_port(container, kafka["targetPort"]) == listen_port
    out = helm("install", "strand", str(CHART), "--namespace", "strand", "--dry-run=client",
               "--values", str(DEFAULT))
    assert f"Kafka clients (bootstrap.servers): {IN_CLUSTER}\n" in out.split("NOTES:", 1)[1]


def test_port_advertised_address_and_request_limit_are_values() -> None:
    manifests = render([DEFAULT], ["gateway.kafka.port=19092",
                                   "gateway.kafka.advertisedHost=kafka.internal.example",
                                   "gateway.kafka.advertisedPort=9092",
                                   "gateway.kafka.maxRequestBytes=1048576"])
    container = gateway_container(manifests)
    assert kafka_flags(container) == {"kafka-listen": "0.0.0.0:19092",
                                      "kafka-advertise": "kafka.internal.example:9092",
                                      "kafka-max-request-bytes": "1048576"}
    assert container_port(container, "kafka") == 19092
    assert service_port(named(manifests, "Service", "strand-gateway"), "kafka")["port"] == 19092
    ipv6 = render([DEFAULT], ["gateway.kafka.advertisedHost=fd00::10"])
    assert kafka_flags(gateway_container(ipv6))["kafka-advertise"] == f"[fd00::10]:{KAFKA_PORT}"


def test_kafka_can_be_switched_off() -> None:
    manifests = render([DEFAULT], ["gateway.kafka.enabled=false"])
    for manifest in manifests:
        validate(manifest)
    container = gateway_container(manifests)
    assert kafka_flags(container) == {}
    assert "kafka" not in {p["name"] for p in container["ports"]}
    assert "kafka" not in {p["name"] for p in
                           named(manifests, "Service", "strand-gateway")["spec"]["ports"]}
    policies = render([DEFAULT], ["gateway.kafka.enabled=false", "networkPolicy.enabled=true"])
    gateway_policy = named(policies, "NetworkPolicy", "strand-gateway")
    assert [p["port"] for p in gateway_policy["spec"]["ingress"][0]["ports"]] == [9090]


# ----------------------------------------------------------------------- outside

def test_external_kafka_values_lint_and_validate(external: list[Manifest]) -> None:
    out = helm("lint", "--strict", str(CHART), "--values", str(KAFKA_EXTERNAL))
    assert "0 chart(s) failed" in out, out
    for manifest in external:
        validate(manifest)


def test_a_load_balancer_exposes_kafka_at_the_advertised_address(
        external: list[Manifest]) -> None:
    service = named(external, "Service", "strand-gateway-kafka-external")
    spec = service["spec"]
    assert spec["type"] == "LoadBalancer"
    assert spec["externalTrafficPolicy"] == "Local"
    assert spec["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    assert service["metadata"]["annotations"] == {
        "external-dns.alpha.kubernetes.io/hostname": EXTERNAL_HOST}
    assert spec["selector"] == named(external, "Deployment",
                                     "strand-gateway")["spec"]["selector"]["matchLabels"]
    (port,) = spec["ports"]
    container = gateway_container(external)
    # One address for clients inside and outside: the load balancer's.
    assert kafka_flags(container)["kafka-advertise"] == f"{EXTERNAL_HOST}:{port['port']}"
    assert container_port(container, port["targetPort"]) == KAFKA_PORT
    # The in-cluster Service keeps its kafka port (bootstrap inside the cluster).
    service_port(named(external, "Service", "strand-gateway"), "kafka")


def test_a_node_port_is_advertised_with_a_node_address() -> None:
    manifests = render([DEFAULT], NODE_PORT)
    for manifest in manifests:
        validate(manifest)
    service = named(manifests, "Service", "strand-gateway-kafka-external")
    assert service["spec"]["type"] == "NodePort"
    assert "loadBalancerSourceRanges" not in service["spec"]
    (port,) = service["spec"]["ports"]
    assert port["nodePort"] == 31093
    assert kafka_flags(gateway_container(manifests))["kafka-advertise"] == \
        "node-1.example.com:31093"


def test_network_policy_admits_kafka_clients_like_grpc_clients(
        external: list[Manifest]) -> None:
    policy = named(external, "NetworkPolicy", "strand-gateway")
    (rule, *_) = policy["spec"]["ingress"]
    assert [p["port"] for p in rule["ports"]] == [9090, KAFKA_PORT]
    assert {"ipBlock": {"cidr": "203.0.113.0/24"}} in rule["from"]


# --------------------------------------------------------------------------- TLS

def test_with_tls_the_gateway_certificate_covers_the_advertised_host() -> None:
    """Under tls.enabled the gateway serves TLS on the Kafka port with its gRPC
    certificate (no flag of its own), and a Kafka client verifies that certificate
    against the host it was told to connect to: the in-cluster name, or the external
    address, which the chart adds to the certificate."""
    def gateway_certificate(manifests: list[Manifest]) -> dict[str, Any]:
        spec: dict[str, Any] = named(manifests, "Certificate", "strand-gateway")["spec"]
        return spec

    secure = render([SECURE])
    container = gateway_container(secure)
    assert kafka_flags(container)["kafka-advertise"] == IN_CLUSTER
    assert {"tls-cert", "tls-key", "tls-ca"} <= {a.removeprefix("--").split("=")[0]
                                                 for a in container["args"]}
    assert IN_CLUSTER.rsplit(":", 1)[0] in gateway_certificate(secure)["dnsNames"]
    assert "ipAddresses" not in gateway_certificate(secure)
    by_name = render([SECURE, KAFKA_EXTERNAL])
    assert EXTERNAL_HOST in gateway_certificate(by_name)["dnsNames"]
    by_ip = render([SECURE], ["gateway.kafka.external.enabled=true",
                              "gateway.kafka.advertisedHost=203.0.113.7"])
    assert gateway_certificate(by_ip)["ipAddresses"] == ["203.0.113.7"]
    assert "203.0.113.7" not in gateway_certificate(by_ip)["dnsNames"]
    out = helm("install", "strand", str(CHART), "--namespace", "strand", "--dry-run=client",
               "--values", str(SECURE))
    assert f"Kafka clients (bootstrap.servers): {IN_CLUSTER} (TLS" in out.split("NOTES:", 1)[1]


# ------------------------------------------------------------------ refusals

@pytest.mark.parametrize(("settings", "message"), [
    (["gateway.kafka.external.enabled=true"], "needs gateway.kafka.advertisedHost"),
    (["gateway.kafka.external.enabled=true", "gateway.kafka.advertisedHost=a.example",
      "gateway.kafka.external.type=NodePort"], "needs gateway.kafka.external.nodePort"),
    ([*NODE_PORT, "gateway.kafka.external.loadBalancerSourceRanges={10.0.0.0/8}"],
     "applies to type LoadBalancer only"),
    (["gateway.kafka.port=9090"], "9090 is already the services' gRPC port"),
    (["gateway.kafka.port=9100"], "9100 is already metrics.port"),
    (["tls.enabled=true", "gateway.kafka.port=9091"], "9091 is already tls.healthPort"),
    (["gateway.kafka.enabled=false", "gateway.kafka.advertisedHost=a.example"],
     "need gateway.kafka.enabled=true"),
], ids=["no-advertised-host", "node-port-unset", "ranges-on-node-port", "grpc-port",
        "metrics-port", "health-port", "advertise-without-listener"])
def test_settings_that_cannot_work_are_refused(settings: list[str], message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        render([DEFAULT], settings)


@pytest.mark.parametrize(("setting", "path"), [
    ("gateway.kafka.port=0", "gateway/kafka/port"),
    ("gateway.kafka.enabled=maybe", "gateway/kafka/enabled"),
    ("gateway.kafka.advertisedHost=kafka.example.com:9093", "gateway/kafka/advertisedHost"),
    ("gateway.kafka.advertisedPort=70000", "gateway/kafka/advertisedPort"),
    ("gateway.kafka.maxRequestBytes=10", "gateway/kafka/maxRequestBytes"),
    ("gateway.kafka.external.type=ClusterIP", "gateway/kafka/external/type"),
    ("gateway.kafka.external.nodePort=8080", "gateway/kafka/external/nodePort"),
    ("gateway.kafka.external.externalTrafficPolicy=Nearest",
     "gateway/kafka/external/externalTrafficPolicy"),
    ("gateway.kafka.external.loadBalancerSourceRanges={anywhere}",
     "gateway/kafka/external/loadBalancerSourceRanges"),
    ("gateway.kafka.listen=0.0.0.0:9093", "additional properties|additionalProperties"),
])
def test_the_schema_rejects_wrong_kafka_values(setting: str, path: str) -> None:
    with pytest.raises(AssertionError, match=path):
        render([DEFAULT], [setting])

