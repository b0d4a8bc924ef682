"""The Topic CRD (k8s/crds/topics.strand.io.yaml) and the example Topics.

The CRD validates as an apiextensions.k8s.io/v1 object for the current Kubernetes
minor; its config schema has exactly Strand's topic configs with Strand's types and
ranges (strand/log/config.py); the examples validate against its schema and Strand
accepts their configs; bad Topics are refused by the schema; the CEL rules are there,
well-formed and name only fields the schema has.
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

from strand.log.config import INT_MAX, TOPIC_CONFIG, validate_topic_config

ROOT = Path(__file__).resolve().parents[3]
CRD_PATH = ROOT / "k8s" / "crds" / "topics.strand.io.yaml"
EXAMPLES = sorted((ROOT / "k8s" / "examples").glob("topic-*.yaml"))


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


def _validator() -> jsonschema.protocols.Validator:
    return jsonschema.Draft7Validator(_schema(), format_checker=jsonschema.FormatChecker())


def test_the_crd_is_a_valid_apiextensions_v1_object() -> None:
    kubernetes_validate.validate(_crd(), kubernetes_validate.latest_version(), strict=True)


def test_the_crd_names_scope_version_and_columns() -> None:
    crd = _crd()
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "topics.strand.io"
    assert (spec["group"], spec["scope"]) == ("strand.io", "Namespaced")
    names = spec["names"]
    assert (names["kind"], names["plural"], names["shortNames"]) == ("Topic", "topics", ["st"])
    version = _version()
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Partitions"] == ".spec.partitions"
    assert columns["Replicas"] == ".spec.replicas"
    assert columns["Ready"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns["Age"] == ".metadata.creationTimestamp"


def test_the_config_schema_mirrors_strands_topic_configs() -> None:
    config = _schema()["properties"]["spec"]["properties"]["config"]
    properties = config["properties"]
    assert set(properties) == set(TOPIC_CONFIG)
    kinds = {"int": "integer", "long": "integer", "double": "number", "bool": "boolean",
             "enum": "string", "list": "string"}
    for name, key in TOPIC_CONFIG.items():
        schema = properties[name]
        assert schema["type"] == kinds[key.kind], name
        if key.kind in ("int", "long", "double"):
            assert schema.get("minimum") == key.minimum, name
            wanted_max = key.maximum if key.kind != "long" else None
            assert schema.get("maximum") == wanted_max, name
        if key.kind == "int":
            assert schema["format"] == "int32" and key.maximum == INT_MAX
        if key.kind == "enum":
            assert schema["enum"] == list(key.choices), name
        if key.kind == "list":  # every non-empty combination, as Strand parses them
            assert {tuple(sorted(v.split(","))) for v in schema["enum"]} == {
                ("delete",), ("compact",), ("compact", "delete")}
    assert config["x-kubernetes-preserve-unknown-fields"] is True


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_examples_validate_and_strand_accepts_their_config(path: Path) -> None:
    topic = yaml.safe_load(path.read_text())
    assert (topic["apiVersion"], topic["kind"]) == ("strand.io/v1", "Topic")
    assert topic["metadata"]["labels"]["strand.io/cluster"]
    _validator().validate(topic)
    config = {k: str(v).lower() if isinstance(v, bool) else str(v)
              for k, v in topic["spec"].get("config", {}).items()}
    validate_topic_config(config)


def test_there_are_examples_with_config_and_with_a_topic_name() -> None:
    specs = [yaml.safe_load(p.read_text())["spec"] for p in EXAMPLES]
    assert any("config" in s for s in specs) and any("topicName" in s for s in specs)


GOOD: dict[str, Any] = {"apiVersion": "strand.io/v1", "kind": "Topic",
                        "metadata": {"name": "t"}, "spec": {"partitions": 3, "replicas": 2}}


@pytest.mark.parametrize(("change", "why"), [
    ({"partitions": 0}, "less than the minimum"),
    ({"replicas": 0}, "less than the minimum"),
    ({"partitions": "3"}, "is not of type 'integer'"),
    ({"topicName": "a/b"}, "does not match"),
    ({"topicName": "x" * 250}, "is too long"),
    ({"config": {"retention.ms": "a week"}}, "is not of type 'integer'"),
    ({"config": {"retention.ms": -2}}, "less than the minimum"),
    ({"config": {"min.cleanable.dirty.ratio": 1.5}}, "greater than the maximum"),
    ({"config": {"cleanup.policy": "forever"}}, "is not one of"),
    ({"config": {"segment.bytes": 2**31}}, "greater than the maximum"),
    ({"config": {"unclean.leader.election.enable": "yes"}}, "is not of type 'boolean'"),
])
def test_the_schema_refuses_bad_topics(change: dict[str, Any], why: str) -> None:
    topic = copy.deepcopy(GOOD)
    topic["spec"].update(change)
    with pytest.raises(jsonschema.ValidationError, match=why):
        _validator().validate(topic)
    _validator().validate(GOOD)


def _rules() -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = _schema()["properties"]["spec"]["x-kubernetes-validations"]
    return rules


def test_cel_rules_guard_decrease_rename_and_min_insync() -> None:
    rules = {r["fieldPath"]: r for r in _rules()}
    assert rules[".partitions"]["rule"] == "self.partitions >= oldSelf.partitions"
    assert "oldSelf.topicName" in rules[".topicName"]["rule"]
    assert "min__dot__insync__dot__replicas" in rules[".config"]["rule"]
    for rule in rules.values():
        assert rule["message"].strip() and rule["reason"] in ("FieldValueForbidden",
                                                              "FieldValueInvalid")


def test_cel_rules_are_well_formed_and_name_existing_fields() -> None:
    spec = _schema()["properties"]["spec"]["properties"]
    for rule in _rules():
        text = rule["rule"]
        depth = 0
        for char in re.sub(r"'[^']*'", "''", text):
            depth += {"(": 1, ")": -1}.get(char, 0)
            assert depth >= 0, text
        assert depth == 0 and text.count("'") % 2 == 0, text
        for path in re.findall(r"\b(?:self|oldSelf)((?:\.\w+)+)", text):
            node: dict[str, Any] = {"properties": spec}
            for part in path.strip(".").split("."):
                name = part.replace("__dot__", ".")
                assert name in node.get("properties", {}), f"{text}: no field {name!r}"
                node = node["properties"][name]
