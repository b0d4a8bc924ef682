"""The chart's workloads run (issue 13, acceptance 3): the chart rendered with its
default values (fewer replicas, to save CPU), every container started as a local
process with its command, args and environment exactly as rendered (see
local_pods.py for what the cluster itself would provide), the storage pods' init
container reading its Node's zone from kmock's Kubernetes emulator, etcd's
container run by Debian's etcd. Then the SDK produces and consumes through the
gateway, a Kafka client (kcat) sees the gateways as one broker at the advertised
address and produces and consumes there, the racks are the nodes' zones, the `helm
test` pod's script passes and the operator turns the example Topic into a topic —
so a wrong flag, variable or address in the chart fails here."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import kmock
import pytest
import yaml

from strand import Admin, Consumer, NewTopic, Producer, TopicPartition
from strand.launcher import Launch, Process, etcd_binary, stop_in_order, wait_until
from tests.k8s.chart.api_server import EmulatedApiServer
from tests.k8s.chart.local_pods import (
    LOCALHOST,
    ChartAddressError,
    LocalCluster,
    LocalContainer,
    LocalPod,
    UndefinedVariableError,
)
from tests.k8s.chart.tools import CHART, DEFAULT, REPO, Manifest, load_all, render

pytestmark = pytest.mark.slow

VENV_BIN = Path(sys.executable).parent
ZONES = ("zone-a", "zone-b", "zone-c")
ZONE_LABEL = "topology.kubernetes.io/zone"
# Fewer replicas than the defaults (2 cores): everything else is the default values.
SMALL = ("etcd.replicas=1", "storage.replicas=3", "controller.replicas=1",
         "gateway.replicas=1", "groups.replicas=1", "transactions.replicas=1")
# Booted in the launcher's stages: what a stage needs serves before the next starts.
# The operator comes last, in a fixture of its own (its tests fail alone if it does).
STAGES = (("etcd",), ("storage", "controller"), ("gateway",), ("groups", "transactions"))
TOKEN = "local-service-account-token"
PRODUCER_JOB = REPO / "k8s" / "examples" / "producer-job.yaml"
SERVE_TIMEOUT = 90.0
KAFKA_PORT = 9093  # gateway.kafka.port's default


def binaries() -> dict[str, str]:
    """The images' commands, as installed on this machine."""
    return {"strand-service": str(VENV_BIN / "strand-service"),
            "/usr/local/bin/etcd": etcd_binary(),  # Debian's etcd
            "sh": "/bin/sh"}


def node_of(component: str, index: int) -> str:
    """Storage node N runs on a node of zone N mod 3; the rest in the first zone."""
    return f"node-{ZONES[index % len(ZONES)] if component == 'storage' else ZONES[0]}"


class ContainerProcess(Process):
    """A container of the chart, run as a local process by the launcher."""

    def __init__(self, container: LocalContainer, logs: Path) -> None:
        super().__init__(f"{container.pod.name}-{container.name}", container.pod.component,
                         logs / f"{container.pod.name}-{container.name}.log",
                         Launch(env=container.env, die_with_parent=True))
        self.container = container

    @property
    def address(self) -> str:
        return " ".join(f"{LOCALHOST}:{p}" for p in self.container.pod.ports.values())

    def command(self) -> list[str]:
        return self.container.argv

    def serving(self) -> bool:
        ready = self.container.readiness
        return ready() if ready is not None else True


@dataclass
class ChartCluster:
    pods: LocalCluster
    api: EmulatedApiServer
    processes: list[ContainerProcess]
    kubeconfig: Path
    logs: Path

    def address(self, service: str, port: int = 9090) -> str:
        local = self.pods.addresses[(f"strand-{service}.strand.svc.cluster.local", port)]
        return f"{LOCALHOST}:{local}"

    @property
    def bootstrap(self) -> str:
        return self.address("gateway")


