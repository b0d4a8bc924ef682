"""The chart's Spark jobs (spark.mirror, spark.audit): off by default; on, the chart
renders the SparkApplication, the ScheduledSparkApplication, their volumes and the
driver's RBAC, which validate (kubernetes-validate --strict where Kubernetes has the
schema), pass checkov, grant no more than the driver needs, and match what
spark-on-k8s/submit.py gives spark-submit for the same values (image, accounts,
resources, volumes). The plain manifests are the chart rendered with the example
values, up to date."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import submit
import yaml

from tests.k8s.chart.test_chart_policies import SKIPPED, checkov, policy_section
from tests.k8s.chart.test_chart_render import validate
from tests.k8s.chart.tools import CHART, DEFAULT, Manifest, helm, load_all, named, of_kind
from tests.k8s.spark.render_check import RENDERED_FILES, render_module
from tests.k8s.spark.tools import EXAMPLE_VALUES, SPARK_KINDS, render_spark, spark_application

SPARK_UID = 185  # the Spark image's user (spark-on-k8s/Dockerfile)
JOBS = ("mirror", "audit")


@pytest.fixture(scope="module")
def rendered() -> list[Manifest]:
    return render_spark()


def spark_labelled(manifests: list[Manifest]) -> list[Manifest]:
    return [m for m in manifests
            if m["metadata"]["labels"]["app.kubernetes.io/component"].startswith("spark")]


def test_helm_lint_passes_with_the_jobs_on() -> None:
    out = helm("lint", "--strict", str(CHART), "--values", str(EXAMPLE_VALUES))
    assert "0 chart(s) failed" in out, out


def test_the_jobs_are_off_by_default() -> None:
    assert spark_labelled(render_spark(values=[DEFAULT])) == []


def test_the_jobs_render_what_they_need(rendered: list[Manifest]) -> None:
    kinds = sorted((m["kind"], m["metadata"]["name"]) for m in spark_labelled(rendered))
    assert kinds == [
        ("PersistentVolumeClaim", "strand-spark-audit-reports"),
        ("PersistentVolumeClaim", "strand-spark-mirror-checkpoint"),
        ("Role", "strand-spark"),
        ("RoleBinding", "strand-spark"),
        ("ScheduledSparkApplication", "strand-audit"),
        ("ServiceAccount", "strand-spark"),
        ("ServiceAccount", "strand-spark-executor"),
        ("SparkApplication", "strand-mirror"),
    ]


def test_everything_else_validates_strictly(rendered: list[Manifest]) -> None:
    """The Spark objects are the operator's CRDs (test_operator_api.py checks them);
    every other object the chart renders with them on is validated as before."""
    for manifest in rendered:
        if manifest["kind"] not in SPARK_KINDS:
            validate(manifest)


def test_one_job_alone_renders_its_objects_and_the_rbac() -> None:
    manifests = render_spark(settings=["spark.audit.enabled=false"])
    assert [m["kind"] for m in manifests if m["kind"] in SPARK_KINDS] == ["SparkApplication"]
    assert of_kind(spark_labelled(manifests), "Role")
    assert not [m for m in manifests if m["metadata"]["name"] == "strand-spark-audit-reports"]


def test_the_mirror_is_long_running_and_the_audit_scheduled(rendered: list[Manifest]) -> None:
    mirror = named(rendered, "SparkApplication", "strand-mirror")["spec"]
    assert mirror["type"] == "Python" and mirror["mode"] == "cluster"
    assert mirror["restartPolicy"]["type"] == "Always"
    assert mirror["sparkVersion"] == "4.3.0"
    audit = named(rendered, "ScheduledSparkApplication", "strand-audit")["spec"]
    assert audit["schedule"] == "@hourly"
    assert audit["concurrencyPolicy"] == "Forbid"
    # A run that found loss exits 1 and stays failed: it is not rerun.
    assert audit["template"]["restartPolicy"] == {"type": "Never"}


@pytest.mark.parametrize("job", JOBS)
def test_driver_and_executors_are_locked_down(rendered: list[Manifest], job: str) -> None:
    spec = spark_application(rendered, job)
    for role in ("driver", "executor"):
        pod = spec[role]
        assert pod["podSecurityContext"]["runAsNonRoot"] is True
        assert pod["podSecurityContext"]["runAsUser"] == SPARK_UID
        assert pod["podSecurityContext"]["fsGroup"] == SPARK_UID  # the volumes are writable
        context = pod["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["readOnlyRootFilesystem"] is True
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert {"name": "tmp", "mountPath": "/tmp"} in pod["volumeMounts"]  # the writable /tmp


@pytest.mark.parametrize("job", JOBS)
def test_the_jobs_volume_is_mounted_on_the_driver_where_its_path_points(
        rendered: list[Manifest], job: str) -> None:
    spec = spark_application(rendered, job)
    volume = submit.job_volume(job)
    assert volume is not None
    (mount,) = [m for m in spec["driver"]["volumeMounts"] if m["name"] == volume.name]
    path = spec["arguments"][[a.split("=")[0] for a in spec["arguments"]].index(
        "--checkpoint" if job == "mirror" else "--report-dir")].split("=", 1)[1]
    assert Path(path).is_relative_to(mount["mountPath"])
    (claim,) = [v for v in spec["volumes"] if v["name"] == volume.name]
    named(rendered, "PersistentVolumeClaim", claim["persistentVolumeClaim"]["claimName"])
    assert volume.name not in {m["name"] for m in spec["executor"]["volumeMounts"]}


def test_existing_claims_are_mounted_and_none_is_created() -> None:
    manifests = render_spark(settings=[
        "spark.mirror.checkpoint.volume.existingClaim=mirror-state",
        "spark.audit.reportDir.volume.existingClaim=audit-reports"])
    for job, volume, claim in (("mirror", "checkpoint", "mirror-state"),
                               ("audit", "reports", "audit-reports")):
        spec = spark_application(manifests, job)
        assert {"name": volume, "persistentVolumeClaim": {"claimName": claim}} in spec["volumes"]
    assert of_kind(spark_labelled(manifests), "PersistentVolumeClaim") == []


# --------------------------------------------------------- the same as submit.py says

@pytest.mark.parametrize("release", ["strand", "prod"])
@pytest.mark.parametrize("job", JOBS)
def test_submit_gives_spark_submit_what_the_chart_gives_the_operator(
        job: str, release: str, tmp_path: Path) -> None:
    overrides = tmp_path / "overrides.yaml"
    overrides.write_text(yaml.safe_dump({"spark": {
        "image": {"repository": "registry.example/strand-spark", "tag": "1.2.3"},
        job: {"executor": {"instances": 3, "cores": 2, "memory": "3g"},
              "driver": {"cores": 2, "memory": "2g"},
              "sparkConf": {"spark.sql.shuffle.partitions": "12"}}}}))
    values_files = [EXAMPLE_VALUES, overrides]
    manifests = load_all(helm("template", release, str(CHART), "--namespace", "spark-jobs",
                              "--skip-tests", "--values", str(EXAMPLE_VALUES),
                              "--values", str(overrides)))
    spec = spark_application(manifests, job)
    values = submit.load_values(values_files)
    conf = submit.kubernetes_conf(submit.load_definitions()[job], values,
                                  submit.Kubernetes("k8s://https://k:6443", "spark-jobs", release))
    assert conf["spark.kubernetes.container.image"] == spec["image"] == \
        "registry.example/strand-spark:1.2.3"
    assert conf["spark.kubernetes.container.image.pullPolicy"] == spec["imagePullPolicy"]
    assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == \
        spec["driver"]["serviceAccount"]
    assert conf["spark.kubernetes.authenticate.executor.serviceAccountName"] == \
        spec["executor"]["serviceAccount"]
    for role in ("driver", "executor"):
        assert conf[f"spark.{role}.cores"] == str(spec[role]["cores"])
        assert conf[f"spark.{role}.memory"] == spec[role]["memory"]
    assert conf["spark.executor.instances"] == str(spec["executor"]["instances"]) == "3"
    assert conf["spark.sql.shuffle.partitions"] == spec["sparkConf"]["spark.sql.shuffle.partitions"]
    volume = submit.job_volume(job)
    assert volume is not None
    prefix = f"spark.kubernetes.driver.volumes.persistentVolumeClaim.{volume.name}"
    (claim,) = [v for v in spec["volumes"] if v["name"] == volume.name]
    assert conf[f"{prefix}.options.claimName"] == claim["persistentVolumeClaim"]["claimName"]
    (mount,) = [m for m in spec["driver"]["volumeMounts"] if m["name"] == volume.name]
    assert conf[f"{prefix}.mount.path"] == mount["mountPath"]
    accounts = {m["metadata"]["name"] for m in of_kind(manifests, "ServiceAccount")}
    assert {spec["driver"]["serviceAccount"], spec["executor"]["serviceAccount"]} <= accounts


# ------------------------------------------------------------------------- the RBAC

DRIVER_GRANTS = {("", "pods"), ("", "configmaps"), ("", "services"),
                 ("", "persistentvolumeclaims")}


def test_only_the_driver_gets_api_rights_and_only_in_its_namespace(
        rendered: list[Manifest]) -> None:
    spark = spark_labelled(rendered)
    assert of_kind(spark, "ClusterRole", "ClusterRoleBinding") == []
    (role,) = of_kind(spark, "Role")
    grants: set[tuple[str, str]] = set()
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
        grants |= {(group, resource) for group in rule["apiGroups"]
                   for resource in rule["resources"]}
        if "persistentvolumeclaims" in rule["resources"]:
            assert set(rule["verbs"]) == {"get", "list", "watch"}
    assert grants == DRIVER_GRANTS  # no secrets, nothing cluster-wide
    (binding,) = of_kind(spark, "RoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "strand-spark",
                                    "namespace": "strand"}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": role["metadata"]["name"]}
    executor = named(spark, "ServiceAccount", "strand-spark-executor")
    assert executor["automountServiceAccountToken"] is False


def test_checkov_finds_nothing_unjustified_in_the_spark_objects(tmp_path: Path) -> None:
    """As the chart's policy test (same skip list, each justified in the chart
    README): checkov on the chart rendered with the Spark jobs on."""
    manifests = render_spark()
    text = yaml.safe_dump_all(manifests)
    results = checkov(text, tmp_path)
    unjustified = sorted({f"{c['check_id']} {c['check_name']} ({c['resource']})"
                          for c in results["failed_checks"] if c["check_id"] not in SKIPPED})
    assert not unjustified, "\n".join(unjustified)
    spark_resources = {f"{m['kind']}.{m['metadata']['namespace']}.{m['metadata']['name']}"
                       for m in spark_labelled(manifests) if m["kind"] not in SPARK_KINDS}
    checked = {c["resource"] for c in results["passed_checks"]}
    assert spark_resources & checked  # checkov did look at the Spark side's objects
    section = policy_section()
    for skipped in results.get("skipped_checks", []):
        assert skipped["check_id"] in section


def test_the_schema_types_and_the_readme_documents_the_spark_values() -> None:
    """The chart's own tests cover every value; here, that the Spark ones exist."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    spark: dict[str, Any] = schema["properties"]["spark"]
    assert spark["additionalProperties"] is False
    assert set(spark["properties"]) == {"image", "sparkVersion", "mirror", "audit"}
    readme = (CHART / "README.md").read_text()
    assert "## Spark jobs" in readme and "`spark.mirror.enabled`" in readme


# ---------------------------------------------------------------- plain manifests

@pytest.mark.parametrize("path", RENDERED_FILES, ids=lambda p: p.name)
def test_the_plain_manifests_are_the_chart_rendered(path: Path) -> None:
    module = render_module()
    template: str = module.MANIFESTS[path.name]
    assert path.read_text() == module.render(template), (
        f"{path} is out of date: run .venv/bin/python spark-on-k8s/manifests/render.py")


def test_the_plain_manifests_validate() -> None:
    kinds = []
    for path in RENDERED_FILES:
        for manifest in yaml.safe_load_all(path.read_text()):
            if manifest and manifest["kind"] not in SPARK_KINDS:
                validate(manifest)
                kinds.append(manifest["kind"])
    assert sorted(set(kinds)) == ["PersistentVolumeClaim", "Role", "RoleBinding",
                                  "ServiceAccount"]
