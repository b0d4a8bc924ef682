"""Render the plain manifests of this directory from the chart (its Spark templates
with values.yaml, release and namespace "strand"), as k8s/install/strand.yaml is
rendered: after a change to the chart's Spark templates or to values.yaml, run
``.venv/bin/python spark-on-k8s/manifests/render.py`` (a test compares them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
HELM = REPO / ".tools" / "helm"
VALUES = HERE / "values.yaml"
# manifest file -> the chart templates it holds
MANIFESTS = {
    "rbac.yaml": "templates/spark-rbac.yaml",
    "mirror-sparkapplication.yaml": "templates/spark-mirror.yaml",
    "audit-scheduledsparkapplication.yaml": "templates/spark-audit.yaml",
}
HEADER = """\
# Rendered by spark-on-k8s/manifests/render.py from the chart's {template} with
# spark-on-k8s/manifests/values.yaml (release and namespace "strand"); do not edit:
# change the chart or the values and render again. Needs the Kubeflow Spark operator
# (sparkoperator.k8s.io/v1beta2) and the image of spark-on-k8s/Dockerfile.
"""


class RenderError(RuntimeError):
    """helm is missing or failed."""


def render(template: str, helm: Path = HELM) -> str:
    """One manifest file's text: the header, then the template rendered."""
    if not helm.exists():
        raise RenderError(f"{helm} is missing: run `make k8s-tools`")
    result = subprocess.run(
        [str(helm), "template", "strand", str(REPO / "helm" / "strand"), "--namespace",
         "strand", "--values", str(VALUES), "--show-only", template],
        capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RenderError(f"helm template --show-only {template} failed:\n{result.stderr}")
    return HEADER.format(template=template) + result.stdout


def main() -> int:
    try:
        for name, template in MANIFESTS.items():
            (HERE / name).write_text(render(template))
            print(f"wrote {(HERE / name).relative_to(REPO)}")
    except RenderError as exc:
        print(f"render.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
