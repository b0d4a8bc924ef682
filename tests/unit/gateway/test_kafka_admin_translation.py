"""The pure parts of the Kafka listener's admin and config APIs: what CreateTopics'
-1 counts mean, the refusals Kafka makes from the request alone, Strand's configs as
DescribeConfigs shows them, incremental APPEND/SUBTRACT, and that the responses built
from them encode as every served version's schema."""

from __future__ import annotations

import io
import uuid
from typing import Any

import pytest
from kio.index import load_payload_module, load_request_schema
from kio.schema.errors import ErrorCode as KafkaError
from kio.serial import entity_writer
from kio.static.constants import EntityType

from services.gateway.kafka import acls, admin, configs, leader_epochs, sasl
from services.gateway.kafka.acls import entry_of, kafka_fields
from services.gateway.kafka.admin import Refusal, config_entries, creatable, created_configs
from services.gateway.kafka.config_entries import (
    DEFAULT_NUM_PARTITIONS,
    DEFAULT_REPLICATION_FACTOR,
    AlterOp,
    ConfigSource,
    ConfigType,
    alteration,
    broker_configs,
    selected,
    topic_config,
)
from services.gateway.kafka.messages import build
from services.gateway.kafka.replies import NO_THROTTLE
from strand.errors import ErrorCode, InvalidConfigError, InvalidRequestError
from strand.log.config import TOPIC_CONFIG
from strand.security.acl import CLUSTER_RESOURCE_NAME
from strand.v1 import common_pb2 as pb


def _request_module(api_key: int, version: int) -> Any:
    return load_payload_module(api_key, version, EntityType.request)


def _creatable(version: int = 7, **values: Any) -> Any:
    module = _request_module(admin.CREATE_TOPICS, version)
    fields = {"name": "orders", "num_partitions": -1, "replication_factor": -1,
              "assignments": (), "configs": ()} | values
    return module.CreatableTopic(**fields)


def test_minus_one_counts_are_the_broker_defaults() -> None:
    topic = creatable(_creatable())
    assert isinstance(topic, pb.CreatableTopic)
    assert (topic.num_partitions, topic.replication_factor) == (
        DEFAULT_NUM_PARTITIONS, DEFAULT_REPLICATION_FACTOR)
    explicit = creatable(_creatable(num_partitions=6, replication_factor=3))
    assert isinstance(explicit, pb.CreatableTopic)
    assert (explicit.num_partitions, explicit.replication_factor) == (6, 3)


def test_an_assignment_decides_the_counts_and_excludes_them() -> None:
    module = _request_module(admin.CREATE_TOPICS, 7)
    assignments = (module.CreatableReplicaAssignment(partition_index=0, broker_ids=(2, 1)),
                   module.CreatableReplicaAssignment(partition_index=1, broker_ids=(1, 2)))
    topic = creatable(_creatable(assignments=assignments))
    assert isinstance(topic, pb.CreatableTopic)
    assert [(a.partition, list(a.replicas)) for a in topic.assignments] == [(0, [2, 1]),
                                                                            (1, [1, 2])]
    refused = creatable(_creatable(assignments=assignments, num_partitions=2))
    assert isinstance(refused, Refusal)
    assert refused.code is ErrorCode.INVALID_REQUEST
    assert "both" in refused.message


def test_a_null_config_value_is_an_invalid_config() -> None:
    module = _request_module(admin.CREATE_TOPICS, 7)
    refused = creatable(_creatable(configs=(
        module.CreatableTopicConfig(name="retention.ms", value=None),)))
    assert isinstance(refused, Refusal)
    assert refused.code is ErrorCode.INVALID_CONFIG
    assert "retention.ms" in refused.message


