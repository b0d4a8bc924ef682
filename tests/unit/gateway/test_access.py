"""The gateway's ACL checks per API (services/gateway/access.py), on the real request
messages: every rule reads fields its request has, and each refusal is Kafka's error
for its resource, naming the principal, the operation and the resource."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from services.gateway.access import (
    CALL_RULES,
    CALLER,
    TOPIC_OPERATIONS,
    AccessControl,
    Caller,
)
from strand.errors import (
    ClusterAuthorizationFailedError,
    ErrorCode,
    GroupAuthorizationFailedError,
    SecurityDisabledError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from strand.security.acl import (
    CLUSTER_RESOURCE_NAME,
    AccessControlEntry,
    AclBinding,
    AclPermissionType,
    Operation,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from strand.security.principal import Principal
from strand.security.state import SecurityState
from strand.v1 import (
    common_pb2,
    gateway_pb2,
    groups_pb2,
    security_pb2,
    storage_pb2,
    transactions_pb2,
)

ALICE = Principal("User", "alice")


def request_of(method: str, **fields: Any) -> Any:
    """The Gateway method's request message (found by its proto name)."""
    descriptor = gateway_pb2.DESCRIPTOR.services_by_name["Gateway"].methods_by_name[method]
    name = descriptor.input_type.name
    for module in (common_pb2, groups_pb2, transactions_pb2, security_pb2, storage_pb2):
        if hasattr(module, name):
            return getattr(module, name)(**fields)
    raise LookupError(f"no message class {name}")


@pytest.fixture
def as_alice() -> Iterator[None]:
    token = CALLER.set(Caller(ALICE, "10.0.0.7"))
    yield
    CALLER.reset(token)


def allow(state: SecurityState, resource_type: ResourceType, name: str, operation: Operation,
          pattern: PatternType = PatternType.LITERAL,
          permission: AclPermissionType = AclPermissionType.ALLOW) -> None:
    binding = AclBinding(ResourcePattern(resource_type, name, pattern),
                         AccessControlEntry(str(ALICE), "*", operation, permission))
    state.apply_acl(binding.key(), binding.to_json())


def test_every_rule_reads_fields_its_request_has(as_alice: None) -> None:
    control = AccessControl(SecurityState(), enabled=True,
                            allow_everyone_if_no_acl_found=True)
    for method in CALL_RULES:
        control.check_call(method, request_of(method))  # no AttributeError, no refusal
    for method in TOPIC_OPERATIONS:
        request_of(method)  # every per-topic call is a Gateway method
        assert control.topic_refusal(method, "t") is None


@pytest.mark.parametrize(("method", "fields", "error"), [
    ("JoinGroup", {"group_id": "g"}, GroupAuthorizationFailedError),
    ("OffsetCommit", {"group_id": "g"}, GroupAuthorizationFailedError),
    ("DeleteGroup", {"group_id": "g"}, GroupAuthorizationFailedError),
    ("EndTxn", {"transactional_id": "tx"}, TransactionalIdAuthorizationFailedError),
    ("AddPartitionsToTxn", {"transactional_id": "tx"}, TransactionalIdAuthorizationFailedError),
    ("WriteTxnMarkers", {}, ClusterAuthorizationFailedError),
    ("AlterUserScramCredentials", {}, ClusterAuthorizationFailedError),
    ("DescribeProducers", {"topics": [{"topic": "t"}]}, TopicAuthorizationFailedError),
])
def test_calls_are_refused_by_default_with_kafkas_error(
        as_alice: None, method: str, fields: dict[str, Any], error: type[Exception]) -> None:
    control = AccessControl(SecurityState(), enabled=True)
    with pytest.raises(error) as refused:
        control.check_call(method, request_of(method, **fields))
    assert "User:alice" in str(refused.value) and "10.0.0.7" in str(refused.value)


def test_topics_of_group_calls_are_checked_too(as_alice: None) -> None:
    state = SecurityState()
    control = AccessControl(state, enabled=True)
    allow(state, ResourceType.GROUP, "g", Operation.READ)
    commit = request_of("OffsetCommit", group_id="g",
                        partitions=[{"topic": "orders", "partition": 0, "offset": 5}])
    with pytest.raises(TopicAuthorizationFailedError, match="READ TOPIC 'orders'"):
        control.check_call("OffsetCommit", commit)
    allow(state, ResourceType.TOPIC, "ord", Operation.READ, PatternType.PREFIXED)
    control.check_call("OffsetCommit", commit)
    # READ on the group and the topic implies the DESCRIBE an offset fetch needs
    control.check_call("OffsetFetch", request_of("OffsetFetch", group_id="g", partitions=[
        {"topic": "orders", "partition": 0}]))


