"""A StrandUser's spec read and checked (user_spec.py): authentication, ACL rules as
Strand's bindings, quotas as Strand's keys, and every refusal naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from strand.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclPermissionType,
    Operation,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from strand_operator.user_spec import (
    Authentication,
    DesiredUser,
    InvalidUserSpec,
    PasswordRef,
    desired_user,
)

SCRAM = {"type": "scram-sha-512"}


def binding(resource_type: ResourceType, name: str, operation: Operation,
            pattern: PatternType = PatternType.LITERAL,
            permission: AclPermissionType = AclPermissionType.ALLOW,
            principal: str = "User:app", host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, host, operation, permission))


def test_a_scram_user_with_acls_and_quotas() -> None:
    user = desired_user("app", {
        "authentication": SCRAM,
        "authorization": {"type": "simple", "acls": [
            {"resource": {"type": "topic", "name": "orders.", "patternType": "prefix"},
             "operations": ["Write", "Describe"]},
            {"resource": {"type": "group", "name": "app"}, "operations": ["Read"],
             "host": "10.0.0.1"},
            {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"]},
            {"resource": {"type": "transactionalId", "name": "app-tx"},
             "operations": ["Write"], "type": "deny"},
        ]},
        "quotas": {"producerByteRate": 1024, "consumerByteRate": 2048,
                   "requestPercentage": 50}})
    assert user == DesiredUser("app", Authentication.SCRAM_SHA_512, None, frozenset({
        binding(ResourceType.TOPIC, "orders.", Operation.WRITE, PatternType.PREFIXED),
        binding(ResourceType.TOPIC, "orders.", Operation.DESCRIBE, PatternType.PREFIXED),
        binding(ResourceType.GROUP, "app", Operation.READ, host="10.0.0.1"),
        binding(ResourceType.CLUSTER, "strand-cluster", Operation.IDEMPOTENT_WRITE),
        binding(ResourceType.TRANSACTIONAL_ID, "app-tx", Operation.WRITE,
                permission=AclPermissionType.DENY),
    }), {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0,
         "request_percentage": 50.0})
    assert user.principal == "User:app" and user.uses_password


def test_defaults_no_acls_no_quotas_and_duplicates_are_one_binding() -> None:
    assert desired_user("app", {"authentication": SCRAM}) == DesiredUser(
        "app", Authentication.SCRAM_SHA_512)
    rule = {"resource": {"type": "topic", "name": "t"}, "operations": ["Read", "READ"]}
    user = desired_user("app", {"authentication": SCRAM, "authorization": {
        "type": "simple", "acls": [rule, rule]}})
    assert user.acls == {binding(ResourceType.TOPIC, "t", Operation.READ)}


def test_a_password_from_a_secret_and_a_tls_user() -> None:
    ref = {"valueFrom": {"secretKeyRef": {"name": "app-pw", "key": "pw"}}}
    user = desired_user("app", {"authentication": {**SCRAM, "password": ref}})
    assert user.password_ref == PasswordRef("app-pw", "pw")
    tls = desired_user("reporting", {"authentication": {"type": "tls"}})
    assert tls.authentication is Authentication.TLS and not tls.uses_password


@pytest.mark.parametrize(("name", "spec", "reason", "words"), [
    ("app", {}, "InvalidSpec", "spec.authentication is missing"),
    ("app", {"authentication": {"type": "plain"}}, "InvalidSpec",
     "scram-sha-512 or tls, got 'plain'"),
    ("app", {"authentication": {"type": "tls", "password": {"valueFrom": {}}}},
     "InvalidSpec", "password is for scram-sha-512 only"),
    ("app", {"authentication": {**SCRAM, "password": {"valueFrom": {"secretKeyRef": {
        "name": "s"}}}}}, "InvalidSpec", "secretKeyRef.key must be a non-empty string"),
    ("app", {"authentication": {**SCRAM, "password": {"valueFrom": {"secretKeyRef": {
        "name": "app", "key": "password"}}}}}, "InvalidSpec",
     "which the operator writes itself"),
    ("bad\u0007name", {"authentication": SCRAM}, "InvalidSpec", "cannot be a Strand username"),
    ("app", {"authentication": SCRAM, "authorization": {"type": "opa"}}, "InvalidAcl",
     "must be simple"),
    ("app", {"authentication": SCRAM, "authorization": {"type": "simple", "acls": [
        {"resource": {"type": "topic", "name": "t"}, "operations": ["Fly"]}]}},
     "InvalidAcl", "acls[0]: unknown operation 'Fly'"),
    ("app", {"authentication": SCRAM, "authorization": {"type": "simple", "acls": [
        {"resource": {"type": "topic", "name": "t"}, "operations": ["Read"]},
        {"resource": {"type": "group", "name": "g"}, "operations": ["Write"]}]}},
     "InvalidAcl", "acls[1]: operation WRITE does not apply to GROUP"),
    ("app", {"authentication": SCRAM, "authorization": {"type": "simple", "acls": [
        {"resource": {"type": "queue", "name": "q"}, "operations": ["Read"]}]}},
     "InvalidAcl", "acls[0].resource.type must be one of topic, group, cluster"),
    ("app", {"authentication": SCRAM, "authorization": {"type": "simple", "acls": [
        {"resource": {"type": "topic"}, "operations": ["Read"]}]}},
     "InvalidAcl", "acls[0].resource.name must be a non-empty string"),
    ("app", {"authentication": SCRAM, "authorization": {"type": "simple", "acls": [
        {"resource": {"type": "cluster", "name": "prod"}, "operations": ["Alter"]}]}},
     "InvalidAcl", "a CLUSTER ACL names the cluster"),
    ("app", {"authentication": SCRAM, "authorization": {"type": "simple", "acls": [
        {"resource": {"type": "topic", "name": "*", "patternType": "prefix"},
         "operations": ["Read"]}]}}, "InvalidAcl", "PREFIXED '*'"),
    ("app", {"authentication": SCRAM, "authorization": {"type": "simple", "acls": [
        {"resource": {"type": "topic", "name": "t"}, "operations": []}]}},
     "InvalidAcl", "operations must be a non-empty list"),
    ("app", {"authentication": SCRAM, "authorization": {"type": "simple", "acls": [
        {"resource": {"type": "topic", "name": "t"}, "operations": ["Read"],
         "type": "maybe"}]}}, "InvalidAcl", "acls[0].type must be one of allow, deny"),
    ("app", {"authentication": SCRAM, "quotas": {"producerByteRate": 0}}, "InvalidQuota",
     "spec.quotas.producerByteRate must be an integer of at least 1"),
    ("app", {"authentication": SCRAM, "quotas": {"producerByteRate": 1.5}}, "InvalidQuota",
     "must be an integer"),
    ("app", {"authentication": SCRAM, "quotas": {"fetchRate": 1}}, "InvalidQuota",
     "unknown keys ['fetchRate']"),
])
def test_a_bad_spec_is_refused_naming_the_field(name: str, spec: dict[str, Any],
                                                reason: str, words: str) -> None:
    with pytest.raises(InvalidUserSpec) as refused:
        desired_user(name, spec)
    assert refused.value.reason == reason
    assert words in str(refused.value)
