"""strand.security.authorizer: each of Kafka's rules (super users, deny wins, wildcard
principal and host, LITERAL, ``*`` and PREFIXED patterns, implied operations, the
no-ACL default both ways), ``explain``, and a property comparing ``authorize`` with a
plain restatement of the rules over every binding of the index."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strand.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclIndex,
    AclPermissionType,
    Operation,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from strand.security.authorizer import Authorizer
from strand.security.principal import Principal

RT, PT, OP = ResourceType, PatternType, Operation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE, BOB = Principal("User", "alice"), Principal("User", "bob")
HOST = "10.0.0.1"


def acl(name: str = "orders", op: Operation = OP.READ, perm: AclPermissionType = ALLOW, *,
        principal: str = "User:alice", host: str = "*", rtype: ResourceType = RT.TOPIC,
        ptype: PatternType = PT.LITERAL) -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, ptype),
                      AccessControlEntry(principal, host, op, perm))


def authorizer(*acls: AclBinding, super_users: tuple[str, ...] = (),
               allow_if_none: bool = False) -> Authorizer:
    index = AclIndex()
    for b in acls:
        index.put(b.key(), b)
    return Authorizer(index, super_users, allow_if_none)


def may(auth: Authorizer, op: Operation = OP.READ, name: str = "orders", *,
        who: Principal = ALICE, host: str = HOST, rtype: ResourceType = RT.TOPIC) -> bool:
    return auth.authorize(who, host, op, rtype, name)


def test_literal_allow() -> None:
    auth = authorizer(acl())
    assert may(auth)
    assert not may(auth, who=BOB)
    assert not may(auth, OP.WRITE)
    assert not may(auth, name="orders2")
    assert not may(auth, rtype=RT.GROUP)


def test_deny_wins_over_allow() -> None:
    assert not may(authorizer(acl(), acl(perm=DENY)))
    assert not may(authorizer(acl(op=OP.ALL), acl(perm=DENY, principal="User:*")))
    assert not may(authorizer(acl(), acl("*", perm=DENY, host=HOST)))
    assert not may(authorizer(acl(), acl("ord", perm=DENY, ptype=PT.PREFIXED)))
    # A deny for someone else, another host or another operation does not apply.
    assert may(authorizer(acl(), acl(perm=DENY, principal="User:bob")))
    assert may(authorizer(acl(), acl(perm=DENY, host="10.0.0.2")))
    assert may(authorizer(acl(), acl(op=OP.WRITE, perm=DENY)))


def test_wildcard_principal_and_host() -> None:
    auth = authorizer(acl(principal="User:*"))
    assert may(auth) and may(auth, who=BOB)
    # Kafka matches "User:*" for every principal, whatever its type; only "User:*" is
    # a wildcard ("Group:*" names a principal called "*").
    assert may(auth, who=Principal("Group", "alice"))
    group_star = authorizer(acl(principal="Group:*"))
    assert not may(group_star, who=Principal("Group", "alice"))
    assert may(group_star, who=Principal("Group", "*"))
    pinned = authorizer(acl(host=HOST))
    assert may(pinned)
    assert not may(pinned, host="10.0.0.2")


def test_principal_type_counts() -> None:
    auth = authorizer(acl(principal="Group:alice"))
    assert not may(auth)
    assert may(auth, who=Principal("Group", "alice"))


def test_prefixed_and_wildcard_names() -> None:
    prefixed = authorizer(acl("ord", ptype=PT.PREFIXED))
    assert may(prefixed, name="orders") and may(prefixed, name="ord")
    assert not may(prefixed, name="or") and not may(prefixed, name="xorders")
    star = authorizer(acl("*"))
    assert may(star, name="anything") and may(star, name="*")
    assert not may(star, rtype=RT.GROUP)
    # A PREFIXED "*" applies only to names starting with "*" (Kafka's semantics).
    prefixed_star = authorizer(acl("*", ptype=PT.PREFIXED))
    assert not may(prefixed_star, name="orders") and may(prefixed_star, name="*x")


@pytest.mark.parametrize(("granted", "asked", "allowed"), [
    (OP.READ, OP.DESCRIBE, True), (OP.WRITE, OP.DESCRIBE, True),
    (OP.DELETE, OP.DESCRIBE, True), (OP.ALTER, OP.DESCRIBE, True),
    (OP.DESCRIBE, OP.DESCRIBE, True), (OP.ALTER_CONFIGS, OP.DESCRIBE_CONFIGS, True),
    (OP.ALL, OP.DESCRIBE, True), (OP.ALL, OP.ALTER_CONFIGS, True), (OP.ALL, OP.WRITE, True),
    (OP.CREATE, OP.DESCRIBE, False), (OP.DESCRIBE_CONFIGS, OP.DESCRIBE, False),
    (OP.ALTER_CONFIGS, OP.DESCRIBE, False), (OP.DESCRIBE, OP.READ, False),
    (OP.READ, OP.WRITE, False), (OP.WRITE, OP.READ, False),
    (OP.DESCRIBE_CONFIGS, OP.ALTER_CONFIGS, False), (OP.ALTER, OP.ALTER_CONFIGS, False),
    (OP.ALTER, OP.DESCRIBE_CONFIGS, False), (OP.READ, OP.DESCRIBE_CONFIGS, False),
])
def test_implied_operations(granted: Operation, asked: Operation, allowed: bool) -> None:
    assert may(authorizer(acl(op=granted)), asked) is allowed


def test_denies_are_not_implied() -> None:
    # A DENY of READ does not deny DESCRIBE (which an ALLOW of READ would allow).
    auth = authorizer(acl(op=OP.ALL), acl(op=OP.READ, perm=DENY))
    assert not may(auth, OP.READ)
    assert may(auth, OP.DESCRIBE)
    assert may(authorizer(acl(op=OP.ALL), acl(op=OP.ALTER_CONFIGS, perm=DENY)),
               OP.DESCRIBE_CONFIGS)
    # A DENY of ALL denies everything.
    denied_all = authorizer(acl(op=OP.ALL), acl(op=OP.ALL, perm=DENY))
    assert not any(may(denied_all, op) for op in Operation if op is not OP.ANY)


def test_super_users_may_do_anything() -> None:
    auth = authorizer(acl(op=OP.ALL, perm=DENY, principal="User:*"), super_users=("User:admin",))
    assert may(auth, OP.DELETE, who=Principal("User", "admin"))
    assert not may(auth)
    # With no ACL at all and deny by default, too.
    assert may(authorizer(super_users=("User:admin",)), who=Principal("User", "admin"))
    with pytest.raises(ValueError, match="no ':'"):
        authorizer(super_users=("admin",))


def test_no_acl_for_the_resource_uses_the_default() -> None:
    elsewhere = acl("payments", op=OP.ALL, perm=DENY, principal="User:*")
    assert not may(authorizer(elsewhere))
    assert may(authorizer(elsewhere, allow_if_none=True))
    assert may(authorizer(allow_if_none=True), OP.ALTER, who=BOB)
    # An ACL for the resource, even for someone else, turns the default off.
    for_bob = acl(principal="User:bob")
    assert not may(authorizer(for_bob, allow_if_none=True))
    assert not may(authorizer(acl(host="10.9.9.9"), allow_if_none=True))
    assert not may(authorizer(acl(op=OP.WRITE), allow_if_none=True))


def test_the_index_is_read_at_each_call() -> None:
    index = AclIndex()
    auth = Authorizer(index)
    assert not may(auth)
    index.put("k", acl())
    assert may(auth)
    index.put("d", acl(perm=DENY))
    assert not may(auth)
    index.remove("d")
    assert may(auth)


def test_operation_and_resource_any_are_programming_errors() -> None:
    auth = authorizer(acl(), allow_if_none=True)
    with pytest.raises(ValueError, match="operation ANY"):
        may(auth, OP.ANY)
    with pytest.raises(ValueError, match="resource type ANY"):
        may(auth, rtype=RT.ANY)
    with pytest.raises(ValueError, match="operation ANY"):
        auth.explain(ALICE, HOST, OP.ANY, RT.TOPIC, "orders")


def test_explain_names_the_rule() -> None:
    allow, deny = acl(), acl("ord", perm=DENY, ptype=PT.PREFIXED)

    def why(auth: Authorizer, who: Principal = ALICE, name: str = "orders") -> str:
        return auth.explain(who, HOST, OP.READ, RT.TOPIC, name)

    head = f"User:alice READ on TOPIC:orders from host {HOST}"
    assert why(authorizer(super_users=("User:alice",))) == \
        f"ALLOWED {head}: User:alice is a super user"
    assert why(authorizer(allow, deny)) == f"DENIED {head}: denied by {deny}"
    assert why(authorizer(allow)) == f"ALLOWED {head}: allowed by {allow}"
    assert why(authorizer(acl(principal="User:bob"))) == (
        f"DENIED {head}: 1 ACL(s) apply to the resource but none matched; deny by default")
    assert why(authorizer()) == (f"DENIED {head}: no ACL applies to the resource and "
                                 "allow.everyone.if.no.acl.found is false")
    assert why(authorizer(allow_if_none=True)) == (
        f"ALLOWED {head}: no ACL applies to the resource and "
        "allow.everyone.if.no.acl.found is true")


# -- the rules restated, over every binding ------------------------------------------

GRANTS = {OP.READ: {OP.READ, OP.DESCRIBE}, OP.WRITE: {OP.WRITE, OP.DESCRIBE},
          OP.DELETE: {OP.DELETE, OP.DESCRIBE}, OP.ALTER: {OP.ALTER, OP.DESCRIBE},
          OP.ALTER_CONFIGS: {OP.ALTER_CONFIGS, OP.DESCRIBE_CONFIGS},
          OP.ALL: set(Operation) - {OP.ANY}}
"""What an ALLOW of each operation grants (any other operation grants only itself)."""


def reference(bindings: list[AclBinding], super_users: set[str], allow_if_none: bool,
              who: Principal, host: str, op: Operation, rtype: ResourceType,
              name: str) -> bool:
    if str(who) in super_users:
        return True
    on_resource = [b for b in bindings if b.pattern.resource_type == rtype and (
        (b.pattern.pattern_type == PT.LITERAL and b.pattern.name in (name, "*"))
        or (b.pattern.pattern_type == PT.PREFIXED and name.startswith(b.pattern.name)))]
    if not on_resource:
        return allow_if_none
    mine = [b for b in on_resource if b.entry.principal in (str(who), "User:*")
            and b.entry.host in (host, "*")]
    if any(b.entry.permission == DENY and b.entry.operation in (op, OP.ALL) for b in mine):
        return False
    return any(b.entry.permission == ALLOW
               and op in GRANTS.get(b.entry.operation, {b.entry.operation}) for b in mine)


NAMES = st.text(alphabet="ab*", max_size=3)
CONCRETE_OPS = st.sampled_from([op for op in Operation if op is not OP.ANY])
PEOPLE = st.sampled_from([ALICE, BOB, Principal("Group", "alice")])
random_acl = st.builds(
    acl, NAMES, CONCRETE_OPS, st.sampled_from([ALLOW, DENY]),
    principal=st.sampled_from(["User:alice", "User:bob", "User:*", "Group:alice"]),
    host=st.sampled_from(["*", "h1", "h2"]), rtype=st.sampled_from([RT.TOPIC, RT.GROUP]),
    ptype=st.sampled_from([PT.LITERAL, PT.PREFIXED]))


@settings(max_examples=400)
@given(st.lists(random_acl, max_size=12), st.lists(st.integers(0, 11), max_size=4),
       st.sets(st.sampled_from(["User:bob", "Group:alice"]), max_size=1), st.booleans(),
       st.lists(st.tuples(PEOPLE, st.sampled_from(["h1", "h2"]), CONCRETE_OPS,
                          st.sampled_from([RT.TOPIC, RT.GROUP]), NAMES), min_size=1, max_size=8))
def test_authorize_agrees_with_the_rules_restated(
        acls: list[AclBinding], removed: list[int], super_users: set[str], allow_if_none: bool,
        asks: list[tuple[Principal, str, Operation, ResourceType, str]]) -> None:
    index = AclIndex()
    for i, b in enumerate(acls):
        index.put(f"k{i}", b)
    for i in removed:
        index.remove(f"k{i}")
    auth = Authorizer(index, super_users, allow_if_none)
    everything = index.bindings()
    for who, host, op, rtype, name in asks:
        expected = reference(everything, super_users, allow_if_none, who, host, op, rtype, name)
        assert auth.authorize(who, host, op, rtype, name) is expected
        assert auth.explain(who, host, op, rtype, name).startswith(
            "ALLOWED" if expected else "DENIED")