def declare_api(api: EmulatedApiServer) -> None:
    """The cluster the chart is installed in: three nodes in three zones, and what
    kopf discovers (namespaces, events, the CRD Helm installs from crds/, Topics)."""
    for zone in ZONES:
        api.store("v1/nodes", None, f"node-{zone}", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"node-{zone}", "labels": {ZONE_LABEL: zone}}})
    api.declare("v1/namespaces", kmock.ResourceInfo(
        kind="Namespace", singular="namespace", namespaced=False, verbs={"list", "watch"}))
    api.declare("v1/events", kmock.ResourceInfo(
        kind="Event", singular="event", namespaced=True, verbs={"create", "list"}))
    api.declare("apiextensions.k8s.io/v1/customresourcedefinitions", kmock.ResourceInfo(
        kind="CustomResourceDefinition", singular="customresourcedefinition",
        namespaced=False, verbs={"get", "list", "watch"}))
    api.declare("strand.io/v1/topics", kmock.ResourceInfo(
        kind="Topic", singular="topic", namespaced=True, shortnames={"st"},
        subresources={"status"},
        verbs={"get", "list", "watch", "create", "patch", "update", "delete"}))
    crd = yaml.safe_load((CHART / "crds" / "topics.strand.io.yaml").read_text())
    api.store("apiextensions.k8s.io/v1/customresourcedefinitions", None,
              crd["metadata"]["name"], crd)


def write_kubeconfig(directory: Path, server: str) -> Path:
    """What in-cluster config gives the operator, for an API server on plain HTTP."""
    path = directory / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "local",
        "clusters": [{"name": "local", "cluster": {"server": server}}],
        "users": [{"name": "operator", "user": {"token": TOKEN}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "operator",
                                                   "namespace": "strand"}}]}))
    return path


def run_init_containers(pods: LocalCluster, pod: LocalPod, api: EmulatedApiServer) -> None:
    """Run a pod's init containers to completion. The API server and the projected
    token they get in a cluster are given by the flags meant for that."""
    for init in pod.containers(init=True):
        local = pods.container(pod, init)
        argv = list(local.argv)
        token_mounts = [m for m in init.get("volumeMounts", []) if m["name"] == "api-token"]
        if token_mounts:
            token = pod.volume("api-token") / "token"
            token.write_text(TOKEN)
            argv += ["--api-server", api.url, "--token-file", str(token)]
        done = subprocess.run(argv, env={**os.environ, **local.env}, capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 0, (f"init container {pod.name}/{init['name']} exited "
                                      f"{done.returncode}: {done.stderr}")


def start_stage(pods: LocalCluster, components: tuple[str, ...], api: EmulatedApiServer,
                kubeconfig: Path, logs: Path) -> list[ContainerProcess]:
    started = []
    for component in components:
        for pod in pods.of_component(component):
            run_init_containers(pods, pod, api)
            for container in pod.containers():
                # The operator's in-cluster credentials, as a kubeconfig.
                extra = {"KUBECONFIG": str(kubeconfig)} if component == "operator" else {}
                process = ContainerProcess(pods.container(pod, container, extra), logs)
                process.spawn()
                started.append(process)
    return started


@contextlib.contextmanager
def boot(manifests: list[Manifest], directory: Path,
         secrets: Mapping[str, Mapping[str, bytes]] | None = None) -> Iterator[ChartCluster]:
    """The rendered workloads run as local processes stage by stage (STAGES), each
    stage served (its readiness probes pass) before the next starts; ``secrets``:
    the Secrets their volumes mount."""
    logs = directory / "logs"
    pods = LocalCluster(manifests, directory, node_of, binaries(), secrets or {})
    processes: list[ContainerProcess] = []
    with EmulatedApiServer(namespaces=("strand",)) as api:
        declare_api(api)
        kubeconfig = write_kubeconfig(directory, api.url)
        try:
            for stage in STAGES:
                started = start_stage(pods, stage, api, kubeconfig, logs)
                processes += started
                for process in started:
                    process.wait_serving(SERVE_TIMEOUT)
            yield ChartCluster(pods, api, processes, kubeconfig, logs)
        finally:
            stop_in_order(processes, timeout=45)
            for pod in pods.pods:  # the volumes (etcd preallocates 64 MB); logs stay
                shutil.rmtree(pod.directory, ignore_errors=True)


@pytest.fixture(scope="module")
def chart_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChartCluster]:
    # The example producer Job runs against the chart's gateway too.
    example_job = load_all(PRODUCER_JOB.read_text())
    with boot([*render([DEFAULT], SMALL), *example_job],
              tmp_path_factory.mktemp("chart-pods")) as chart:
        yield chart


@pytest.fixture(scope="module")
def operator(chart_cluster: ChartCluster) -> ContainerProcess:
    """The operator's pod, started once the cluster serves (stopped with it)."""
    (process,) = start_stage(chart_cluster.pods, ("operator",), chart_cluster.api,
                             chart_cluster.kubeconfig, chart_cluster.logs)
    chart_cluster.processes.append(process)
    process.wait_serving(SERVE_TIMEOUT)
    return process


# ------------------------------------------------------------------------------ tests

