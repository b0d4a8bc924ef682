"""SASL/SCRAM-SHA-512 and the ACL APIs on the Kafka listener of a cluster that requires
authentication and enforces ACLs (the package's shared ``secured_cluster``):
confluent-kafka's AdminClient (librdkafka) authenticates as Strand's users, its ACL
calls agree with Strand's SDK both ways, and the authenticated principal is the one
the gateway's ACLs judge; SASL as Kafka's broker does it (a failed authentication
closes the connection, a re-authentication keeps the principal, a session ends with
its user's credential)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

# The defining modules: confluent_kafka.admin re-exports these without declaring them.
from confluent_kafka.admin._acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
)
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from confluent_kafka.cimpl import NewTopic as RdNewTopic
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as PyResourceType
from kafka.errors import ClusterAuthorizationFailedError
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest
from kio.schema.describe_cluster.v0.response import DescribeClusterResponse
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from strand import Admin
from strand.launcher import Cluster
from strand.security.acl import (
    AccessControlEntry,
    Operation,
    PatternType,
    ResourcePattern,
)
from strand.security.acl import AclBinding as StrandBinding
from strand.security.acl import (
    AclBindingFilter as StrandFilter,
)
from strand.security.acl import (
    AclPermissionType as StrandPermission,
)
from strand.security.acl import ResourceType as StrandResourceType
from strand.security.scram import ScramClientExchange
from tests.support.cluster import unique
from tests.support.kafka_wire import RawKafkaClient
from tests.support.security import SUPERUSER, as_user

pytestmark = pytest.mark.slow

TIMEOUT_S = 30
# A filter field matching anything: None (confluent-kafka's annotations say str only).
ANY_TEXT: Any = None


def _admin(cluster: Cluster, user: str, password: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.kafka_bootstrap,
                        "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "SCRAM-SHA-512",
                        "sasl.username": user, "sasl.password": password})


@pytest.fixture(scope="module")
def sdk(secured_cluster: Cluster) -> Iterator[Admin]:
    with Admin(secured_cluster.bootstrap, **as_user(*SUPERUSER)) as admin:
        yield admin


@pytest.fixture(scope="module")
def user(sdk: Admin) -> tuple[str, str]:
    name = unique("kafka-user")
    sdk.upsert_scram_user(name, f"{name}-secret")
    return name, f"{name}-secret"


def test_the_super_user_manages_acls_over_the_kafka_wire(secured_cluster: Cluster,
                                                         sdk: Admin,
                                                         user: tuple[str, str]) -> None:
    name, _ = user
    prefix = unique("acl")
    admin = _admin(secured_cluster, *SUPERUSER)
    binding = AclBinding(ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED,
                         f"User:{name}", "*", AclOperation.CREATE, AclPermissionType.ALLOW)
    cluster_read = AclBinding(ResourceType.BROKER, "kafka-cluster",
                              ResourcePatternType.LITERAL, f"User:{name}", "*",
                              AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding, cluster_read]).values():
        future.result(timeout=TIMEOUT_S)
    # Strand's SDK sees them, the cluster resource under Strand's own name.
    mine = sdk.describe_acls(StrandFilter(principal=f"User:{name}"))
    assert {(b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type,
             b.entry.operation) for b in mine} == {
        (StrandResourceType.TOPIC, prefix, PatternType.PREFIXED, Operation.CREATE),
        (StrandResourceType.CLUSTER, "strand-cluster", PatternType.LITERAL,
         Operation.DESCRIBE)}
    # One made with the SDK is described over the Kafka wire.
    sdk.create_acls([StrandBinding(
        ResourcePattern(StrandResourceType.GROUP, prefix, PatternType.LITERAL),
        AccessControlEntry(f"User:{name}", "*", Operation.READ, StrandPermission.ALLOW))])
    described = admin.describe_acls(AclBindingFilter(
        ResourceType.ANY, ANY_TEXT, ResourcePatternType.ANY, f"User:{name}", ANY_TEXT,
        AclOperation.ANY, AclPermissionType.ANY)).result(timeout=TIMEOUT_S)
    assert {(b.restype, b.name, b.operation) for b in described} == {
        (ResourceType.TOPIC, prefix, AclOperation.CREATE),
        (ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE),
        (ResourceType.GROUP, prefix, AclOperation.READ)}
    deleted = admin.delete_acls([AclBindingFilter(
        ResourceType.GROUP, prefix, ResourcePatternType.LITERAL, ANY_TEXT, ANY_TEXT,
        AclOperation.ANY, AclPermissionType.ANY)])
    (gone,) = next(iter(deleted.values())).result(timeout=TIMEOUT_S)
    assert (gone.restype, gone.name, gone.principal) == (ResourceType.GROUP, prefix,
                                                         f"User:{name}")
    assert not sdk.describe_acls(StrandFilter(resource_type=StrandResourceType.GROUP,
                                              name=prefix))


def _py_admin(cluster: Cluster, user: str, password: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap,
                            security_protocol="SASL_PLAINTEXT",
                            sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=user,
                            sasl_plain_password=password, request_timeout_ms=10_000)


def test_the_authenticated_user_is_the_one_judged(secured_cluster: Cluster,
                                                  sdk: Admin) -> None:
    name = unique("judged")
    sdk.upsert_scram_user(name, f"{name}-secret")
    allowed = unique("granted")
    sdk.create_acls([StrandBinding(
        ResourcePattern(StrandResourceType.TOPIC, allowed, PatternType.LITERAL),
        AccessControlEntry(f"User:{name}", "*", Operation.CREATE, StrandPermission.ALLOW))])
    admin = _admin(secured_cluster, name, f"{name}-secret")
    denied = unique("denied")
    futures = admin.create_topics([RdNewTopic(allowed, 1, 1), RdNewTopic(denied, 1, 1)])
    futures[allowed].result(timeout=TIMEOUT_S)
    with pytest.raises(KafkaException) as raised:
        futures[denied].result(timeout=TIMEOUT_S)
    assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert f"User:{name}" in raised.value.args[0].str()
    assert allowed in sdk.list_topics() and denied not in sdk.list_topics()
    # Without DESCRIBE on the cluster, ACLs are not the user's to see (kafka-python
    # raises DescribeAcls' error; librdkafka drops it and answers an empty list).
    py_admin = _py_admin(secured_cluster, name, f"{name}-secret")
    try:
        with pytest.raises(ClusterAuthorizationFailedError, match=f"User:{name}"):
            py_admin.describe_acls(ACLFilter(
                principal=None, host="*", operation=ACLOperation.ANY,
                permission_type=ACLPermissionType.ANY,
                resource_pattern=ResourcePatternFilter(PyResourceType.ANY, None,
                                                       ACLResourcePatternType.ANY)))
    finally:
        py_admin.close()


def _scram(raw: RawKafkaClient, user: str, password: str) -> SaslAuthenticateResponse:
    """A whole SCRAM-SHA-512 exchange over raw SaslHandshake/SaslAuthenticate requests
    (the SDK's client side of SCRAM); the final answer."""
    handshake = raw.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"),
                         SaslHandshakeResponse)
    assert handshake.error_code == KafkaErrorCode.none
    exchange = ScramClientExchange(user, password)
    first = raw.call(SaslAuthenticateRequest(auth_bytes=exchange.first().encode()),
                     SaslAuthenticateResponse)
    assert first.error_code == KafkaErrorCode.none
    final: SaslAuthenticateResponse = raw.call(SaslAuthenticateRequest(
        auth_bytes=exchange.final(first.auth_bytes.decode()).encode()),
        SaslAuthenticateResponse)
    if final.error_code == KafkaErrorCode.none:
        exchange.verify(final.auth_bytes.decode())  # the gateway knows the credential
    return final


