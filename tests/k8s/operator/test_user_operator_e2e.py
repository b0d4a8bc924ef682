"""The StrandUser side of the operator end to end: kopf runs the operator's own
handlers in-process against kmock's Kubernetes emulator (harness.py), and the
operator, authenticated as the cluster's super user, manages the users of a real
Strand cluster that requires SCRAM-SHA-512 and enforces ACLs (deny by default).
Every behaviour is checked in Strand itself (who can authenticate, what the ACLs
let them do, the quotas) AND in the StrandUser's status, its Events and the Secret
the emulator holds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

import kmock
import pytest
import pytest_asyncio

from strand import Admin, NewTopic, Producer
from strand.errors import (
    AuthenticationError,
    ResourceNotFoundError,
    TopicAuthorizationFailedError,
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
from strand.security.quota_fields import FilterComponent
from strand.security.settings import ClientTlsSettings
from strand_operator.config import OperatorConfig
from strand_operator.handlers import FINALIZER
from tests.k8s.operator.harness import (
    NAMESPACE,
    USER_CRD,
    Operator,
    TopicEmulator,
    check_against_the_crd,
    eventually,
    running_operator,
)
from tests.support.security import SUPERUSER, as_user, secured_spec

pytestmark = [pytest.mark.asyncio, pytest.mark.kmock(cls=TopicEmulator)]
T = TypeVar("T")


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One storage node and a gateway requiring authentication and enforcing ACLs."""
    cluster = Cluster(secured_spec(tmp_path_factory.mktemp("k8s-users"), "k8s-users",
                                   txn_coordinators=0)).start()
    yield cluster
    cluster.stop()


async def strand(cluster: Cluster, call: Callable[[Admin], T],
                 settings: ClientTlsSettings | None = None) -> T:
    """An Admin call (as the super user by default), off the event loop that serves
    the emulator kopf talks to."""
    def run() -> T:
        with Admin(cluster.bootstrap, **(settings or as_user(*SUPERUSER))) as admin:
            return call(admin)
    return await asyncio.to_thread(run)


async def produce(cluster: Cluster, topic: str, settings: ClientTlsSettings) -> int:
    def run() -> int:
        with Producer(cluster.bootstrap, enable_idempotence=False, **settings) as producer:
            return producer.send(topic, b"hello", partition=0).result(30).offset
    return await asyncio.to_thread(run)


async def acls_of(cluster: Cluster, principal: str) -> set[AclBinding]:
    return set(await strand(cluster, lambda admin: admin.describe_acls(
        AclBindingFilter(principal=principal))))


async def quotas_of(cluster: Cluster, user: str) -> dict[str, float]:
    found = await strand(cluster, lambda admin: admin.describe_client_quotas(
        [FilterComponent("user", "EXACT", user)]))
    return {k: v for _, values in found for k, v in values.items()}


async def has_credential(cluster: Cluster, user: str) -> bool:
    try:
        await strand(cluster, lambda admin: admin.describe_scram_users([user]))
    except ResourceNotFoundError:
        return False
    return True


async def until_ready(op: Operator, name: str, reason: str = "Reconciled",
                      generation: int = 1, timeout: float = 30.0) -> dict[str, Any]:
    def check() -> dict[str, Any]:
        ready = op.user_ready(name)
        return ready if (ready.get("reason"), ready.get("observedGeneration")) == (
            reason, generation) else {}
    return await eventually(check, timeout, f"StrandUser {name} to be {reason} "
                            f"at generation {generation}")


async def recorded(op: Operator, name: str, reason: str, kind: str = "Normal") -> None:
    await eventually(lambda: any(e.get("reason") == reason and e.get("type") == kind
                                 for e in op.events(name, "StrandUser")), 10,
                     f"a {kind} Event {reason} about StrandUser {name}")


def password(op: Operator, name: str) -> str:
    secret = op.secret(name)
    assert secret is not None, f"no Secret {name}"
    value: str = secret["data"]["password"]
    return value


