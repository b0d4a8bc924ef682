"""k8s/install/strand.yaml is the chart rendered with its defaults (re-rendered and
compared here), and the Topic examples conform to the CRD's schema."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import jsonschema
import kubernetes_validate
from kubernetes_validate.utils import latest_version

from tests.k8s.chart.tools import HELM, REPO, load_all, tool

INSTALL = REPO / "k8s" / "install" / "strand.yaml"
RENDER = REPO / "k8s" / "tools" / "render_install.py"
CRD = REPO / "k8s" / "crds" / "topics.strand.io.yaml"
REGENERATE = ".venv/bin/python k8s/tools/render_install.py"


def test_the_plain_install_is_the_chart_rendered_with_its_defaults() -> None:
    tool(HELM)
    result = subprocess.run([sys.executable, str(RENDER), "--stdout"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert INSTALL.exists(), f"{INSTALL.relative_to(REPO)} is missing: run `{REGENERATE}`"
    assert INSTALL.read_text() == result.stdout, (
        f"{INSTALL.relative_to(REPO)} is out of date with helm/strand: run `{REGENERATE}`")


def test_the_plain_install_has_the_crd_and_no_helm_test_and_validates() -> None:
    manifests = load_all(INSTALL.read_text())
    for manifest in manifests:
        kubernetes_validate.validate(manifest, latest_version(), strict=True)
    kinds = [m["kind"] for m in manifests]
    assert kinds.count("CustomResourceDefinition") == 2  # Topic, StrandUser
    assert "Pod" not in kinds
    assert all(m["metadata"].get("namespace", "strand") == "strand" for m in manifests)


def topic_schema() -> dict[str, Any]:
    (crd,) = load_all(CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def test_the_topic_examples_conform_to_the_crd_schema() -> None:
    """The schema's types, ranges and required fields (jsonschema; the CRD's CEL
    rules need an API server and are the operator's tests' business)."""
    schema = topic_schema()
    topics = [(path, m) for path in sorted((REPO / "k8s" / "examples").glob("*.yaml"))
              for m in load_all(path.read_text()) if m["kind"] == "Topic"]
    assert topics, "no Topic example in k8s/examples"
    for path, topic in topics:
        jsonschema.validate(topic, schema)
        assert topic["apiVersion"] == "strand.io/v1", path
    wrong = {**topics[0][1], "spec": {**topics[0][1]["spec"], "partitions": 0}}
    try:
        jsonschema.validate(wrong, schema)
    except jsonschema.ValidationError:
        pass
    else:
        raise AssertionError(f"{CRD.name} accepts a Topic of 0 partitions")