def test_a_created_topic_reports_its_overrides_and_defaults() -> None:
    entries = {e.name: e for e in created_configs({"retention.ms": "1000"})}
    assert set(entries) == set(TOPIC_CONFIG)
    assert entries["retention.ms"].value == "1000"
    assert entries["retention.ms"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert entries["cleanup.policy"].value == "delete"
    assert entries["cleanup.policy"].source is ConfigSource.DEFAULT_CONFIG
    assert entries["unclean.leader.election.enable"].value == "false"


def test_topic_config_synonyms_name_the_broker_default() -> None:
    overridden = topic_config("retention.ms", "1000", is_default=False)
    assert [(s.name, s.value, s.source) for s in overridden.synonyms] == [
        ("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", str(7 * 24 * 3600 * 1000), ConfigSource.DEFAULT_CONFIG)]
    assert overridden.config_type is ConfigType.LONG
    assert not overridden.read_only and not overridden.sensitive
    assert ">= -1" in overridden.documentation
    default = topic_config("cleanup.policy", "delete", is_default=True)
    assert default.config_type is ConfigType.LIST
    assert [s.name for s in default.synonyms] == ["log.cleanup.policy"]


def test_the_broker_resource_is_read_only_defaults() -> None:
    entries = {e.name: e for e in broker_configs()}
    assert entries["num.partitions"].value == str(DEFAULT_NUM_PARTITIONS)
    assert entries["log.retention.ms"].value == str(TOPIC_CONFIG["retention.ms"].default)
    assert all(e.read_only and e.source is ConfigSource.DEFAULT_CONFIG
               for e in entries.values())
    assert len(entries) == len(TOPIC_CONFIG) + 2
    assert [e.name for e in selected(entries.values(), ["message.max.bytes"])] == [
        "message.max.bytes"]
    assert len(selected(entries.values(), None)) == len(entries)


@pytest.mark.parametrize(("op", "value", "current", "expected"), [
    (AlterOp.SET, "1000", "5", (True, "1000")),
    (AlterOp.DELETE, None, "5", (False, "")),
    (AlterOp.APPEND, "compact", "delete", (True, "delete,compact")),
    (AlterOp.APPEND, "delete", "delete", (True, "delete")),
    (AlterOp.SUBTRACT, "delete", "delete,compact", (True, "compact")),
])
def test_incremental_operations(op: AlterOp, value: str | None, current: str,
                                expected: tuple[bool, str]) -> None:
    name = "retention.ms" if op in (AlterOp.SET, AlterOp.DELETE) else "cleanup.policy"
    assert alteration(name, op, value, current) == expected


def test_incremental_operations_refused() -> None:
    with pytest.raises(InvalidConfigError, match="not a list"):
        alteration("retention.ms", AlterOp.APPEND, "5", "1")
    with pytest.raises(InvalidConfigError, match="unknown topic config"):
        alteration("no.such.key", AlterOp.SUBTRACT, "5", None)
    with pytest.raises(InvalidRequestError, match="operation 7 is unknown"):
        alteration("retention.ms", 7, "5", None)
    with pytest.raises(InvalidRequestError, match="needs a value"):
        alteration("retention.ms", AlterOp.SET, None, None)


def _encodes(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


@pytest.mark.parametrize("version", range(1, 5))
def test_describe_configs_responses_encode(version: int) -> None:
    module = load_payload_module(configs.DESCRIBE_CONFIGS, version, EntityType.response)
    entries = tuple(configs._entry(module, e, synonyms=True, documented=True)
                    for e in created_configs({"retention.ms": "1000"}))
    response = build(module, "DescribeConfigsResponse", throttle_time=NO_THROTTLE, results=(
        build(module, "DescribeConfigsResult", error_code=KafkaError.none, error_message=None,
              resource_type=2, resource_name="orders", configs=entries),))
    assert _encodes(response)


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics_responses_encode(version: int) -> None:
    module = load_payload_module(admin.CREATE_TOPICS, version, EntityType.response)
    result = build(module, "CreatableTopicResult", name="orders", error_code=KafkaError.none,
                   error_message=None, topic_id=uuid.uuid4(), num_partitions=3,
                   replication_factor=1, configs=config_entries(module, {}))
    assert (config_entries(module, {}) is None) == (version < 5)
    assert _encodes(build(module, "CreateTopicsResponse", throttle_time=NO_THROTTLE,
                          topics=(result,)))


def test_every_served_version_is_in_kio() -> None:
    for module in (admin, configs, leader_epochs, sasl, acls):
        assert set(module.HANDLERS) == set(module.VERSIONS)
        for key, (low, high) in module.VERSIONS.items():
            for version in range(low, high + 1):
                assert load_request_schema(key, version)


def test_acl_numbers_become_strands_names_and_back() -> None:
    entry = entry_of(4, "kafka-cluster", 3, "User:alice", None, 8, 3)
    assert (entry.resource_type, entry.resource_name, entry.pattern_type, entry.principal,
            entry.host, entry.operation, entry.permission) == (
        "CLUSTER", CLUSTER_RESOURCE_NAME, "LITERAL", "User:alice", "", "DESCRIBE", "ALLOW")
    assert kafka_fields(entry) == {
        "resource_type": 4, "resource_name": "kafka-cluster", "pattern_type": 3,
        "principal": "User:alice", "host": "", "operation": 8, "permission_type": 3}
    any_filter = entry_of(1, None, 1, None, None, 1, 1)
    assert (any_filter.resource_type, any_filter.resource_name, any_filter.operation) == (
        "ANY", "", "ANY")


@pytest.mark.parametrize(("field", "values"), [
    ("resource type", (7, "x", 3, "User:a", "*", 3, 3)),  # USER: not an ACL resource here
    ("pattern type", (2, "x", 0, "User:a", "*", 3, 3)),
    ("operation", (2, "x", 3, "User:a", "*", 13, 3)),  # CREATE_TOKENS
    ("permission", (2, "x", 3, "User:a", "*", 3, 0)),
])
def test_acl_numbers_strand_does_not_know_are_invalid(field: str,
                                                     values: tuple[Any, ...]) -> None:
    with pytest.raises(InvalidRequestError, match=f"ACL {field}"):
        entry_of(*values)