def scram(acls: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"authentication": {"type": "scram-sha-512"}, **extra}
    if acls is not None:
        spec["authorization"] = {"type": "simple", "acls": acls}
    return spec


def topic_acl(name: str, *operations: str, pattern: str = "literal") -> dict[str, Any]:
    return {"resource": {"type": "topic", "name": name, "patternType": pattern},
            "operations": list(operations)}


def config(cluster: Cluster, user: tuple[str, str] = SUPERUSER) -> OperatorConfig:
    """The operator authenticated as ``user`` (name, password), drift checks each second."""
    return OperatorConfig(cluster.bootstrap, (NAMESPACE,), "k8s", resync_interval=1.0,
                          user=user[0], password=user[1])


@pytest_asyncio.fixture
async def op(kmock: kmock.KubernetesEmulator, secured: Cluster) -> AsyncIterator[Operator]:
    async with running_operator(kmock, config(secured)) as running:
        yield running


async def test_a_user_gets_a_password_its_acls_and_quotas_then_follows_and_goes(
        op: Operator, secured: Cluster) -> None:
    await strand(secured, lambda admin: admin.create_topics(
        [NewTopic("app.orders", 1, 1), NewTopic("ledger", 1, 1)]))
    await op.create_user("app", scram([topic_acl("app.", "Write", "Describe",
                                                 pattern="prefix")],
                                      quotas={"producerByteRate": 1048576}))
    ready = await until_ready(op, "app")
    assert ready["status"] == "True" and "Secret apps/app" in ready["message"]
    user = op.user("app")
    assert (user["status"]["principal"], user["status"]["secret"]) == ("User:app", "app")
    assert user["metadata"]["finalizers"] == [FINALIZER]
    check_against_the_crd(user, USER_CRD)
    secret = op.secret("app")
    assert secret is not None and secret["data"]["username"] == "app"
    assert [(r["kind"], r["uid"]) for r in secret["metadata"]["ownerReferences"]] == [
        ("StrandUser", user["metadata"]["uid"])]
    first = password(op, "app")
    assert len(first) >= 32
    await recorded(op, "app", "PasswordGenerated")

    # The user authenticates with the Secret's password and has exactly its ACLs.
    app = as_user("app", first)
    assert await produce(secured, "app.orders", app) == 0
    with pytest.raises(TopicAuthorizationFailedError):
        await produce(secured, "ledger", app)
    assert await quotas_of(secured, "app") == {"producer_byte_rate": 1048576.0}

    # An ACL added behind the operator's back for this principal goes; the spec's
    # change is applied; the quota left out is removed; the password stays.
    stray = AclBinding(ResourcePattern(ResourceType.GROUP, "stray", PatternType.LITERAL),
                       AccessControlEntry("User:app", "*", Operation.READ,
                                          AclPermissionType.ALLOW))
    await strand(secured, lambda admin: admin.create_acls([stray]))
    await op.patch_user("app", scram([topic_acl("ledger", "Write", "Describe")],
                                     quotas=None))
    await until_ready(op, "app", generation=2)
    held = await acls_of(secured, "User:app")
    assert {(b.pattern.name, b.entry.operation.value) for b in held} == {
        ("ledger", "WRITE"), ("ledger", "DESCRIBE")}
    assert await produce(secured, "ledger", app) == 0
    with pytest.raises(TopicAuthorizationFailedError):
        await produce(secured, "app.orders", app)
    assert await quotas_of(secured, "app") == {}
    assert password(op, "app") == first
    await recorded(op, "app", "AclsUpdated")

    await op.delete_user("app")
    await eventually(lambda: not op.user_exists("app"), 30, "the StrandUser to go")
    assert not await has_credential(secured, "app")
    assert await acls_of(secured, "User:app") == set()
    assert op.secret("app") is None
    with pytest.raises(AuthenticationError):
        await strand(secured, lambda admin: admin.list_topics(), app)