def _describe_cluster(raw: RawKafkaClient) -> DescribeClusterResponse:
    answer: DescribeClusterResponse = raw.call(
        DescribeClusterRequest(include_cluster_authorized_operations=False),
        DescribeClusterResponse)
    return answer


def _assert_closed(raw: RawKafkaClient) -> None:
    """The listener closed the connection: the next request gets no answer."""
    with pytest.raises(OSError):
        _describe_cluster(raw)


def test_a_wrong_password_is_refused(secured_cluster: Cluster,
                                     user: tuple[str, str]) -> None:
    with RawKafkaClient(secured_cluster.kafka_bootstrap) as raw:
        refused = _scram(raw, user[0], "wrong")
        assert refused.error_code == KafkaErrorCode.sasl_authentication_failed
        assert "invalid username or password" in (refused.error_message or "")
        _assert_closed(raw)  # answered, then closed: as Kafka does
    with RawKafkaClient(secured_cluster.kafka_bootstrap) as raw:
        accepted = _scram(raw, *user)
        assert accepted.session_lifetime.total_seconds() > 0
        # Authenticated: the connection may now send other requests.
        assert _describe_cluster(raw).error_code == KafkaErrorCode.none


def test_sasl_messages_out_of_order(secured_cluster: Cluster) -> None:
    with RawKafkaClient(secured_cluster.kafka_bootstrap) as raw:
        early = raw.call(SaslAuthenticateRequest(auth_bytes=b"n,,n=x,r=abc"),
                         SaslAuthenticateResponse)
        assert early.error_code == KafkaErrorCode.illegal_sasl_state
        plain = raw.call(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse)
        assert plain.error_code == KafkaErrorCode.unsupported_sasl_mechanism
        assert plain.mechanisms == ("SCRAM-SHA-512",)
        scram = raw.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"),
                         SaslHandshakeResponse)
        assert scram.error_code == KafkaErrorCode.none
        garbled = raw.call(SaslAuthenticateRequest(auth_bytes=b"not scram"),
                           SaslAuthenticateResponse)
        assert garbled.error_code == KafkaErrorCode.sasl_authentication_failed
        assert garbled.error_message


