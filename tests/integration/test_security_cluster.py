"""A cluster with SCRAM-SHA-512 authentication required and ACLs enforced (deny by
default): unauthenticated callers and wrong passwords are refused; a user without
ACLs is refused every API with Kafka's error and changes nothing; prefixed and deny
ACLs behave as Kafka's; a consumer group and a transaction work with their ACLs; a
password change ends the user's sessions."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from strand import Admin, Consumer, NewTopic, Producer, TopicPartition
from strand.errors import (
    AuthenticationError,
    AuthorizationError,
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from strand.launcher import Cluster
from strand.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    Operation,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from strand.security.settings import ClientTlsSettings
from tests.support.cluster import unique
from tests.support.security import SUPERUSER, as_user

pytestmark = pytest.mark.slow

ADMIN = SUPERUSER


@pytest.fixture
def cluster(secured_cluster: Cluster) -> Cluster:
    return secured_cluster


def admin(cluster: Cluster) -> Admin:
    return Admin(cluster.bootstrap, **as_user(*ADMIN))


def new_user(cluster: Cluster, acls: Callable[[str], list[AclBinding]] = lambda _: []
             ) -> tuple[str, ClientTlsSettings]:
    """A new user with the ACLs ``acls(principal)``; its client settings."""
    name = unique("user")
    with admin(cluster) as boss:
        boss.upsert_scram_user(name, f"{name}-password")
        boss.create_acls(acls(f"User:{name}"))
    return name, as_user(name, f"{name}-password")


def acl(principal: str, resource_type: ResourceType, name: str, operation: Operation,
        pattern: PatternType = PatternType.LITERAL,
        permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, "*", operation, permission))


def new_topic(cluster: Cluster, prefix: str = "secured") -> str:
    topic = unique(prefix)
    with admin(cluster) as boss:
        boss.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "3600000"})])
    return topic


def end_offsets(cluster: Cluster, partitions: list[TopicPartition]) -> list[int]:
    """The partitions' log end offsets, read as the super user."""
    with Consumer(cluster.bootstrap, **as_user(*ADMIN)) as reader:
        ends = reader.end_offsets(partitions)
    return [ends[tp] for tp in partitions]


def test_unauthenticated_callers_and_wrong_passwords_are_refused(cluster: Cluster) -> None:
    topic = unique("never")
    for settings, match in ((ClientTlsSettings(), "requires authentication"),
                            (as_user("admin", "wrong"), "invalid username or password"),
                            (as_user("nobody", "x"), "invalid username or password")):
        with Admin(cluster.bootstrap, **settings) as stranger, \
                pytest.raises(AuthenticationError, match=match):
            stranger.create_topics([NewTopic(topic, 1, 1)])
    with admin(cluster) as boss:
        assert topic not in boss.list_topics()


def test_a_user_without_acls_is_refused_everything_and_changes_nothing(
        cluster: Cluster) -> None:
    topic = new_topic(cluster)
    with admin(cluster) as boss:
        with Producer(cluster.bootstrap, **as_user(*ADMIN)) as producer:
            producer.send(topic, b"kept", partition=0).result(30)
        boss.alter_configs(topic, set={"retention.ms": "3600000"})
    name, settings = new_user(cluster)
    refusals: list[tuple[str, Callable[[], object], type[AuthorizationError]]] = []
    with Admin(cluster.bootstrap, **settings) as user:
        refusals += [
            ("create topic", lambda: user.create_topics([NewTopic(unique("t"), 1, 1)]),
             TopicAuthorizationFailedError),
            ("delete topic", lambda: user.delete_topics([topic]),
             TopicAuthorizationFailedError),
            ("add partitions", lambda: user.create_partitions(topic, 4),
             TopicAuthorizationFailedError),
            ("alter config", lambda: user.alter_configs(topic, set={"retention.ms": "1"}),
             TopicAuthorizationFailedError),
            ("describe topic", lambda: user.describe_topics([topic]),
             TopicAuthorizationFailedError),
            ("describe group", lambda: user.describe_group("g"),
             GroupAuthorizationFailedError),
            ("delete group", lambda: user.delete_group("g"), GroupAuthorizationFailedError),
            ("create ACL", lambda: user.create_acls([acl(
                f"User:{name}", ResourceType.TOPIC, topic, Operation.ALL)]),
             ClusterAuthorizationFailedError),
            ("list ACLs", lambda: user.describe_acls(), ClusterAuthorizationFailedError),
            ("add user", lambda: user.upsert_scram_user(unique("u"), "pw"),
             ClusterAuthorizationFailedError),
        ]
        for what, call, error in refusals:
            with pytest.raises(error, match=f"User:{name}") as refused:
                call()
            assert "not authorized to" in str(refused.value), what
        assert user.list_topics() == []  # a listing leaves out what it may not describe
    with Producer(cluster.bootstrap, enable_idempotence=False, **settings) as producer:
        with pytest.raises(TopicAuthorizationFailedError, match="not authorized"):
            producer.send(topic, b"refused", partition=0).result(30)
        with pytest.raises(TopicAuthorizationFailedError, match="DESCRIBE TOPIC"):
            producer.send(topic, b"refused")  # its partitions: from metadata it may not see
    with Producer(cluster.bootstrap, transactional_id=unique("tx"), **settings) as producer, \
            pytest.raises(TransactionalIdAuthorizationFailedError):
        producer.init_transactions()
    with Consumer(cluster.bootstrap, **settings) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek(TopicPartition(topic, 0), 0)
        with pytest.raises(TopicAuthorizationFailedError, match="READ TOPIC"):
            for _ in range(20):
                consumer.poll(timeout_ms=500)
    with admin(cluster) as boss:  # nothing changed
        assert topic in boss.list_topics()
        (described,) = boss.describe_topics([topic])
        assert len(described.partitions) == 2
        assert boss.describe_configs(topic)["retention.ms"].value == "3600000"
        assert [b for b in boss.describe_acls() if name in b.entry.principal] == []
    assert end_offsets(cluster, [TopicPartition(topic, 0)]) == [1]


