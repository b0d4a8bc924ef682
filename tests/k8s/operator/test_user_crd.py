"""The StrandUser CRD (k8s/crds/strandusers.strand.io.yaml) and the example users.

The CRD validates as an apiextensions.k8s.io/v1 object; its names, printer columns
and status are the operator's; its operations and their CEL rules per resource type
are Strand's table (VALID_OPERATIONS); the examples validate against its schema and
the operator reads them as intended; bad users are refused by the schema; the CEL
rules are well-formed and name only fields the schema has.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from strand.security.acl import VALID_OPERATIONS, Operation, ResourceType
from strand_operator.user_spec import desired_user

ROOT = Path(__file__).resolve().parents[3]
CRD_PATH = ROOT / "k8s" / "crds" / "strandusers.strand.io.yaml"
EXAMPLES = sorted((ROOT / "k8s" / "examples").glob("user-*.yaml"))
CRD_TYPES = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP,
             "cluster": ResourceType.CLUSTER, "transactionalId": ResourceType.TRANSACTIONAL_ID}


def _crd() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(CRD_PATH.read_text())
    return loaded


def _version() -> dict[str, Any]:
    (version,) = _crd()["spec"]["versions"]
    assert isinstance(version, dict)
    return version


def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = _version()["schema"]["openAPIV3Schema"]
    return schema


def _acl_item() -> dict[str, Any]:
    item: dict[str, Any] = (_schema()["properties"]["spec"]["properties"]["authorization"]
                            ["properties"]["acls"]["items"])
    return item


def _validator() -> jsonschema.protocols.Validator:
    return jsonschema.Draft7Validator(_schema(), format_checker=jsonschema.FormatChecker())


def test_the_crd_is_a_valid_apiextensions_v1_object() -> None:
    kubernetes_validate.validate(_crd(), kubernetes_validate.latest_version(), strict=True)


def test_the_crd_names_scope_version_and_columns() -> None:
    crd = _crd()
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "strandusers.strand.io"
    assert (spec["group"], spec["scope"]) == ("strand.io", "Namespaced")
    names = spec["names"]
    assert (names["kind"], names["plural"], names["shortNames"]) == (
        "StrandUser", "strandusers", ["su"])
    version = _version()
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {"Authentication": ".spec.authentication.type",
                       "Secret": ".status.secret",
                       "Ready": '.status.conditions[?(@.type=="Ready")].status',
                       "Reason": '.status.conditions[?(@.type=="Ready")].reason',
                       "Age": ".metadata.creationTimestamp"}


def _camel(operation: Operation) -> str:
    return "".join(word.capitalize() for word in operation.value.split("_"))


def test_operations_and_their_rules_are_strands_table() -> None:
    item = _acl_item()
    listed = item["properties"]["operations"]["items"]["enum"]
    assert set(listed) == {_camel(op) for ops in VALID_OPERATIONS.values() for op in ops}
    rules = {r["rule"].split("'")[1]: r["rule"] for r in item["x-kubernetes-validations"]}
    assert set(rules) == set(CRD_TYPES)
    for crd_type, resource_type in CRD_TYPES.items():
        named = set(re.findall(r"'(\w+)'", rules[crd_type].split("all(", 1)[1]))
        assert named == {_camel(op) for op in VALID_OPERATIONS[resource_type]}, crd_type


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_examples_validate_and_the_operator_reads_them(path: Path) -> None:
    user = yaml.safe_load(path.read_text())
    assert (user["apiVersion"], user["kind"]) == ("strand.io/v1", "StrandUser")
    assert user["metadata"]["labels"]["strand.io/cluster"]
    _validator().validate(user)
    desired = desired_user(user["metadata"]["name"], user["spec"])
    assert len(desired.acls) >= len(user["spec"]["authorization"]["acls"])


def test_there_are_scram_and_tls_examples() -> None:
    kinds = {yaml.safe_load(p.read_text())["spec"]["authentication"]["type"] for p in EXAMPLES}
    assert kinds == {"scram-sha-512", "tls"}


GOOD: dict[str, Any] = {
    "apiVersion": "strand.io/v1", "kind": "StrandUser", "metadata": {"name": "u"},
    "spec": {"authentication": {"type": "scram-sha-512"},
             "authorization": {"type": "simple", "acls": [
                 {"resource": {"type": "topic", "name": "t"}, "operations": ["Read"]}]}}}


def _with(path: str, value: Any) -> dict[str, Any]:
    user = copy.deepcopy(GOOD)
    node = user
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[keys[-1]] = value
    return user


@pytest.mark.parametrize(("path", "value", "why"), [
    ("spec.authentication.type", "plain", "is not one of"),
    ("spec.authentication", {}, "'type' is a required property"),
    ("spec.authentication.password", {"valueFrom": {"secretKeyRef": {"name": "s"}}},
     "'key' is a required property"),
    ("spec.authorization.type", "opa", "is not one of"),
    ("spec.authorization.acls.0.resource.type", "queue", "is not one of"),
    ("spec.authorization.acls.0.resource.patternType", "match", "is not one of"),
    ("spec.authorization.acls.0.operations", [], "should be non-empty|is too short"),
    ("spec.authorization.acls.0.operations", ["Fly"], "is not one of"),
    ("spec.authorization.acls.0.type", "maybe", "is not one of"),
    ("spec.quotas", {"producerByteRate": 0}, "less than the minimum"),
    ("spec.quotas", {"consumerByteRate": "fast"}, "is not of type 'integer'"),
])
def test_the_schema_refuses_bad_users(path: str, value: Any, why: str) -> None:
    with pytest.raises(jsonschema.ValidationError, match=why):
        _validator().validate(_with(path, value))
    _validator().validate(GOOD)


def _all_rules() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(rule, the schema node it is on) of every CEL rule."""
    found = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for rule in node.get("x-kubernetes-validations", []):
                found.append((rule, node))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(_schema())
    return found


def test_cel_rules_are_well_formed_and_name_existing_fields() -> None:
    rules = _all_rules()
    assert len(rules) == 8
    for rule, node in rules:
        text = rule["rule"]
        depth = 0
        for char in re.sub(r"'[^']*'", "''", text):
            depth += {"(": 1, ")": -1, "[": 1, "]": -1}.get(char, 0)
            assert depth >= 0, text
        assert depth == 0 and text.count("'") % 2 == 0, text
        assert rule["message"].strip() and rule["reason"] in (
            "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired")
        for path in re.findall(r"\bself((?:\.\w+\b(?!\())+)", text):  # fields, not .all()
            current = node
            for part in path.strip(".").split("."):
                assert part in current.get("properties", {}), f"{text}: no field {part!r}"
                current = current["properties"][part]
        assert rule["fieldPath"].strip(".") in node["properties"], rule["fieldPath"]
