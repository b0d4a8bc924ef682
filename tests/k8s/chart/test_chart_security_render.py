"""The chart's security values rendered (helm/strand/README.md, "TLS, authentication
and ACLs"): with the value sets of ci/ (cert-manager; existing Secrets) every object
validates, every Strand service gets its certificate mounted read-only and the TLS
flags naming it, probes it can answer (the plaintext health port), names its
certificate covers and identities the others check; etcd serves TLS; secrets reach
pods as files only; the schema and the chart refuse settings that cannot work.
Running them: test_chart_security_processes.py."""

from __future__ import annotations

import base64
import fnmatch
from pathlib import Path
from typing import Any

import pytest

from tests.k8s.chart import test_chart_render as chart_render
from tests.k8s.chart.test_chart_render import CRD_KINDS, STRAND_COMPONENTS, validate
from tests.k8s.chart.tools import (
    CHART,
    DEFAULT,
    EXISTING_SECRETS,
    SECURE,
    SECURITY_SETS,
    WORKLOAD_KINDS,
    Manifest,
    containers,
    helm,
    named,
    of_kind,
    pod_spec,
    render,
)

CERT_MANAGER_KINDS = {("cert-manager.io/v1", "Certificate"), ("cert-manager.io/v1", "Issuer")}
HEALTH_PORT = 9091
TLS_DIR = "/etc/strand/tls"
INTERNAL = ("storage", "controller", "groups", "transactions")
NAMESPACE_DOMAIN = "strand.svc.cluster.local"


@pytest.fixture(scope="module")
def rendered() -> dict[Path, list[Manifest]]:
    return {values: render([values]) for values in SECURITY_SETS}


def workload(manifests: list[Manifest], component: str) -> Manifest:
    (found,) = [m for m in of_kind(manifests, *WORKLOAD_KINDS)
                if m["metadata"]["labels"].get("app.kubernetes.io/component") == component]
    return found


def main_container(manifests: list[Manifest], component: str) -> dict[str, Any]:
    container: dict[str, Any] = pod_spec(workload(manifests, component))["containers"][0]
    return container


def flags(container: dict[str, Any]) -> dict[str, str]:
    """--name=value flags (a bare --name: "")."""
    pairs = (a.removeprefix("--").partition("=") for a in container.get("args", [])
             if a.startswith("--"))
    return {name: value for name, _, value in pairs}


def secret_volume(manifests: list[Manifest], component: str, volume: str) -> dict[str, Any]:
    for candidate in pod_spec(workload(manifests, component)).get("volumes", []):
        if candidate["name"] == volume:
            source: dict[str, Any] = candidate["secret"]
            return source
    raise AssertionError(f"{component} has no volume {volume}")


def certificates(manifests: list[Manifest]) -> dict[str, dict[str, Any]]:
    """Secret name -> Certificate spec."""
    return {c["spec"]["secretName"]: c["spec"] for c in of_kind(manifests, "Certificate")}


def covered(host: str, dns_names: list[str]) -> bool:
    """Whether a certificate with these DNS names is valid for ``host`` (a wildcard
    stands for exactly one label)."""
    for name in dns_names:
        if name.startswith("*."):
            first, _, rest = host.partition(".")
            if first and rest == name[2:]:
                return True
        elif name == host:
            return True
    return False


# ------------------------------------------------------------------ lint, validation

@pytest.mark.parametrize("values", SECURITY_SETS, ids=lambda p: p.stem)
def test_helm_lint_passes(values: Path) -> None:
    out = helm("lint", "--strict", str(CHART), "--values", str(values))
    assert "0 chart(s) failed" in out, out


@pytest.mark.parametrize("values", SECURITY_SETS, ids=lambda p: p.stem)
def test_rendered_objects_validate_strictly(rendered: dict[Path, list[Manifest]],
                                            values: Path) -> None:
    for manifest in rendered[values]:
        kind = (manifest["apiVersion"], manifest["kind"])
        if kind in CRD_KINDS or kind in CERT_MANAGER_KINDS:
            continue  # no schema in kubernetes-validate; asserted below
        validate(manifest)


