"""The StrandUser's pure decisions: what to do with its credential and Secret, the
ACL and quota diffs, the Secret's content and whose it is, and which StrandUser owns
a name."""

from __future__ import annotations

import base64

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
from strand_operator.conflicts import UserClaim, owner_of
from strand_operator.user_plan import (
    AclChanges,
    CredentialPlan,
    QuotaChange,
    acl_changes,
    plan_credential,
    quota_change,
)
from strand_operator.user_secret import (
    Ownership,
    SecretOwner,
    generate_password,
    ownership,
    password_in,
    user_secret,
)

OWNER = SecretOwner("apps", "app", "uid-1", "prod")


def fixed() -> str:
    return "new-password"


def acl(name: str, operation: Operation = Operation.READ,
        principal: str = "User:app") -> AclBinding:
    return AclBinding(ResourcePattern(ResourceType.TOPIC, name, PatternType.LITERAL),
                      AccessControlEntry(principal, "*", operation, AclPermissionType.ALLOW))


# ---------------------------------------------------------------- the credential

@pytest.mark.parametrize(("secret", "kept", "referenced", "exists", "plan"), [
    # generated: a new password only when there is none of ours
    (Ownership.MISSING, None, None, False,
     CredentialPlan(upsert="new-password", write_secret="new-password", generated=True)),
    (Ownership.MISSING, None, None, True,  # a credential without its Secret: replaced
     CredentialPlan(upsert="new-password", write_secret="new-password", generated=True)),
    (Ownership.OURS, "kept", None, True, CredentialPlan()),  # nothing: sessions go on
    (Ownership.OURS, "kept", None, False, CredentialPlan(upsert="kept")),  # restored
    (Ownership.OURS, None, None, True,  # its password key removed: a new one
     CredentialPlan(upsert="new-password", write_secret="new-password", generated=True)),
    (Ownership.STALE, "old", None, False,  # an earlier StrandUser's: never reused
     CredentialPlan(upsert="new-password", write_secret="new-password", generated=True)),
    # from a Secret: applied when it differs from the one recorded
    (Ownership.MISSING, None, "given", False,
     CredentialPlan(upsert="given", write_secret="given")),
    (Ownership.OURS, "given", "given", True, CredentialPlan()),
    (Ownership.OURS, "given", "given", False, CredentialPlan(upsert="given")),
    (Ownership.OURS, "old", "given", True,
     CredentialPlan(upsert="given", write_secret="given")),
])
def test_the_credential_is_written_only_when_missing_or_changed(
        secret: Ownership, kept: str | None, referenced: str | None, exists: bool,
        plan: CredentialPlan) -> None:
    assert plan_credential(True, secret, kept, referenced, exists, fixed) == plan


def test_a_tls_user_has_no_credential_and_no_secret_of_ours() -> None:
    assert plan_credential(False, Ownership.OURS, "pw", None, True, fixed) == CredentialPlan(
        delete_credential=True, delete_secret=True)
    assert plan_credential(False, Ownership.FOREIGN, "pw", None, False, fixed) == \
        CredentialPlan()
    assert not plan_credential(False, Ownership.MISSING, None, None, False, fixed)


# ---------------------------------------------------------------- ACLs and quotas

def test_acl_changes_create_the_missing_and_delete_only_the_principals_extras() -> None:
    desired = frozenset({acl("a"), acl("b", Operation.WRITE)})
    actual = [acl("a"), acl("c"), acl("d", principal="User:other"),
              acl("e", principal="User:*")]
    changes = acl_changes(desired, actual, "User:app")
    assert changes == AclChanges(create=(acl("b", Operation.WRITE),), delete=(acl("c"),))
    assert "added 1 and removed 1 ACL(s)" in changes.describe()
    assert not acl_changes(desired, list(desired), "User:app")


def test_quota_changes_set_what_differs_and_remove_what_is_not_listed() -> None:
    change = quota_change({"producer_byte_rate": 10.0, "consumer_byte_rate": 5.0},
                          {"producer_byte_rate": 10.0, "consumer_byte_rate": 4.0,
                           "request_percentage": 50.0})
    assert change == QuotaChange({"consumer_byte_rate": 5.0}, ("request_percentage",))
    assert change.describe() == "consumer_byte_rate=5, request_percentage removed"
    assert not quota_change({"producer_byte_rate": 1.0}, {"producer_byte_rate": 1.0})


# ---------------------------------------------------------------- the Secret

def test_the_secret_holds_username_and_password_and_is_owned_by_the_user() -> None:
    secret = user_secret(OWNER, "s3cret")
    assert secret["metadata"]["name"] == "app" and secret["metadata"]["namespace"] == "apps"
    assert secret["metadata"]["labels"]["strand.io/cluster"] == "prod"
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == {
        "username": "app", "password": "s3cret"}
    (ref,) = secret["metadata"]["ownerReferences"]
    assert (ref["apiVersion"], ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
        "strand.io/v1", "StrandUser", "app", "uid-1", True)
    assert password_in(secret) == "s3cret"
    assert ownership(secret, OWNER) is Ownership.OURS


def test_whose_secret_it_is() -> None:
    later = SecretOwner("apps", "app", "uid-2", "prod")
    assert ownership(None, OWNER) is Ownership.MISSING
    assert ownership(user_secret(later, "x"), OWNER) is Ownership.STALE
    assert ownership({"metadata": {"name": "app"}}, OWNER) is Ownership.FOREIGN
    shared = user_secret(later, "x")
    shared["metadata"]["ownerReferences"].append({"apiVersion": "v1", "kind": "ConfigMap",
                                                  "name": "c", "uid": "u"})
    assert ownership(shared, OWNER) is Ownership.FOREIGN  # not only ours: left alone


@pytest.mark.parametrize(("secret", "password"), [
    ({"data": {"password": base64.b64encode(b"pw\n").decode()}}, "pw"),
    ({"data": {"password": base64.b64encode(b"pw\r\n").decode()}}, "pw"),
    ({"stringData": {"password": "pw"}}, "pw"),
    ({"data": {"password": "not base64!"}}, None),
    ({"data": {"password": base64.b64encode(b"\xff").decode()}}, None),
    ({"data": {"password": ""}}, None),
    ({"data": {}}, None),
    (None, None),
])
def test_a_password_read_from_a_secret(secret: dict[str, dict[str, str]] | None,
                                       password: str | None) -> None:
    assert password_in(secret) == password


def test_generated_passwords_are_long_and_differ() -> None:
    passwords = {generate_password() for _ in range(10)}
    assert len(passwords) == 10 and all(len(p) >= 40 for p in passwords)


# ---------------------------------------------------------------- conflicts

def test_the_oldest_strand_user_owns_a_name() -> None:
    older = UserClaim("2024-01-01T00:00:00Z", "team-b", "app", "app")
    newer = UserClaim("2024-02-01T00:00:00Z", "team-a", "app", "app")
    assert owner_of([newer, older]) == older
    assert owner_of([]) is None
    assert older.describe() == "StrandUser team-b/app (created 2024-01-01T00:00:00Z)"
