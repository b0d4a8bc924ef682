"""The Spark objects the chart renders and the plain manifests hold pass our
structural check of the operator's v1beta2 API (issue 14, acceptance 5), and the
check does fail what the operator's API would refuse: an unknown field at any depth,
a missing required field, a wrong type, a value outside an enum."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from tests.k8s.chart.tools import Manifest
from tests.k8s.spark.operator_api import OperatorApiError, check, problems
from tests.k8s.spark.render_check import RENDERED_FILES
from tests.k8s.spark.tools import SPARK_KINDS, render_spark


def spark_objects(manifests: list[Manifest]) -> list[Manifest]:
    return [m for m in manifests if m["kind"] in SPARK_KINDS]


@pytest.fixture(scope="module")
def rendered() -> list[Manifest]:
    objects = spark_objects(render_spark())
    assert sorted(m["kind"] for m in objects) == sorted(SPARK_KINDS)
    return objects


def test_the_rendered_objects_match_the_operators_api(rendered: list[Manifest]) -> None:
    for manifest in rendered:
        check(manifest)


def test_the_plain_manifests_match_the_operators_api() -> None:
    kinds = []
    for path in RENDERED_FILES:
        for manifest in yaml.safe_load_all(path.read_text()):
            if manifest and manifest["kind"] in SPARK_KINDS:
                check(manifest)
                kinds.append(manifest["kind"])
    assert sorted(kinds) == sorted(SPARK_KINDS)


def spec_of(manifest: Manifest) -> dict[str, Any]:
    spec: dict[str, Any] = manifest["spec"]
    return spec if manifest["kind"] == "SparkApplication" else spec["template"]


Mutation = Callable[[Manifest], None]
MUTATIONS: dict[str, tuple[Mutation, str]] = {
    "unknown-spec-field": (lambda m: spec_of(m).update(pythonVersions="3"),
                           "'pythonVersions' was unexpected"),
    "unknown-driver-field": (lambda m: spec_of(m)["driver"].update(memoryLimit="1g"),
                             "'memoryLimit' was unexpected"),
    "unknown-field-in-a-kubernetes-type": (
        lambda m: spec_of(m)["driver"]["securityContext"].update(readOnlyRoot=True),
        "'readOnlyRoot' was unexpected"),
    "missing-main-file": (lambda m: spec_of(m).pop("mainApplicationFile"),
                          "'mainApplicationFile' is a required property"),
    "missing-executor": (lambda m: spec_of(m).pop("executor"),
                         "'executor' is a required property"),
    "type-enum": (lambda m: spec_of(m).update(type="python"), "'python' is not one of"),
    "mode-enum": (lambda m: spec_of(m).update(mode="local"), "'local' is not one of"),
    "restart-policy-enum": (lambda m: spec_of(m)["restartPolicy"].update(type="Sometimes"),
                            "'Sometimes' is not one of"),
    "arguments-of-strings": (lambda m: spec_of(m)["arguments"].append(5),
                             "5 is not of type 'string'"),
    "cores-integer": (lambda m: spec_of(m)["executor"].update(cores="2"),
                      "'2' is not of type 'integer'"),
    "instances-at-least-one": (lambda m: spec_of(m)["executor"].update(instances=0),
                               "0 is less than the minimum of 1"),
    "spark-conf-of-strings": (lambda m: spec_of(m).update(sparkConf={"spark.x": 1}),
                              "1 is not of type 'string'"),
    "a-status": (lambda m: m.update(status={}), "'status' was unexpected"),
}


@pytest.mark.parametrize("mutation", list(MUTATIONS))
@pytest.mark.parametrize("kind", SPARK_KINDS)
def test_the_check_refuses_what_the_api_refuses(rendered: list[Manifest], kind: str,
                                                mutation: str) -> None:
    (original,) = [m for m in rendered if m["kind"] == kind]
    broken = copy.deepcopy(original)
    change, message = MUTATIONS[mutation]
    change(broken)
    assert any(message in p.message for p in problems(broken)), problems(broken)
    with pytest.raises(OperatorApiError, match=kind):
        check(broken)


def test_a_scheduled_application_needs_a_schedule_and_a_known_concurrency_policy(
        rendered: list[Manifest]) -> None:
    (scheduled,) = [m for m in rendered if m["kind"] == "ScheduledSparkApplication"]
    broken = copy.deepcopy(scheduled)
    del broken["spec"]["schedule"]
    broken["spec"]["concurrencyPolicy"] = "Queue"
    messages = [p.message for p in problems(broken)]
    assert "'schedule' is a required property" in messages
    assert any("'Queue' is not one of" in m for m in messages)


def test_other_kinds_are_not_taken_for_spark_objects() -> None:
    found = problems({"apiVersion": "sparkoperator.k8s.io/v1beta1", "kind": "SparkApplication"})
    assert found and "not a sparkoperator.k8s.io/v1beta2" in found[0].message