@pytest.mark.parametrize("values", SECURITY_SETS, ids=lambda p: p.stem)
def test_the_workloads_keep_what_every_install_has(rendered: dict[Path, list[Manifest]],
                                                    values: Path) -> None:
    """test_chart_render.py's checks of every install, on the secured workloads (the
    StatefulSets TLS makes of the controllers and coordinators included): restrictive
    security contexts, PDBs, spread over hosts and zones, RBAC no wider than the
    contract (rack awareness on, one namespace watched, as in these sets)."""
    chart_render.test_every_pod_is_locked_down(rendered, values)
    chart_render.test_every_component_has_a_pdb_allowing_one_down(rendered, values)
    chart_render.test_replicated_components_spread_over_hosts_and_zones(rendered, values)
    chart_render.test_rbac_grants_exactly_the_contract(rendered, values)


def test_a_default_install_has_no_security_object() -> None:
    manifests = render([DEFAULT])
    assert not of_kind(manifests, "Certificate", "Issuer", "Secret")
    for workload_ in of_kind(manifests, *WORKLOAD_KINDS):
        for container in containers(workload_):
            assert not any(a.startswith(("--tls", "--etcd-tls", "--user", "--bootstrap-user"))
                           for a in container.get("args", []))


# ------------------------------------------------------------------- certificates

@pytest.mark.parametrize("values", SECURITY_SETS, ids=lambda p: p.stem)
def test_every_service_mounts_its_certificate_and_names_it(
        rendered: dict[Path, list[Manifest]], values: Path) -> None:
    manifests = rendered[values]
    gateway_mtls = values == EXISTING_SECRETS
    for component in STRAND_COMPONENTS:
        container = main_container(manifests, component)
        given = flags(container)
        assert given["tls-cert"] == f"{TLS_DIR}/tls.crt", component
        assert given["tls-key"] == f"{TLS_DIR}/tls.key", component
        assert given["tls-ca"] == f"{TLS_DIR}/ca.crt", component
        # The etcd client presents the same certificate (mutual TLS on etcd).
        assert given["etcd-tls-ca"] == f"{TLS_DIR}/ca.crt", component
        assert given["etcd-tls-cert"] == f"{TLS_DIR}/tls.crt", component
        mount = {m["name"]: m for m in container["volumeMounts"]}["tls"]
        assert mount == {"name": "tls", "mountPath": TLS_DIR, "readOnly": True}, component
        secret = secret_volume(manifests, component, "tls")
        expected = (f"pki-strand-{component}" if values == EXISTING_SECRETS
                    else f"strand-{component}-tls")
        assert secret["secretName"] == expected, component
        assert "items" not in secret  # tls.crt, tls.key and ca.crt
        required = component != "gateway" or gateway_mtls
        assert (given.get("tls-client-auth") == "required") is required, component
        if required:
            assert given["tls-service-names"].split(",") == [
                f"strand-{c}" for c in ("storage", "controller", "gateway", "groups",
                                        "transactions")], component


def test_the_certificates_cover_the_advertised_names_and_are_the_service_identities(
        rendered: dict[Path, list[Manifest]]) -> None:
    manifests = rendered[SECURE]
    issued = certificates(manifests)
    identities = flags(main_container(manifests, "storage"))["tls-service-names"].split(",")
    for component in STRAND_COMPONENTS:
        spec = issued[f"strand-{component}-tls"]
        assert spec["commonName"] in identities, component
        assert {"server auth", "client auth"} <= set(spec["usages"]), component
        assert spec["issuerRef"] == {"name": "strand-ca", "kind": "Issuer",
                                     "group": "cert-manager.io"}
    for component in INTERNAL:
        statefulset = workload(manifests, component)
        assert statefulset["kind"] == "StatefulSet", component
        advertise = flags(main_container(manifests, component))["advertise"]
        host = advertise.rsplit(":", 1)[0].replace("$(POD_NAME)", f"strand-{component}-0")
        host = host.replace("$(POD_NAMESPACE)", "strand")
        assert host.endswith(f".{statefulset['spec']['serviceName']}.{NAMESPACE_DOMAIN}")
        named(manifests, "Service", statefulset["spec"]["serviceName"])
        assert covered(host, issued[f"strand-{component}-tls"]["dnsNames"]), component
    gateway = issued["strand-gateway-tls"]["dnsNames"]
    for host in ("strand-gateway", f"strand-gateway.{NAMESPACE_DOMAIN}", "localhost",
                 "strand.example.com"):
        assert covered(host, gateway), host
    bootstrap = flags(main_container(manifests, "groups"))["bootstrap"]
    assert covered(bootstrap.rsplit(":", 1)[0], gateway)
    etcd = issued["strand-etcd-tls"]
    member = f"strand-etcd-0.strand-etcd-headless.{NAMESPACE_DOMAIN}"
    assert covered(member, etcd["dnsNames"])
    assert {"server auth", "client auth"} <= set(etcd["usages"])  # peers are clients