def test_every_workload_runs_and_the_racks_are_the_nodes_zones(
        chart_cluster: ChartCluster) -> None:
    rendered = {p.component for p in chart_cluster.pods.pods}
    assert rendered == {*(c for stage in STAGES for c in stage), "operator", "helm-test",
                        "strand-example-producer"}
    running = {p.role for p in chart_cluster.processes if p.running()}
    assert running >= {c for stage in STAGES for c in stage}
    with Admin(chart_cluster.bootstrap) as admin:
        wait_until(lambda: len(admin.describe_cluster().brokers) == 3, 30,
                   "the three storage nodes to register")
        cluster = admin.describe_cluster()
    # Node ids are the StatefulSet ordinals; racks the zones of the nodes they run on.
    assert {(b.node_id, b.rack) for b in cluster.brokers} == \
        {(0, "zone-a"), (1, "zone-b"), (2, "zone-c")}


def test_produce_and_consume_through_the_gateway(chart_cluster: ChartCluster) -> None:
    topic = "chart-processes"
    with Admin(chart_cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])
        (described,) = admin.describe_topics([topic])
    # Rack-aware: every partition has one replica in each zone.
    assert all(sorted(p.replicas) == [0, 1, 2] for p in described.partitions)
    sent = [f"record-{i}".encode() for i in range(30)]
    with Producer(chart_cluster.bootstrap) as producer:  # idempotent: a txn coordinator
        for value in sent:
            producer.send(topic, value)
        producer.flush(timeout=30)
    received: list[bytes] = []
    # A group member: the group coordinator assigns the partitions and keeps offsets.
    with Consumer(chart_cluster.bootstrap, group_id="chart", auto_offset_reset="earliest",
                  enable_auto_commit=False) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(received) < len(sent) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                received += [r.value for r in records if r.value is not None]
        consumer.commit()
        committed = [consumer.committed(TopicPartition(topic, p)) for p in range(3)]
    assert sorted(received) == sorted(sent)
    assert sum(o or 0 for o in committed) == len(sent)


def test_the_metrics_port_serves_prometheus_metrics(chart_cluster: ChartCluster) -> None:
    (gateway,) = chart_cluster.pods.of_component("gateway")
    url = f"http://{LOCALHOST}:{gateway.ports[9100]}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    assert "strand_requests_total" in text


def test_kafka_clients_see_the_gateways_as_one_broker_at_the_advertised_address(
        chart_cluster: ChartCluster) -> None:
    """A Kafka client (kcat, librdkafka) bootstraps at the gateway Service's kafka
    port and is told of one broker, id 0, at the address the chart advertises — the
    Service's in-cluster name, here 127.0.0.1 and the port that name maps to — then
    produces and consumes there."""
    bootstrap = chart_cluster.address("gateway", KAFKA_PORT)
    (gateway,) = chart_cluster.pods.of_component("gateway")
    assert bootstrap == f"{LOCALHOST}:{gateway.ports[KAFKA_PORT]}"
    topic = "chart-kafka"
    with Admin(chart_cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=3)])
    listing = json.loads(kcat("-b", bootstrap, "-L", "-J", "-t", topic))
    assert listing["brokers"] == [{"id": 0, "name": bootstrap}]
    (described,) = listing["topics"]
    assert [(p["leader"], sorted(r["id"] for r in p["replicas"]))
            for p in described["partitions"]] == [(0, [0, 1, 2])] * 2
    kcat("-b", bootstrap, "-P", "-t", topic, "-p", "0", "-K", ":", stdin="k1:v1\nk2:v2\n")
    out = kcat("-b", bootstrap, "-C", "-t", topic, "-p", "0", "-e", "-q", "-f", "%k=%s\n")
    assert out.splitlines() == ["k1=v1", "k2=v2"]


