"""The chart renders, validates against the newest Kubernetes schemas that
kubernetes-validate knows, and its workloads have what production needs: PDBs,
anti-affinity, zone spread, probes, resources, restrictive security contexts, and
RBAC no wider than the contract (notes: contract-k8s; issue 13, acceptance 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from kubernetes_validate.utils import latest_version

from tests.k8s.chart.tools import (
    CHART,
    DEFAULT,
    EXTERNAL_ETCD,
    RACK_AWARE,
    REPO,
    VALUE_SETS,
    WORKLOAD_KINDS,
    Manifest,
    containers,
    helm,
    load_all,
    named,
    of_kind,
    pod_spec,
    render,
)

KUBERNETES = latest_version()
# Objects of CRDs kubernetes-validate has no schema for. The chart renders them only
# when their value is on (a ServiceMonitor needs the Prometheus Operator's CRD); they
# are checked by the assertions below instead.
CRD_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor"),
             ("strand.io/v1", "Topic"), ("strand.io/v1", "StrandUser")}
STRAND_COMPONENTS = ("storage", "controller", "gateway", "groups", "transactions")
APP_UID = 10001  # the image's user (Dockerfile)
CRD_NAMES = ("topics.strand.io.yaml", "strandusers.strand.io.yaml")


@pytest.fixture(scope="module")
def rendered() -> dict[Path, list[Manifest]]:
    return {values: render([values]) for values in VALUE_SETS}


def validate(manifest: Manifest) -> None:
    """kubernetes-validate --strict for KUBERNETES; a failure names the object."""
    what = f"{manifest['kind']} {manifest.get('metadata', {}).get('name')}"
    try:
        kubernetes_validate.validate(manifest, KUBERNETES, strict=True)
    except kubernetes_validate.ValidationError as exc:
        raise AssertionError(f"{what} is invalid for Kubernetes {KUBERNETES}: "
                             f"{'.'.join(str(p) for p in exc.path)}: {exc.message}") from exc


def by_component(manifests: list[Manifest], kind: str) -> dict[str, Manifest]:
    return {m["metadata"]["labels"]["app.kubernetes.io/component"]: m
            for m in of_kind(manifests, kind)}


# ------------------------------------------------------------------------- lint, schemas

@pytest.mark.parametrize("values", VALUE_SETS, ids=lambda p: p.stem)
def test_helm_lint_passes(values: Path) -> None:
    out = helm("lint", "--strict", str(CHART), "--values", str(values))
    assert "0 chart(s) failed" in out, out


@pytest.mark.parametrize("values", VALUE_SETS, ids=lambda p: p.stem)
def test_rendered_objects_validate_strictly(rendered: dict[Path, list[Manifest]],
                                            values: Path) -> None:
    manifests = rendered[values]
    assert len(manifests) > 10
    for manifest in manifests:
        if (manifest["apiVersion"], manifest["kind"]) in CRD_KINDS:
            continue  # no schema in kubernetes-validate (see CRD_KINDS)
        validate(manifest)


def test_a_wrong_object_fails_validation() -> None:
    """The validation above can fail: an unknown field in a pod spec is rejected."""
    deployment = named(render([DEFAULT]), "Deployment", "strand-gateway")
    deployment["spec"]["template"]["spec"]["containers"][0]["probe"] = {}
    with pytest.raises(AssertionError, match="invalid"):
        validate(deployment)


def test_values_schema_rejects_unknown_and_mistyped_values() -> None:
    with pytest.raises(AssertionError, match=r"additional properties|additionalProperties"):
        render(settings=["storage.replica=3"])
    with pytest.raises(AssertionError, match="storage/replicas"):
        render(settings=["storage.replicas=three"])


def test_termination_grace_must_cover_the_controlled_shutdown() -> None:
    with pytest.raises(AssertionError, match="terminationGracePeriodSeconds"):
        render(settings=["storage.terminationGracePeriodSeconds=20"])


@pytest.mark.parametrize("name", CRD_NAMES)
def test_the_crd_in_the_chart_is_the_operator_crd_byte_for_byte(name: str) -> None:
    source, copy = REPO / "k8s" / "crds" / name, CHART / "crds" / name
    assert source.exists(), f"{source.relative_to(REPO)} is missing (the operator's CRD)"
    assert copy.exists(), (f"{copy.relative_to(REPO)} is missing: "
                           f"cp {source.relative_to(REPO)} {copy.relative_to(REPO)}")
    assert copy.read_bytes() == source.read_bytes(), (
        f"{copy.relative_to(REPO)} differs from {source.relative_to(REPO)}: "
        f"cp {source.relative_to(REPO)} {copy.relative_to(REPO)}")
    assert sorted(p.name for p in (CHART / "crds").glob("*.yaml")) == sorted(CRD_NAMES)


@pytest.mark.parametrize("name", CRD_NAMES)
def test_the_crd_validates_as_an_apiextensions_object(name: str) -> None:
    source = REPO / "k8s" / "crds" / name
    assert source.exists(), f"{source.relative_to(REPO)} is missing (the operator's CRD)"
    crds = load_all(source.read_text())
    assert [c["kind"] for c in crds] == ["CustomResourceDefinition"]
    assert crds[0]["apiVersion"] == "apiextensions.k8s.io/v1"
    validate(crds[0])


def test_the_examples_validate() -> None:
    examples = sorted((REPO / "k8s" / "examples").glob("*.yaml"))
    assert any(p.name == "producer-job.yaml" for p in examples)
    for path in examples:
        for manifest in load_all(path.read_text()):
            if (manifest["apiVersion"], manifest["kind"]) in CRD_KINDS:
                # A Topic's or StrandUser's schema is its CRD's; the operator's tests
                # check them against it. Here: that it names the cluster it belongs to.
                assert "strand.io/cluster" in manifest["metadata"].get("labels", {}), path
                continue
            validate(manifest)


@pytest.mark.parametrize("values", VALUE_SETS, ids=lambda p: p.stem)
def test_notes_render_with_the_gateway_address(values: Path) -> None:
    out = helm("install", "strand", str(CHART), "--namespace", "strand", "--dry-run=client",
               "--values", str(values))
    notes = out.split("NOTES:", 1)[1]
    assert "strand-gateway.strand.svc.cluster.local:9090" in notes
    assert "helm test strand --namespace strand" in notes


# --------------------------------------------------------------------- what is rendered

def test_external_etcd_installs_no_etcd_and_points_every_service_at_it(
        rendered: dict[Path, list[Manifest]]) -> None:
    manifests = rendered[EXTERNAL_ETCD]
    assert not [m for m in manifests
                if m["metadata"]["labels"].get("app.kubernetes.io/component") == "etcd"]
    expected = ("--etcd=etcd-0.etcd.platform.svc.cluster.local:2379,"
                "etcd-1.etcd.platform.svc.cluster.local:2379,"
                "etcd-2.etcd.platform.svc.cluster.local:2379")
    for component in STRAND_COMPONENTS:
        workload = by_component(manifests, "StatefulSet" if component == "storage"
                                else "Deployment")[component]
        assert expected in pod_spec(workload)["containers"][0]["args"], component


def test_operator_and_metrics_can_be_switched_off() -> None:
    manifests = render([DEFAULT], ["operator.enabled=false", "metrics.enabled=false"])
    for manifest in manifests:
        validate(manifest)
    assert not [m for m in manifests
                if m["metadata"]["labels"].get("app.kubernetes.io/component") == "operator"]
    for workload in of_kind(manifests, "Deployment", "StatefulSet"):
        for container in containers(workload):
            assert not any(a.startswith("--metrics-port") for a in container.get("args", []))
            assert "metrics" not in {p["name"] for p in container.get("ports", [])}
    assert not [m for m in manifests if m["metadata"]["name"] == "strand-metrics"]


def test_default_etcd_is_three_members_with_volumes(rendered: dict[Path, list[Manifest]]) -> None:
    etcd = named(rendered[DEFAULT], "StatefulSet", "strand-etcd")
    assert etcd["spec"]["replicas"] == 3
    assert etcd["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    args = pod_spec(etcd)["containers"][0]["args"]
    assert any(a.startswith("--initial-cluster=") and a.count("=http://") == 3 for a in args)


def test_storage_is_a_statefulset_with_rack_from_the_node(
        rendered: dict[Path, list[Manifest]]) -> None:
    storage = named(rendered[RACK_AWARE], "StatefulSet", "strand-storage")
    assert storage["spec"]["replicas"] == 6
    assert storage["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    spec = pod_spec(storage)
    init = spec["initContainers"][0]
    assert init["command"] == ["strand-service", "rack-from-node"]
    assert "--node=$(NODE_NAME)" in init["args"]
    assert "--output=/var/run/strand/rack" in init["args"]
    node_env = {e["name"]: e for e in init["env"]}["NODE_NAME"]
    assert node_env["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    main = spec["containers"][0]
    assert main["command"] == ["strand-service", "storage"]
    assert "--node-id-from-hostname" in main["args"]
    assert "--rack-file=/var/run/strand/rack" in main["args"]
    # The token is mounted into the init container only.
    assert spec["automountServiceAccountToken"] is False
    assert any(m["name"] == "api-token" for m in init["volumeMounts"])
    assert not any(m["name"] == "api-token" for m in main["volumeMounts"])


def test_rack_awareness_off_drops_the_init_container_and_its_rbac(
        rendered: dict[Path, list[Manifest]]) -> None:
    manifests = rendered[EXTERNAL_ETCD]
    spec = pod_spec(named(manifests, "StatefulSet", "strand-storage"))
    assert "initContainers" not in spec
    assert not any(a.startswith("--rack") for a in spec["containers"][0]["args"])
    assert not any("nodes" in rule["resources"]
                   for role in of_kind(manifests, "ClusterRole", "Role")
                   for rule in role["rules"])


def test_termination_grace_covers_the_controlled_shutdown(
        rendered: dict[Path, list[Manifest]]) -> None:
    spec = pod_spec(named(rendered[DEFAULT], "StatefulSet", "strand-storage"))
    args = spec["containers"][0]["args"]
    flags = dict(a.removeprefix("--").split("=", 1) for a in args if "=" in a)
    needed = float(flags["shutdown-grace"]) + float(flags["controlled-shutdown-timeout"])
    assert spec["terminationGracePeriodSeconds"] > needed


@pytest.mark.parametrize("values", VALUE_SETS, ids=lambda p: p.stem)
def test_every_component_has_a_pdb_allowing_one_down(rendered: dict[Path, list[Manifest]],
                                                      values: Path) -> None:
    manifests = rendered[values]
    pdbs = by_component(manifests, "PodDisruptionBudget")
    workloads = of_kind(manifests, "Deployment", "StatefulSet")
    for workload in workloads:
        component = workload["metadata"]["labels"]["app.kubernetes.io/component"]
        if component == "operator":
            continue  # one replica, strategy Recreate: a PDB would block node drains
        pdb = pdbs[component]
        assert pdb["spec"]["maxUnavailable"] == 1
        assert pdb["spec"]["selector"]["matchLabels"] == workload["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize("values", VALUE_SETS, ids=lambda p: p.stem)
def test_replicated_components_spread_over_hosts_and_zones(
        rendered: dict[Path, list[Manifest]], values: Path) -> None:
    for workload in of_kind(rendered[values], "Deployment", "StatefulSet"):
        if workload["metadata"]["name"].endswith("-operator"):
            continue
        spec = pod_spec(workload)
        selector = workload["spec"]["selector"]["matchLabels"]
        terms = spec["affinity"]["podAntiAffinity"][
            "preferredDuringSchedulingIgnoredDuringExecution"]
        assert [t["podAffinityTerm"]["topologyKey"] for t in terms] == ["kubernetes.io/hostname"]
        assert terms[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == selector
        (spread,) = spec["topologySpreadConstraints"]
        assert spread["topologyKey"] == "topology.kubernetes.io/zone"
        assert spread["maxSkew"] == 1
        assert spread["labelSelector"]["matchLabels"] == selector


@pytest.mark.parametrize("values", VALUE_SETS, ids=lambda p: p.stem)
def test_strand_services_have_grpc_probes_and_resources(
        rendered: dict[Path, list[Manifest]], values: Path) -> None:
    for workload in of_kind(rendered[values], *WORKLOAD_KINDS):
        for container in containers(workload):
            what = f"{workload['metadata']['name']}/{container['name']}"
            resources = container["resources"]
            assert {"cpu", "memory"} <= set(resources["requests"]), what
            assert "memory" in resources["limits"], what
            if container.get("command", [""])[0] == "strand-service" and \
                    container["command"][1] in STRAND_COMPONENTS:
                assert container["readinessProbe"]["grpc"]["port"] == 9090, what
                assert container["livenessProbe"]["grpc"]["port"] == 9090, what


@pytest.mark.parametrize("values", VALUE_SETS, ids=lambda p: p.stem)
def test_every_pod_is_locked_down(rendered: dict[Path, list[Manifest]], values: Path) -> None:
    manifests = rendered[values]
    for workload in of_kind(manifests, *WORKLOAD_KINDS):
        name = workload["metadata"]["name"]
        spec = pod_spec(workload)
        pod: dict[str, Any] = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] == APP_UID, name
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, name
        # No pod gets a token by default; the two that use the API mount one explicitly.
        assert spec["automountServiceAccountToken"] is False, name
        for container in containers(workload):
            context = container["securityContext"]
            what = f"{name}/{container['name']}"
            assert context["allowPrivilegeEscalation"] is False, what
            assert context["readOnlyRootFilesystem"] is True, what
            assert context["capabilities"] == {"drop": ["ALL"]}, what
            assert context["runAsNonRoot"] is True and context["runAsUser"] == APP_UID, what
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}, what
            token = [m for m in container.get("volumeMounts", []) if m["name"] == "api-token"]
            if token:
                assert container["name"] in ("rack-from-node", "operator"), what
                assert token[0]["readOnly"] is True, what


def test_every_strand_container_runs_strand_service(rendered: dict[Path, list[Manifest]]) -> None:
    names = set()
    for workload in of_kind(rendered[DEFAULT], "Deployment", "StatefulSet"):
        for container in containers(workload):
            if container["name"] == "etcd":
                continue
            assert container["command"][0] == "strand-service", container["name"]
            names.add(container["command"][1])
    assert names == {*STRAND_COMPONENTS, "rack-from-node", "operator"}


def test_the_operator_runs_alone_with_recreate(rendered: dict[Path, list[Manifest]]) -> None:
    operator = named(rendered[DEFAULT], "Deployment", "strand-operator")
    assert operator["spec"]["replicas"] == 1
    assert operator["spec"]["strategy"] == {"type": "Recreate"}


# ------------------------------------------------------------------------------- RBAC

# Exactly what the contract grants: (apiGroup, resource) -> verbs.
OPERATOR_ROLE = {("strand.io", "topics"): {"get", "list", "watch", "patch"},
                 ("strand.io", "topics/status"): {"get", "patch"},
                 ("strand.io", "strandusers"): {"get", "list", "watch", "patch"},
                 ("strand.io", "strandusers/status"): {"get", "patch"},
                 # the StrandUsers' password Secrets (user_reconciler.py)
                 ("", "secrets"): {"get", "create", "patch", "delete"},
                 ("", "events"): {"create"}}
OPERATOR_CLUSTER_ROLE = {("apiextensions.k8s.io", "customresourcedefinitions"):
                         {"get", "list", "watch"},
                         ("", "namespaces"): {"list", "watch"}}
STORAGE_CLUSTER_ROLE = {("", "nodes"): {"get"}}


def grants(role: Manifest) -> dict[tuple[str, str], set[str]]:
    result: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert "*" not in rule["verbs"], role["metadata"]["name"]
        assert "resourceNames" not in rule or rule["resourceNames"], role["metadata"]["name"]
        for group in rule["apiGroups"]:
            assert group != "*", role["metadata"]["name"]
            for resource in rule["resources"]:
                assert "*" not in resource, role["metadata"]["name"]
                result.setdefault((group, resource), set()).update(rule["verbs"])
    return result


@pytest.mark.parametrize("values", VALUE_SETS, ids=lambda p: p.stem)
def test_rbac_grants_exactly_the_contract(rendered: dict[Path, list[Manifest]],
                                          values: Path) -> None:
    manifests = rendered[values]
    cluster_roles = {r["metadata"]["labels"]["app.kubernetes.io/component"]: grants(r)
                     for r in of_kind(manifests, "ClusterRole")}
    expected_cluster = {"operator": OPERATOR_CLUSTER_ROLE}
    if values != EXTERNAL_ETCD:  # rack awareness on
        expected_cluster["storage"] = STORAGE_CLUSTER_ROLE
    assert cluster_roles == expected_cluster
    roles = of_kind(manifests, "Role")
    namespaces = ["strand", "team-a"] if values == RACK_AWARE else ["strand"]
    assert sorted(r["metadata"]["namespace"] for r in roles) == namespaces
    for role in roles:
        assert grants(role) == OPERATOR_ROLE
    # Each binding gives its role to one account of this release, nothing else.
    accounts = {"operator": "strand-operator", "storage": "strand-storage"}
    for binding in of_kind(manifests, "RoleBinding", "ClusterRoleBinding"):
        component = binding["metadata"]["labels"]["app.kubernetes.io/component"]
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": accounts[component],
                                        "namespace": "strand"}]
        role_kind = "Role" if binding["kind"] == "RoleBinding" else "ClusterRole"
        assert binding["roleRef"]["kind"] == role_kind
        named(manifests, role_kind, binding["roleRef"]["name"])
    # The accounts with rights belong to the pods that use them.
    users = {pod_spec(w)["serviceAccountName"] for w in of_kind(manifests, *WORKLOAD_KINDS)
             if any(m["name"] == "api-token" for c in containers(w)
                    for m in c.get("volumeMounts", []))}
    assert users == {accounts[b["metadata"]["labels"]["app.kubernetes.io/component"]]
                     for b in of_kind(manifests, "RoleBinding", "ClusterRoleBinding")}


def test_service_monitor_and_network_policies_are_off_by_default(
        rendered: dict[Path, list[Manifest]]) -> None:
    kinds = {m["kind"] for m in rendered[DEFAULT]}
    assert "ServiceMonitor" not in kinds and "NetworkPolicy" not in kinds
    on = rendered[RACK_AWARE]
    (monitor,) = of_kind(on, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    metrics = named(on, "Service", "strand-metrics")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= \
        metrics["metadata"]["labels"].items()
    assert [p["name"] for p in metrics["spec"]["ports"]] == ["metrics"]
    policies = {p["metadata"]["name"] for p in of_kind(on, "NetworkPolicy")}
    assert policies == {f"strand-{c}" for c in
                        (*STRAND_COMPONENTS, "etcd", "operator", "helm-test")}


def test_helm_test_hook_produces_and_consumes_through_the_gateway(
        rendered: dict[Path, list[Manifest]]) -> None:
    (pod,) = of_kind(rendered[DEFAULT], "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    container = pod["spec"]["containers"][0]
    script = container["args"][0]
    assert "strand produce" in script and "strand consume" in script
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["STRAND_BOOTSTRAP"] == "strand-gateway.strand.svc.cluster.local:9090"
    named(rendered[DEFAULT], "Service", "strand-gateway")