def test_without_an_issuer_the_chart_makes_its_own_ca(
        rendered: dict[Path, list[Manifest]]) -> None:
    manifests = rendered[SECURE]
    assert named(manifests, "Issuer", "strand-selfsigned")["spec"] == {"selfSigned": {}}
    ca = named(manifests, "Certificate", "strand-ca")["spec"]
    assert ca["isCA"] is True and ca["issuerRef"]["name"] == "strand-selfsigned"
    assert named(manifests, "Issuer", "strand-ca")["spec"] == {"ca": {"secretName": "strand-ca"}}
    given = render([SECURE], ["tls.certManager.issuerRef.name=corporate",
                              "tls.certManager.issuerRef.kind=ClusterIssuer"])
    assert not of_kind(given, "Issuer")
    assert {c["spec"]["issuerRef"]["name"] for c in of_kind(given, "Certificate")} == \
        {"corporate"}


def test_the_probes_use_the_plaintext_health_port(rendered: dict[Path, list[Manifest]]) -> None:
    """The kubelet's gRPC probe cannot speak TLS: each service serves its health
    service alone in plaintext on tls.healthPort, and that is what is probed."""
    manifests = rendered[SECURE]
    for component in STRAND_COMPONENTS:
        container = main_container(manifests, component)
        assert flags(container)["tls-health-port"] == str(HEALTH_PORT)
        assert {"name": "health", "containerPort": HEALTH_PORT, "protocol": "TCP"} in \
            container["ports"]
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            assert container[probe]["grpc"] == {"port": HEALTH_PORT}, (component, probe)
    etcd = main_container(manifests, "etcd")
    assert "--listen-metrics-urls=http://0.0.0.0:2381" in etcd["args"]
    assert etcd["readinessProbe"]["httpGet"] == {"path": "/health", "port": "health"}


def test_etcd_serves_clients_and_peers_over_mutual_tls(
        rendered: dict[Path, list[Manifest]]) -> None:
    args = main_container(rendered[SECURE], "etcd")["args"]
    for flag in ("--listen-client-urls=https://", "--advertise-client-urls=https://",
                 "--listen-peer-urls=https://", "--initial-advertise-peer-urls=https://"):
        assert any(a.startswith(flag) for a in args), flag
    assert all(url.split("=", 1)[1].startswith("https://")
               for url in next(a for a in args if a.startswith("--initial-cluster="))
               .removeprefix("--initial-cluster=").split(","))
    assert {"--client-cert-auth", "--peer-client-cert-auth",
            f"--trusted-ca-file={TLS_DIR}/ca.crt", f"--cert-file={TLS_DIR}/tls.crt"} <= set(args)


# ---------------------------------------------------------------- authentication, ACLs

def test_scram_acls_and_the_bootstrap_user(rendered: dict[Path, list[Manifest]]) -> None:
    manifests = rendered[SECURE]
    gateway = flags(main_container(manifests, "gateway"))
    assert gateway["require-authentication"] == ""
    assert gateway["authorizer"] == "acl"
    assert gateway["super-users"].split(";") == ["User:ops", "User:admin"]
    assert "allow-everyone-if-no-acl-found" not in gateway
    controller = flags(main_container(manifests, "controller"))
    assert controller["bootstrap-user"] == "admin"
    assert controller["bootstrap-password-file"] == "/etc/strand/superuser/password"
    for component in ("groups", "transactions"):
        coordinator = flags(main_container(manifests, component))
        assert coordinator["gateway-user"] == "admin", component
        assert coordinator["gateway-password-file"] == "/etc/strand/superuser/password"
    operator = flags(main_container(manifests, "operator"))
    assert operator["user"] == "admin" and operator["tls-ca"] == f"{TLS_DIR}/ca.crt"
    assert "tls-cert" not in operator  # the gateway asks for no client certificate
    # The client pods get the gateway's CA alone, never its key.
    assert secret_volume(manifests, "operator", "tls")["items"] == [
        {"key": "ca.crt", "path": "ca.crt"}]
    secret = named(manifests, "Secret", "strand-superuser")
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert len(base64.b64decode(secret["data"]["password"])) == 32