def test_reauthentication_keeps_the_principal(secured_cluster: Cluster, sdk: Admin,
                                              user: tuple[str, str]) -> None:
    """KIP-368: a connection re-authenticates as the same user and goes on; as another
    user it is refused (SASL_AUTHENTICATION_FAILED) and closed, as Kafka does."""
    other = unique("other-user")
    sdk.upsert_scram_user(other, f"{other}-secret")
    with RawKafkaClient(secured_cluster.kafka_bootstrap) as raw:
        assert _scram(raw, *user).error_code == KafkaErrorCode.none
        again = _scram(raw, *user)
        assert again.error_code == KafkaErrorCode.none
        assert again.session_lifetime.total_seconds() > 0
        assert _describe_cluster(raw).error_code == KafkaErrorCode.none
        switched = _scram(raw, other, f"{other}-secret")
        assert switched.error_code == KafkaErrorCode.sasl_authentication_failed
        assert f"cannot change principals during re-authentication from User:{user[0]} " \
            f"to User:{other}" in (switched.error_message or "")
        _assert_closed(raw)


def test_a_changed_credential_ends_the_connection(secured_cluster: Cluster,
                                                  sdk: Admin) -> None:
    """The session ends when its user's credential changes: the connection is closed
    at its next request unless it re-authenticates (with the new password)."""
    name = unique("rotating")
    sdk.upsert_scram_user(name, "first-secret")
    with RawKafkaClient(secured_cluster.kafka_bootstrap) as stale, \
            RawKafkaClient(secured_cluster.kafka_bootstrap) as renewed:
        for raw in (stale, renewed):
            assert _scram(raw, name, "first-secret").error_code == KafkaErrorCode.none
            assert _describe_cluster(raw).error_code == KafkaErrorCode.none
        sdk.upsert_scram_user(name, "second-secret")
        # Every gateway learns of it through etcd: until then the old session holds.
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                _describe_cluster(stale)
            except OSError:
                break  # closed: the session ended with the credential
            assert time.monotonic() < deadline, "the changed credential never ended it"
            time.sleep(0.2)
        assert _scram(renewed, name, "second-secret").error_code == KafkaErrorCode.none
        assert _describe_cluster(renewed).error_code == KafkaErrorCode.none