def test_prefixed_and_deny_acls_behave_as_kafkas(cluster: Cluster) -> None:
    prefix = unique("orders") + "."
    allowed, denied = new_topic(cluster, prefix + "eu"), new_topic(cluster, prefix + "secret")
    other = new_topic(cluster)
    _, settings = new_user(cluster, lambda principal: [
        acl(principal, ResourceType.TOPIC, prefix, Operation.WRITE, PatternType.PREFIXED),
        acl(principal, ResourceType.TOPIC, denied, Operation.WRITE,
            permission=AclPermissionType.DENY)])
    with Producer(cluster.bootstrap, **settings) as producer:  # idempotent: KIP-679
        assert producer.send(allowed, b"ok", partition=0).result(30).offset == 0
        with pytest.raises(TopicAuthorizationFailedError, match="WRITE TOPIC"):
            producer.send(denied, b"no", partition=0).result(30)
        with pytest.raises(TopicAuthorizationFailedError, match="not authorized"):
            producer.send(other, b"no", partition=0).result(30)
    assert end_offsets(cluster, [TopicPartition(denied, 0), TopicPartition(other, 0)]) == [0, 0]
    with admin(cluster) as boss:
        # ACLs change under a running cluster: deleting the deny lets the writes through
        deleted = boss.delete_acls([AclBindingFilter(
            resource_type=ResourceType.TOPIC, name=denied,
            permission=AclPermissionType.DENY)])
        assert len(deleted) == 1
    with Producer(cluster.bootstrap, **settings) as producer:
        assert producer.send(denied, b"now", partition=0).result(30).offset == 0


def test_a_consumer_group_and_a_transaction_work_with_their_acls(cluster: Cluster) -> None:
    source, sink = new_topic(cluster), new_topic(cluster)
    group, txn_id = unique("group"), unique("tx")
    _, settings = new_user(cluster, lambda principal: [
        acl(principal, ResourceType.TOPIC, source, Operation.READ),
        acl(principal, ResourceType.TOPIC, sink, Operation.WRITE),
        acl(principal, ResourceType.TOPIC, sink, Operation.READ),
        acl(principal, ResourceType.GROUP, group, Operation.READ),
        acl(principal, ResourceType.TRANSACTIONAL_ID, txn_id, Operation.WRITE)])
    with Producer(cluster.bootstrap, **as_user(*ADMIN)) as producer:
        for i in range(10):
            producer.send(source, b"%d" % i, partition=i % 2)
        producer.flush(30)
    with Consumer(cluster.bootstrap, group_id=group, auto_offset_reset="earliest",
                  enable_auto_commit=False, isolation_level="read_committed",
                  **settings) as consumer, \
            Producer(cluster.bootstrap, transactional_id=txn_id, **settings) as producer:
        consumer.subscribe([source])
        producer.init_transactions()
        producer.begin_transaction()
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 10:
            assert time.monotonic() < deadline, f"read {seen} of 10"
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    producer.send(sink, record.value, partition=record.partition)
                    seen += 1
        positions = {tp: consumer.position(tp) for tp in consumer.assignment()}
        producer.send_offsets_to_transaction(positions, consumer.group_metadata())
        producer.commit_transaction()
    with Consumer(cluster.bootstrap, group_id=group, isolation_level="read_committed",
                  **settings) as again:
        committed = [again.committed(TopicPartition(source, p)) for p in (0, 1)]
        assert committed == [5, 5]
    assert end_offsets(cluster, [TopicPartition(sink, 0), TopicPartition(sink, 1)]) == [6, 6]


def test_a_password_change_ends_the_users_sessions(cluster: Cluster) -> None:
    name, settings = new_user(cluster, lambda principal: [
        acl(principal, ResourceType.GROUP, "*", Operation.DESCRIBE)])
    with Admin(cluster.bootstrap, **settings) as user:
        assert user.list_topics() == []  # authenticated: a session
        with admin(cluster) as boss:
            boss.upsert_scram_user(name, "changed")
        with pytest.raises(AuthenticationError, match="invalid username or password"):
            user.list_topics()  # the session ended; the old password fails
    with Admin(cluster.bootstrap, **as_user(name, "changed")) as user:
        assert user.list_topics() == []


def test_clients_authenticate_again_when_their_session_is_refused(cluster: Cluster) -> None:
    """A restarted gateway signs sessions with a new key: the clients' sessions are
    refused, and both the blocking channel (Admin, Consumer) and the producer's
    asyncio channel authenticate again once and repeat the call, with no error."""
    topic = new_topic(cluster)
    _, settings = new_user(cluster, lambda principal: [
        acl(principal, ResourceType.TOPIC, topic, Operation.ALL)])
    with Admin(cluster.bootstrap, **settings) as user, \
            Producer(cluster.bootstrap, **settings) as producer:
        assert user.list_topics() == [topic]
        producer.send(topic, b"before", partition=0).result(30)
        gateway = cluster.gateways[0]
        gateway.stop()
        gateway.start()
        cluster.wait_registered()
        assert user.list_topics() == [topic]
        assert producer.send(topic, b"after", partition=0).result(60).offset == 1