def test_certificates_alone_with_existing_secrets(rendered: dict[Path, list[Manifest]]) -> None:
    manifests = rendered[EXISTING_SECRETS]
    assert not of_kind(manifests, "Certificate", "Issuer", "Secret")
    gateway = flags(main_container(manifests, "gateway"))
    assert gateway["super-users"].split(";") == ["User:strand-operator", "User:strand-helm-test"]
    for component in ("groups", "transactions"):  # services by their certificates
        assert "gateway-user" not in flags(main_container(manifests, component))
    operator = flags(main_container(manifests, "operator"))
    assert (operator["tls-cert"], operator["tls-key"]) == (f"{TLS_DIR}/tls.crt",
                                                           f"{TLS_DIR}/tls.key")
    assert secret_volume(manifests, "operator", "tls")["secretName"] == "pki-strand-operator"
    (test_pod,) = of_kind(manifests, "Pod")
    env = {e["name"]: e.get("value") for e in test_pod["spec"]["containers"][0]["env"]}
    assert env["STRAND_TLS_CERT"] == f"{TLS_DIR}/tls.crt"
    assert "STRAND_USER" not in env


def test_an_existing_password_secret_is_mounted_not_made() -> None:
    manifests = render([SECURE], ["auth.scram.bootstrapUser.existingSecret=ops-admin",
                                  "auth.scram.bootstrapUser.passwordKey=secret.txt"])
    assert not of_kind(manifests, "Secret")
    volume = secret_volume(manifests, "controller", "superuser")
    assert volume["secretName"] == "ops-admin"
    assert volume["items"] == [{"key": "secret.txt", "path": "password"}]


@pytest.mark.parametrize("values", SECURITY_SETS, ids=lambda p: p.stem)
def test_secrets_reach_pods_as_read_only_files_only(rendered: dict[Path, list[Manifest]],
                                                    values: Path) -> None:
    manifests = rendered[values]
    secret_values = [base64.b64decode(v).decode() for s in of_kind(manifests, "Secret")
                     for v in s.get("data", {}).values()]
    for workload_ in of_kind(manifests, *WORKLOAD_KINDS):
        spec = pod_spec(workload_)
        secret_volumes = {v["name"] for v in spec.get("volumes", []) if "secret" in v}
        for volume in spec.get("volumes", []):
            if "secret" in volume:
                assert volume["secret"]["defaultMode"] == 0o440, volume
        for container in containers(workload_):
            what = f"{workload_['metadata']['name']}/{container['name']}"
            for variable in container.get("env", []):
                assert "secretKeyRef" not in variable.get("valueFrom", {}), what
                assert not any(s in str(variable.get("value", "")) for s in secret_values)
            assert "envFrom" not in container, what
            assert not any(s in arg for s in secret_values for arg in container.get("args", []))
            for mount in container.get("volumeMounts", []):
                if mount["name"] in secret_volumes:
                    assert mount.get("readOnly") is True, (what, mount)
            assert not any(a.startswith(("--password=", "--sasl")) for a in
                           container.get("args", [])), what


def test_external_etcd_over_tls() -> None:
    manifests = render(settings=["etcd.external.endpoints={etcd.platform:2379}",
                                 "etcd.external.tls.secretName=etcd-client",
                                 "etcd.external.tls.clientCertificate=true"])
    for component in STRAND_COMPONENTS:
        container = main_container(manifests, component)
        given = flags(container)
        assert given["etcd-tls-ca"] == "/etc/strand/etcd-tls/ca.crt", component
        assert given["etcd-tls-cert"] == "/etc/strand/etcd-tls/tls.crt", component
        assert "tls-cert" not in given  # Strand's own listeners stay as they were
        assert {"name": "etcd-tls", "mountPath": "/etc/strand/etcd-tls", "readOnly": True} \
            in container["volumeMounts"]
        assert secret_volume(manifests, component, "etcd-tls")["secretName"] == "etcd-client"


# ---------------------------------------------------------- what cannot work is refused

