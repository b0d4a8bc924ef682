"""The chart's test tools: where helm, checkov and the chart are, and the chart
rendered into Kubernetes objects."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "helm" / "strand"
CI_VALUES = CHART / "ci"
HELM = REPO / ".tools" / "helm"
CHECKOV = REPO / ".tools" / "checkov" / "bin" / "checkov"
RELEASE = "strand"
NAMESPACE = "strand"

# The value sets every rendering test covers (helm/strand/ci/).
DEFAULT = CI_VALUES / "default-values.yaml"
RACK_AWARE = CI_VALUES / "rack-aware-3-zones-values.yaml"
EXTERNAL_ETCD = CI_VALUES / "external-etcd-values.yaml"
VALUE_SETS = (DEFAULT, RACK_AWARE, EXTERNAL_ETCD)
# The security value sets (tests/k8s/chart/test_chart_security_*.py; checkov too).
SECURE = CI_VALUES / "secure-values.yaml"
EXISTING_SECRETS = CI_VALUES / "existing-secrets-values.yaml"
SECURITY_SETS = (SECURE, EXISTING_SECRETS)
# Kafka clients outside the cluster (tests/k8s/chart/test_chart_kafka.py; checkov too).
KAFKA_EXTERNAL = CI_VALUES / "kafka-external-values.yaml"

Manifest = dict[str, Any]


class ToolMissing(AssertionError):
    """helm or checkov is not installed where the tests look (a failure, not a skip)."""


def tool(path: Path) -> str:
    if not path.exists():
        raise ToolMissing(f"{path.relative_to(REPO)} is missing: run `make k8s-tools`")
    return str(path)


def helm(*args: str) -> str:
    """Run helm; its stdout, or an AssertionError quoting its stderr."""
    result = subprocess.run([tool(HELM), *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stderr}{result.stdout}")
    return result.stdout


def render_text(values: Sequence[Path] = (), settings: Sequence[str] = (),
                *, crds: bool = False, tests: bool = True) -> str:
    """``helm template`` of the chart: release and namespace "strand"."""
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    for path in values:
        args += ["--values", str(path)]
    for setting in settings:
        args += ["--set", setting]
    if crds:
        args.append("--include-crds")
    if not tests:
        args.append("--skip-tests")
    return helm(*args)


def load_all(text: str) -> list[Manifest]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def render(values: Sequence[Path] = (), settings: Sequence[str] = (),
           *, crds: bool = False, tests: bool = True) -> list[Manifest]:
    return load_all(render_text(values, settings, crds=crds, tests=tests))


def of_kind(manifests: Sequence[Manifest], *kinds: str) -> list[Manifest]:
    return [m for m in manifests if m["kind"] in kinds]


def named(manifests: Sequence[Manifest], kind: str, name: str) -> Manifest:
    for m in manifests:
        if m["kind"] == kind and m["metadata"]["name"] == name:
            return m
    raise AssertionError(f"no {kind} {name} among the rendered objects: "
                         f"{sorted((m['kind'], m['metadata']['name']) for m in manifests)}")


def pod_spec(workload: Manifest) -> dict[str, Any]:
    """The pod spec of a Pod, Deployment, StatefulSet or Job."""
    if workload["kind"] == "Pod":
        spec: dict[str, Any] = workload["spec"]
        return spec
    template: dict[str, Any] = workload["spec"]["template"]["spec"]
    return template


def containers(workload: Manifest) -> Iterator[dict[str, Any]]:
    """Every container of a workload, init containers first."""
    spec = pod_spec(workload)
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Pod", "Job")
