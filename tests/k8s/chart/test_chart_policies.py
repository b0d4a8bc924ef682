"""checkov's Kubernetes policies on the rendered chart: no failed check outside the
skip list, every skipped check (listed here or suppressed in a template) justified
in the chart README's "Policy checks" section; and every value documented there."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.k8s.chart.tools import (
    CHART,
    CHECKOV,
    DEFAULT,
    KAFKA_EXTERNAL,
    RACK_AWARE,
    SECURITY_SETS,
    render_text,
    tool,
)

# Failed checks the chart accepts; each one's reason is in README.md, "Policy checks".
SKIPPED = {
    "CKV_K8S_11",  # CPU limits: throttling hurts latency; requests reserve the CPU
    "CKV_K8S_15",  # pull policy Always: release tags are immutable
    "CKV_K8S_43",  # digests: image.tag takes one; the default follows appVersion
    "CKV2_K8S_6",  # NetworkPolicy: off by default (networkPolicy.enabled)
}
README = CHART / "README.md"


def policy_section() -> str:
    text = README.read_text()
    match = re.search(r"^## Policy checks$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"{README} has no '## Policy checks' section"
    return match.group(1)


def checkov(manifests: str, directory: Path) -> dict[str, Any]:
    (directory / "strand.yaml").write_text(manifests)
    result = subprocess.run(
        [tool(CHECKOV), "--directory", str(directory), "--framework", "kubernetes",
         "--output", "json", "--compact", "--skip-download"],
        capture_output=True, text=True, check=False)
    # Exit status 1 means failed checks (inspected below); anything else is an error.
    assert result.returncode in (0, 1), f"checkov failed to run:\n{result.stderr}"
    report = json.loads(result.stdout)
    reports = report if isinstance(report, list) else [report]
    (kubernetes,) = [r for r in reports if r["check_type"] == "kubernetes"]
    results: dict[str, Any] = kubernetes["results"]
    return results


@pytest.mark.parametrize("values", (DEFAULT, RACK_AWARE, *SECURITY_SETS, KAFKA_EXTERNAL),
                         ids=lambda p: p.stem)
def test_checkov_finds_nothing_unjustified(values: Path, tmp_path: Path) -> None:
    results = checkov(render_text([values]), tmp_path)
    unjustified = sorted({f"{c['check_id']} {c['check_name']} ({c['resource']})"
                          for c in results["failed_checks"] if c["check_id"] not in SKIPPED})
    assert not unjustified, "checkov failed checks the chart does not justify:\n" + \
        "\n".join(unjustified)
    assert len(results["passed_checks"]) > 100  # checkov did look at the objects
    section = policy_section()
    suppressed = {c["check_id"] for c in results.get("skipped_checks", [])}
    for check in SKIPPED | suppressed:
        line = next((ln for ln in section.splitlines() if check in ln), "")
        assert len(line.split(check, 1)[1].strip(" |:-")) > 20, \
            f"{README}: the Policy checks section gives no reason for skipping {check}"


def test_checkov_does_fail_a_privileged_pod(tmp_path: Path) -> None:
    """The policy test above can fail: a privileged container is reported."""
    docs = list(yaml.safe_load_all(render_text([DEFAULT])))
    gateway = next(d for d in docs if d and d["kind"] == "Deployment"
                   and d["metadata"]["name"] == "strand-gateway")
    gateway["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = True
    results = checkov(yaml.safe_dump(gateway), tmp_path)
    assert "CKV_K8S_16" in {c["check_id"] for c in results["failed_checks"]}


def value_keys(values: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths of every key; `resources` (a ResourceRequirements) is one value."""
    keys = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        keys.append(path)
        if isinstance(value, dict) and value and key != "resources":
            keys += value_keys(value, path + ".")
    return keys


def test_readme_documents_every_value() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = README.read_text()
    # A key with children is documented through them (`etcd.image` by `etcd.image.tag`).
    missing = [k for k in value_keys(values) if not re.search(f"`{re.escape(k)}[`.]", readme)]
    assert not missing, f"{README} does not document these values: {missing}"


def test_schema_types_every_value() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def untyped(node: dict[str, Any], vals: dict[str, Any], prefix: str) -> list[str]:
        found = []
        for key, value in vals.items():
            sub = node.get("properties", {}).get(key)
            if sub is None or not ("type" in sub or "anyOf" in sub):
                found.append(prefix + key)
            elif isinstance(value, dict) and sub.get("properties"):
                found += untyped(sub, value, f"{prefix}{key}.")
        return found

    assert schema.get("additionalProperties") is False
    assert untyped(schema, values, "") == []