def run_kcat(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """kcat, librdkafka's command-line client, as installed by `make test-deps`."""
    path = shutil.which("kcat")
    if path is None:
        pytest.fail("kcat is not installed: run `make test-deps`")
    return subprocess.run([path, *args], input=stdin, capture_output=True, text=True,
                          timeout=60, check=False)


def kcat(*args: str, stdin: str | None = None) -> str:
    """kcat's output; a failure quoting its errors if it fails."""
    done = run_kcat(*args, stdin=stdin)
    assert done.returncode == 0, f"kcat {' '.join(args)}: {done.stderr}"
    return done.stdout


def test_the_helm_test_pod_passes(chart_cluster: ChartCluster) -> None:
    (pod,) = chart_cluster.pods.of_component("helm-test")
    # The image's PATH holds the strand CLI; here the virtualenv's does.
    local = chart_cluster.pods.container(
        pod, pod.containers()[0], {"PATH": f"{VENV_BIN}:{os.environ['PATH']}"})
    done = subprocess.run(local.argv, env={**os.environ, **local.env}, capture_output=True,
                          text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "produced and consumed 10 records" in done.stdout


def test_the_example_producer_job_produces(chart_cluster: ChartCluster) -> None:
    (pod,) = chart_cluster.pods.of_component("strand-example-producer")
    (container,) = pod.containers()
    env = {e["name"]: e.get("value") for e in container["env"]}
    topic, records = str(env["TOPIC"]), int(str(env["RECORDS"]))
    with Admin(chart_cluster.bootstrap) as admin:
        if topic not in admin.list_topics():  # the example Topic's, if the operator runs
            admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=3)])
        before = _record_count(chart_cluster, topic)
        # The image's PATH holds the strand CLI; here the virtualenv's does.
        local = chart_cluster.pods.container(
            pod, container, {"PATH": f"{VENV_BIN}:{os.environ['PATH']}"})
        done = subprocess.run(local.argv, env={**os.environ, **local.env}, capture_output=True,
                              text=True, timeout=180, check=False)
        assert done.returncode == 0, done.stderr + done.stdout
    assert _record_count(chart_cluster, topic) - before == records


def _record_count(chart_cluster: ChartCluster, topic: str) -> int:
    with Admin(chart_cluster.bootstrap) as admin:
        partitions = len(admin.describe_topics([topic])[0].partitions)
    with Consumer(chart_cluster.bootstrap) as consumer:
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    return sum(ends.values())


def test_the_operator_creates_the_example_topic(chart_cluster: ChartCluster,
                                                operator: ContainerProcess) -> None:
    topic = yaml.safe_load((REPO / "k8s" / "examples" / "topic-orders.yaml").read_text())
    # What the API server adds on creation (kmock stores objects as they come).
    topic["metadata"].update(namespace="strand", uid="uid-orders", generation=1,
                             resourceVersion="1",
                             creationTimestamp="2026-01-01T00:00:00Z")
    chart_cluster.api.request("POST", "/apis/strand.io/v1/namespaces/strand/topics", topic)
    name = topic["metadata"]["name"]
    with Admin(chart_cluster.bootstrap) as admin:
        wait_until(lambda: name in admin.list_topics(), 60,
                   f"the operator to create topic {name}")
        (described,) = admin.describe_topics([name])
    assert len(described.partitions) == topic["spec"]["partitions"]
    assert {len(p.replicas) for p in described.partitions} == {topic["spec"]["replicas"]}

    def ready() -> bool:
        stored = chart_cluster.api.request(
            "GET", f"/apis/strand.io/v1/namespaces/strand/topics/{name}")
        conditions = stored.get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    wait_until(ready, 30, f"Topic {name} to be Ready")
    assert operator.running()


# ------------------------------------------------- the test fails what it should fail

def test_a_wrong_flag_in_the_chart_fails(tmp_path: Path) -> None:
    manifests = render([DEFAULT], [*SMALL, "gateway.extraArgs={--no-such-flag}"])
    pods = LocalCluster(manifests, tmp_path, node_of, binaries())
    (gateway,) = pods.of_component("gateway")
    process = ContainerProcess(pods.container(gateway, gateway.containers()[0]), tmp_path)
    process.spawn()
    wait_until(lambda: not process.running(), 30, "the gateway to reject its flags")
    assert process.returncode == 2
    assert "--no-such-flag" in process.log_path.read_text()


def test_an_address_nothing_in_the_chart_serves_fails(tmp_path: Path) -> None:
    manifests = render([DEFAULT], [*SMALL, "etcd.external.endpoints={etcd.elsewhere:2379}"])
    pods = LocalCluster(manifests, tmp_path, node_of, binaries())
    (controller,) = pods.of_component("controller")
    with pytest.raises(ChartAddressError, match=r"etcd\.elsewhere:2379"):
        pods.container(controller, controller.containers()[0])



def test_a_variable_the_container_does_not_define_fails(tmp_path: Path) -> None:
    manifests = render([DEFAULT], [*SMALL, "controller.extraArgs={--id=$(POD_NAM)}"])
    pods = LocalCluster(manifests, tmp_path, node_of, binaries())
    (controller,) = pods.of_component("controller")
    with pytest.raises(UndefinedVariableError, match=r"\$\(POD_NAM\)"):
        pods.container(controller, controller.containers()[0])