@pytest.mark.parametrize(("setting", "path"), [
    ("tls.certManager.issuerRef.kind=Vault", "tls/certManager/issuerRef/kind"),
    ("authorization.superUsers={admin}", "authorization/superUsers/0"),
    ("tls.healthPort=0", "tls/healthPort"),
    ("tls.mutual=yes", "tls/mutual"),
    ("auth.scram.bootstrapUser.name=a;b", "auth/scram/bootstrapUser/name"),
    ("tls.certManager.duration=90 days", "tls/certManager/duration"),
    ("tls.existingSecret=x", "additional properties|additionalProperties"),
])
def test_the_schema_refuses_mistyped_security_values(setting: str, path: str) -> None:
    with pytest.raises(AssertionError, match=path):
        render(settings=[setting])


@pytest.mark.parametrize(("settings", "message"), [
    (["tls.enabled=true", "tls.certManager.enabled=false"],
     r"tls\.existingSecrets\.\w+ is empty"),
    (["auth.requireAuthentication=true"], "no client could authenticate"),
    (["authorization.enabled=true", "operator.enabled=false"],
     "the coordinators and the operator would be User:ANONYMOUS"),
    (["tls.enabled=true", "tls.healthPort=9090"], "tls.healthPort must not be 9090"),
    (["tls.enabled=true", "spark.mirror.enabled=true", "spark.mirror.topics={a}",
      "spark.mirror.source.bootstrap=elsewhere:9090", "spark.mirror.source.name=src",
      "spark.mirror.target.bootstrap=strand-gateway.strand.svc.cluster.local:9090",
      "spark.mirror.target.name=strand"],
     "spark.mirror.target.bootstrap is this release's gateway"),
])
def test_settings_that_cannot_work_are_refused(settings: list[str], message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        render(settings=settings)


def test_the_notes_say_how_to_connect(rendered: dict[Path, list[Manifest]]) -> None:
    out = helm("install", "strand", str(CHART), "--namespace", "strand", "--dry-run=client",
               "--values", str(SECURE))
    notes = out.split("NOTES:", 1)[1]
    assert "get secret strand-gateway-tls -o jsonpath='{.data.ca\\.crt}'" in notes
    assert "get secret strand-superuser -o jsonpath='{.data.password}'" in notes
    assert "--tls-ca ca.crt --user admin --password-file admin.password" in notes
    assert fnmatch.fnmatch(notes, "*Authentication required; ACLs enforced*")


@pytest.mark.parametrize("settings", [
    ["tls.enabled=true"],
    ["tls.enabled=true", "tls.mutual=false", "metrics.enabled=false"],
    ["tls.enabled=true", "tls.gatewayClientAuth=true", "auth.scram.enabled=true",
     "authorization.enabled=true", "operator.watchNamespaces={strand,team-a}"],
    ["tls.enabled=true", "etcd.external.endpoints={etcd.platform:2379}",
     "etcd.external.tls.secretName=etcd-client", "operator.enabled=false"],
    ["auth.scram.enabled=true", "auth.requireAuthentication=true",
     "authorization.enabled=true", "authorization.allowEveryoneIfNoAclFound=true"],
], ids=["tls-only", "tls-not-mutual", "mtls-and-scram", "tls-external-etcd", "scram-no-tls"])
def test_other_combinations_render_valid_objects(settings: list[str]) -> None:
    manifests = render(settings=settings)
    for manifest in manifests:
        if (manifest["apiVersion"], manifest["kind"]) not in CRD_KINDS | CERT_MANAGER_KINDS:
            validate(manifest)
    given = dict(s.split("=", 1) for s in settings)
    tls = given.get("tls.enabled") == "true"
    for component in STRAND_COMPONENTS:
        args = flags(main_container(manifests, component))
        assert ("tls-cert" in args) is tls, component
        internal_required = tls and given.get("tls.mutual") != "false" \
            and component != "gateway"
        gateway_required = component == "gateway" and "tls.gatewayClientAuth" in given
        assert (args.get("tls-client-auth") == "required") is \
            (internal_required or gateway_required), component
        external = "etcd.external.endpoints" in given
        assert args.get("etcd-tls-ca") == (
            "/etc/strand/etcd-tls/ca.crt" if external else
            f"{TLS_DIR}/ca.crt" if tls else None), component