def test_a_deny_wins_over_a_prefixed_allow_per_topic(as_alice: None) -> None:
    state = SecurityState()
    control = AccessControl(state, enabled=True)
    allow(state, ResourceType.TOPIC, "orders.", Operation.WRITE, PatternType.PREFIXED)
    allow(state, ResourceType.TOPIC, "orders.secret", Operation.WRITE,
          permission=AclPermissionType.DENY)
    assert control.topic_refusal("Produce", "orders.eu") is None
    refused = control.topic_refusal("Produce", "orders.secret")
    assert refused is not None and refused[0] is ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert control.topic_refusal("Produce", "payments") is not None
    # WRITE implies DESCRIBE (metadata), not READ (fetch)
    assert control.topic_refusal("Metadata", "orders.eu") is None
    assert control.topic_refusal("Fetch", "orders.eu") is not None


def test_create_topic_needs_create_on_the_cluster_or_the_topic(as_alice: None) -> None:
    state = SecurityState()
    control = AccessControl(state, enabled=True)
    assert isinstance(control.may_create_topic("t"), TopicAuthorizationFailedError)
    allow(state, ResourceType.TOPIC, "t", Operation.CREATE)
    assert control.may_create_topic("t") is None
    assert control.may_create_topic("u") is not None
    allow(state, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, Operation.CREATE)
    assert control.may_create_topic("u") is None


def test_idempotent_producer_ids_need_idempotent_write_or_write_on_some_topic(
        as_alice: None) -> None:
    state = SecurityState()
    control = AccessControl(state, enabled=True)
    assert isinstance(control.may_init_producer_id(""), ClusterAuthorizationFailedError)
    allow(state, ResourceType.TOPIC, "orders.", Operation.WRITE, PatternType.PREFIXED)
    assert control.may_init_producer_id("") is None  # KIP-679
    assert isinstance(control.may_init_producer_id("tx"),
                      TransactionalIdAuthorizationFailedError)
    allow(state, ResourceType.TRANSACTIONAL_ID, "tx", Operation.WRITE)
    assert control.may_init_producer_id("tx") is None


def test_a_denied_topic_write_does_not_count_for_idempotence(as_alice: None) -> None:
    state = SecurityState()
    control = AccessControl(state, enabled=True)
    allow(state, ResourceType.TOPIC, "orders", Operation.WRITE)
    allow(state, ResourceType.TOPIC, "orders", Operation.ALL, permission=AclPermissionType.DENY)
    assert control.may_init_producer_id("") is not None


def test_services_and_a_cluster_without_authorizer_may_do_everything(as_alice: None) -> None:
    control = AccessControl(SecurityState(), enabled=False)
    control.check_call("DeleteGroup", request_of("DeleteGroup", group_id="g"))
    assert control.topic_refusal("Produce", "t") is None
    with pytest.raises(SecurityDisabledError):
        control.check_call("CreateAcls", request_of("CreateAcls"))
    enforcing = AccessControl(SecurityState(), enabled=True)
    token = CALLER.set(Caller(Principal("User", "strand-service-groups"), "", service=True))
    try:
        enforcing.check_call("DeleteGroup", request_of("DeleteGroup", group_id="g"))
        assert enforcing.topic_refusal("Produce", "__consumer_offsets") is None
    finally:
        CALLER.reset(token)


def test_super_users_and_listings(as_alice: None) -> None:
    state = SecurityState()
    assert AccessControl(state, True, super_users=("User:alice",)).topic_refusal(
        "Produce", "t") is None
    control = AccessControl(state, enabled=True)
    allow(state, ResourceType.GROUP, "mine", Operation.DESCRIBE)
    assert control.may_describe(ResourceType.GROUP, "mine")
    assert not control.may_describe(ResourceType.GROUP, "theirs")
    assert not control.may_describe(ResourceType.CLUSTER, "")


def test_the_partitions_an_end_opens_need_write_on_their_topics(as_alice: None) -> None:
    """EndTxn's next_topics add partitions to the next transaction: checked as
    AddPartitionsToTxn's are."""
    state = SecurityState()
    control = AccessControl(state, enabled=True)
    allow(state, ResourceType.TRANSACTIONAL_ID, "tx", Operation.WRITE)
    end = request_of("EndTxn", transactional_id="tx",
                     next_topics=[{"topic": "orders", "partitions": [0]}])
    with pytest.raises(TopicAuthorizationFailedError, match="WRITE TOPIC 'orders'"):
        control.check_call("EndTxn", end)
    allow(state, ResourceType.TOPIC, "orders", Operation.WRITE)
    control.check_call("EndTxn", end)
    control.check_call("EndTxn", request_of("EndTxn", transactional_id="tx"))