async def test_a_password_from_a_secret_is_followed_then_tls_drops_it(
        op: Operator, secured: Cluster) -> None:
    await op.put_secret("bob-password", {"password": "bob-secret-1\n"})
    ref = {"valueFrom": {"secretKeyRef": {"name": "bob-password", "key": "password"}}}
    await op.create_user("bob", {"authentication": {"type": "scram-sha-512",
                                                    "password": ref}})
    await until_ready(op, "bob")
    assert password(op, "bob") == "bob-secret-1"  # copied, its line break dropped
    assert await strand(secured, lambda admin: admin.list_topics(),
                        as_user("bob", "bob-secret-1")) == []

    # A new password in the referenced Secret is applied by the next drift check.
    response = await op.emulator.patch(
        f"/api/v1/namespaces/{NAMESPACE}/secrets/bob-password",
        json={"data": {"password": "Ym9iLXNlY3JldC0y"}},  # bob-secret-2
        headers={"Content-Type": "application/merge-patch+json"})
    assert response.status < 300
    await eventually(lambda: password(op, "bob") == "bob-secret-2", 15,
                     "the new password to be applied")
    await recorded(op, "bob", "PasswordChanged")
    assert await strand(secured, lambda admin: admin.list_topics(),
                        as_user("bob", "bob-secret-2")) == []

    # tls: no password may open the principal any more; its Secret goes.
    await op.patch_user("bob", {"authentication": {"type": "tls", "password": None}})
    ready = await until_ready(op, "bob", generation=2)
    assert "common name is 'bob'" in ready["message"]
    assert not await has_credential(secured, "bob")
    assert op.secret("bob") is None and "secret" not in op.user("bob")["status"]
    assert op.secret("bob-password") is not None  # the user's own Secret is not touched
    check_against_the_crd(op.user("bob"), USER_CRD)


async def test_a_spec_that_cannot_be_carried_out_is_reported(op: Operator,
                                                            secured: Cluster) -> None:
    await op.create_user("carol", scram([{"resource": {"type": "group", "name": "g"},
                                          "operations": ["Write"]}]))
    refused = await until_ready(op, "carol", "InvalidAcl")
    assert refused["status"] == "False"
    assert "acls[0]" in refused["message"] and "WRITE does not apply to GROUP" in \
        refused["message"]
    await recorded(op, "carol", "InvalidAcl", "Warning")
    assert not await has_credential(secured, "carol")

    await op.patch_user("carol", scram([{"resource": {"type": "group", "name": "g"},
                                         "operations": ["Read"]}]))
    await until_ready(op, "carol", generation=2)
    assert len(await acls_of(secured, "User:carol")) == 1

    ref = {"valueFrom": {"secretKeyRef": {"name": "nowhere", "key": "password"}}}
    await op.create_user("dave", {"authentication": {"type": "scram-sha-512",
                                                     "password": ref}})
    missing = await until_ready(op, "dave", "PasswordSecretMissing")
    assert "Secret 'nowhere'" in missing["message"]

    # The operator's own user is never managed: a new password would lock it out.
    await op.create_user(SUPERUSER[0], scram([]))
    reserved = await until_ready(op, SUPERUSER[0], "ReservedUser")
    assert "--user" in reserved["message"] and op.secret(SUPERUSER[0]) is None
    await op.delete_user(SUPERUSER[0])
    await eventually(lambda: not op.user_exists(SUPERUSER[0]), 30, "the StrandUser to go")
    assert await has_credential(secured, SUPERUSER[0])  # and the super user still works


async def test_an_operator_that_is_not_a_super_user_says_so(
        kmock: kmock.KubernetesEmulator, secured: Cluster) -> None:
    await strand(secured, lambda admin: admin.upsert_scram_user("nobody", "nobody-secret"))
    async with running_operator(kmock, config(secured, ("nobody", "nobody-secret"))) as op:
        await op.create_user("erin", scram([]))
        refused = await until_ready(op, "erin", "NotAuthorized")
        assert "--super-users" in refused["message"] and "User:nobody" in refused["message"]
    assert not await has_credential(secured, "erin")
