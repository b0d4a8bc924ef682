"""The Spark side's test tools: where things are, the chart rendered with the Spark
jobs on, and the jobs' own argument parsers."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.k8s.chart.tools import REPO, Manifest, render

SPARK_DIR = REPO / "spark-on-k8s"
JOBS_DIR = SPARK_DIR / "jobs"
MANIFESTS_DIR = SPARK_DIR / "manifests"
# The example values: the plain manifests are rendered from them (render.py).
EXAMPLE_VALUES = MANIFESTS_DIR / "values.yaml"
SPARK_KINDS = ("SparkApplication", "ScheduledSparkApplication")


def render_spark(values: Sequence[Path] = (EXAMPLE_VALUES,),
                 settings: Sequence[str] = ()) -> list[Manifest]:
    """The chart rendered (release and namespace "strand") with these values."""
    return render(values, settings, tests=False)


def spark_application(manifests: Sequence[Manifest], job: str) -> dict[str, Any]:
    """The SparkApplication spec of a job: the mirror's, or the audit schedule's
    template."""
    kind = "SparkApplication" if job == "mirror" else "ScheduledSparkApplication"
    (found,) = [m for m in manifests if m["kind"] == kind
                and m["metadata"]["labels"]["app.kubernetes.io/component"] == f"spark-{job}"]
    spec: dict[str, Any] = found["spec"] if job == "mirror" else found["spec"]["template"]
    return spec


class JobParserMissing(AssertionError):
    """A job file does not exist yet or has no build_parser()."""


def job_parser(job: str) -> argparse.ArgumentParser:
    """The job's own parser: ``build_parser() -> argparse.ArgumentParser`` of
    spark-on-k8s/jobs/<job>.py (imported from its file: jobs/ is no package), or of
    the module whose ``parse_arguments`` the job imports."""
    path = JOBS_DIR / f"{job}.py"
    if not path.exists():
        raise JobParserMissing(f"{path.relative_to(REPO)} does not exist yet; the test needs "
                               f"its build_parser() -> argparse.ArgumentParser")
    name = f"strand_spark_job_{job}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None, path
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    build = getattr(module, "build_parser", None)
    parse = getattr(module, "parse_arguments", None)
    if build is None and parse is not None:  # the parser of the job's parse function
        build = getattr(sys.modules[parse.__module__], "build_parser", None)
    if build is None:
        raise JobParserMissing(f"{path.relative_to(REPO)} has no build_parser() -> "
                               f"argparse.ArgumentParser for the tests to parse its "
                               f"command lines with")
    parser = build()
    assert isinstance(parser, argparse.ArgumentParser), \
        f"{path}: build_parser() returned {parser!r}"
    return parser
