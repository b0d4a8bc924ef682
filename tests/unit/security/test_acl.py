"""strand.security.principal and strand.security.acl: parsing principals and Kafka's
names, every refusal of a binding and a filter, the canonical JSON and its key,
Kafka's filter semantics, and the index against a scan of every binding."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strand.security.acl import (
    CLUSTER_RESOURCE_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclIndex,
    AclPermissionType,
    InvalidAclError,
    Operation,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from strand.security.principal import ANONYMOUS, WILDCARD_PRINCIPAL, Principal

RT, PT, OP, PERM = ResourceType, PatternType, Operation, AclPermissionType


def binding(name: str = "orders", *, rtype: ResourceType = RT.TOPIC,
            ptype: PatternType = PT.LITERAL, principal: str = "User:alice",
            host: str = "*", op: Operation = OP.READ,
            perm: AclPermissionType = PERM.ALLOW) -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, ptype),
                      AccessControlEntry(principal, host, op, perm))


# -- principals ----------------------------------------------------------------------

def test_principal_string_and_parse() -> None:
    alice = Principal("User", "alice")
    assert str(alice) == "User:alice"
    assert Principal.parse("User:alice") == alice
    assert Principal.parse("User:CN=a,O=b:c") == Principal("User", "CN=a,O=b:c")
    assert Principal.parse("Group:ops").type == "Group"
    assert str(ANONYMOUS) == "User:ANONYMOUS"
    assert WILDCARD_PRINCIPAL == "User:*"
    assert sorted([Principal("User", "b"), Principal("Group", "z"), Principal("User", "a")]) \
        == [Principal("Group", "z"), Principal("User", "a"), Principal("User", "b")]


@pytest.mark.parametrize(("text", "says"), [
    ("alice", "no ':'"), ("", "no ':'"), (":x", "type before ':' is empty"),
    ("User:", "name after ':' is empty"), (":", "type before ':' is empty"),
])
def test_principal_parse_refuses(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as info:
        Principal.parse(text)
    assert "User:alice" in str(info.value)


@pytest.mark.parametrize(("kind", "name"), [("", "x"), ("Us:er", "x"), ("User", "")])
def test_principal_constructor_refuses_what_would_not_parse_back(kind: str, name: str) -> None:
    with pytest.raises(ValueError):
        Principal(kind, name)


@given(st.text(min_size=1).filter(lambda s: ":" not in s), st.text(min_size=1))
def test_principal_round_trips(kind: str, name: str) -> None:
    principal = Principal(kind, name)
    assert Principal.parse(str(principal)) == principal


# -- Kafka's names -------------------------------------------------------------------

@pytest.mark.parametrize(("text", "member"), [
    ("describe-configs", OP.DESCRIBE_CONFIGS), ("DescribeConfigs", OP.DESCRIBE_CONFIGS),
    ("DESCRIBE_CONFIGS", OP.DESCRIBE_CONFIGS), ("idempotent-write", OP.IDEMPOTENT_WRITE),
    ("ClusterAction", OP.CLUSTER_ACTION), ("all", OP.ALL), (" read ", OP.READ),
    ("transactional-id", RT.TRANSACTIONAL_ID), ("Transactional_Id", RT.TRANSACTIONAL_ID),
    ("topic", RT.TOPIC), ("Prefixed", PT.PREFIXED), ("match", PT.MATCH),
    ("deny", PERM.DENY), ("Allow", PERM.ALLOW), ("any", PERM.ANY),
])
def test_names_parse_leniently(text: str, member: object) -> None:
    assert type(member).parse(text) is member  # type: ignore[attr-defined]


@pytest.mark.parametrize(("kind", "text", "noun"), [
    (OP, "reed", "operation"), (RT, "topics", "resource type"),
    (PT, "glob", "pattern type"), (PERM, "maybe", "permission type"), (OP, "", "operation"),
])
def test_names_refused_with_the_choices(kind: type[Operation], text: str, noun: str) -> None:
    with pytest.raises(InvalidAclError) as info:
        kind.parse(text)
    message = str(info.value)
    assert f"unknown {noun} {text!r}" in message
    assert all(member.value in message for member in kind)


# -- validation ----------------------------------------------------------------------

@pytest.mark.parametrize("good", [
    binding(), binding("*"), binding("ord", ptype=PT.PREFIXED, op=OP.ALL, perm=PERM.DENY),
    binding(principal=WILDCARD_PRINCIPAL, host="10.0.0.1"),
    binding(CLUSTER_RESOURCE_NAME, rtype=RT.CLUSTER, op=OP.IDEMPOTENT_WRITE),
    binding("app-", rtype=RT.GROUP, ptype=PT.PREFIXED, op=OP.DELETE),
    binding("tx", rtype=RT.TRANSACTIONAL_ID, op=OP.WRITE),
    binding(principal="User:CN=svc,O=corp"),
])
def test_valid_bindings_pass(good: AclBinding) -> None:
    good.validate()


@pytest.mark.parametrize(("bad", "says"), [
    (binding(rtype=RT.ANY), "resource type ANY is for filters"),
    (binding(ptype=PT.ANY), "pattern type ANY is for filters"),
    (binding(ptype=PT.MATCH), "pattern type MATCH is for filters"),
    (binding(op=OP.ANY), "operation ANY is for filters"),
    (binding(perm=PERM.ANY), "ALLOW or DENY"),
    (binding(principal="alice"), "no ':'.*'User:\\*' for every principal"),
    (binding(principal="User:"), "name after ':' is empty"),
    (binding(principal=":alice"), "type before ':' is empty"),
    (binding(host=""), "host is empty.*'\\*' for every host"),
    (binding(""), "resource name is empty.*'\\*' \\(LITERAL\\)"),
    (binding("", ptype=PT.PREFIXED), "resource name is empty"),
    (binding("kafka-cluster", rtype=RT.CLUSTER, op=OP.ALTER), "LITERAL 'strand-cluster'"),
    (binding("*", rtype=RT.CLUSTER, op=OP.ALTER), "not LITERAL '\\*'"),
    (binding(CLUSTER_RESOURCE_NAME, rtype=RT.CLUSTER, ptype=PT.PREFIXED, op=OP.ALTER),
     "not PREFIXED 'strand-cluster'"),
    (binding("*", ptype=PT.PREFIXED), "use LITERAL '\\*' for every TOPIC"),
    (binding(op=OP.CLUSTER_ACTION), "CLUSTER_ACTION does not apply to TOPIC; valid: READ"),
    (binding(op=OP.IDEMPOTENT_WRITE), "IDEMPOTENT_WRITE does not apply to TOPIC"),
    (binding(rtype=RT.GROUP, op=OP.WRITE), "WRITE does not apply to GROUP; valid: READ, "
     "DELETE, DESCRIBE, ALL"),
    (binding(rtype=RT.GROUP, op=OP.ALTER_CONFIGS), "does not apply to GROUP"),
    (binding(CLUSTER_RESOURCE_NAME, rtype=RT.CLUSTER, op=OP.READ), "does not apply to CLUSTER"),
    (binding(CLUSTER_RESOURCE_NAME, rtype=RT.CLUSTER, op=OP.WRITE), "does not apply"),
    (binding(rtype=RT.TRANSACTIONAL_ID, op=OP.READ), "valid: WRITE, DESCRIBE, ALL"),
])
def test_each_refusal(bad: AclBinding, says: str) -> None:
    with pytest.raises(InvalidAclError, match=says):
        bad.validate()


@pytest.mark.parametrize("rtype", [RT.TOPIC, RT.GROUP, RT.CLUSTER, RT.TRANSACTIONAL_ID])
def test_operation_table(rtype: ResourceType) -> None:
    table = {
        RT.TOPIC: {OP.READ, OP.WRITE, OP.CREATE, OP.DELETE, OP.ALTER, OP.DESCRIBE,
                   OP.DESCRIBE_CONFIGS, OP.ALTER_CONFIGS, OP.ALL},
        RT.GROUP: {OP.READ, OP.DESCRIBE, OP.DELETE, OP.ALL},
        RT.CLUSTER: {OP.CREATE, OP.CLUSTER_ACTION, OP.DESCRIBE_CONFIGS, OP.ALTER_CONFIGS,
                     OP.IDEMPOTENT_WRITE, OP.ALTER, OP.DESCRIBE, OP.ALL},
        RT.TRANSACTIONAL_ID: {OP.DESCRIBE, OP.WRITE, OP.ALL},
    }
    name = CLUSTER_RESOURCE_NAME if rtype is RT.CLUSTER else "x"
    accepted = set()
    for op in Operation:
        if op is OP.ANY:
            continue
        try:
            binding(name, rtype=rtype, op=op).validate()
            accepted.add(op)
        except InvalidAclError:
            pass
    assert accepted == table[rtype]


# -- JSON and keys -------------------------------------------------------------------

PINNED = (b'{"host":"*","name":"orders","operation":"READ","pattern_type":"LITERAL",'
          b'"permission":"ALLOW","principal":"User:alice","resource_type":"TOPIC"}')


def test_canonical_json_and_key_are_pinned() -> None:
    # etcd keys outlive releases: this JSON and its key must never change.
    assert binding().to_json() == PINNED
    assert binding().key() == hashlib.sha256(PINNED).hexdigest()[:32]
    assert binding().key() == "afc42446f106731bc822d90fb943e7b1"


def test_keys_are_the_same_for_equal_bindings_and_differ_otherwise() -> None:
    assert binding().key() == binding().key()
    variants = [binding(), binding("orders2"), binding(ptype=PT.PREFIXED),
                binding(rtype=RT.GROUP), binding(principal="User:bob"), binding(host="h"),
                binding(op=OP.WRITE), binding(perm=PERM.DENY)]
    assert len({v.key() for v in variants}) == len(variants)
    assert all(len(v.key()) == 32 and int(v.key(), 16) >= 0 for v in variants)


def test_str_is_kafka_like() -> None:
    assert str(binding()) == ("User:alice has ALLOW permission for operation READ on "
                              "TOPIC:LITERAL:orders from host *")
    assert str(binding("app-", rtype=RT.GROUP, ptype=PT.PREFIXED, perm=PERM.DENY,
                       principal="User:*", host="10.1.1.1", op=OP.ALL)) == (
        "User:* has DENY permission for operation ALL on GROUP:PREFIXED:app- from host "
        "10.1.1.1")


any_binding = st.builds(
    binding, st.text(), rtype=st.sampled_from(ResourceType),
    ptype=st.sampled_from(PatternType), principal=st.text(), host=st.text(),
    op=st.sampled_from(Operation), perm=st.sampled_from(AclPermissionType))


@given(any_binding)
def test_json_round_trips(b: AclBinding) -> None:
    data = b.to_json()
    assert AclBinding.from_json(data) == b
    assert data.isascii()
    assert json.dumps(json.loads(data), sort_keys=True, separators=(",", ":")).encode() == data


@given(any_binding)
def test_key_depends_only_on_the_binding(b: AclBinding) -> None:
    again = AclBinding.from_json(b.to_json())
    assert again.key() == b.key()


def _pinned_with(**changes: object) -> bytes:
    raw = json.loads(PINNED)
    raw.update(changes)
    return json.dumps(raw).encode()


@pytest.mark.parametrize(("junk", "says"), [
    (b"", "not JSON"), (b"{", "not JSON"), (b"\xff\xfe", "not JSON"),
    (b"[]", "a JSON list"), (b"null", "a JSON NoneType"), (b'"x"', "a JSON str"),
    (b"{}", "missing fields"), (_pinned_with(extra="x"), "unknown fields \\['extra'\\]"),
    (_pinned_with(name=3), "name not strings"), (_pinned_with(host=None), "host not strings"),
    (_pinned_with(operation="read"), "'read' is not a valid Operation"),
    (_pinned_with(resource_type="TOPICS"), "not a valid ResourceType"),
    (_pinned_with(pattern_type="GLOB"), "not a valid PatternType"),
    (_pinned_with(permission="MAYBE"), "not a valid AclPermissionType"),
    (b"[" * 100_000, "not"),
])
def test_from_json_refuses_junk(junk: bytes, says: str) -> None:
    with pytest.raises(InvalidAclError, match=says):
        AclBinding.from_json(junk)


def test_from_json_reads_other_key_orders() -> None:
    assert AclBinding.from_json(json.dumps(json.loads(PINNED), indent=2).encode()) == binding()


# -- filters -------------------------------------------------------------------------

LIT, PRE, STAR = binding("orders"), binding("ord", ptype=PT.PREFIXED), binding("*")
OTHER_PRE, GROUP_LIT = binding("pay", ptype=PT.PREFIXED), binding("orders", rtype=RT.GROUP)
ALL_FIVE = [LIT, PRE, STAR, OTHER_PRE, GROUP_LIT]


@pytest.mark.parametrize(("flt", "expected"), [
    (AclBindingFilter(), ALL_FIVE),
    (AclBindingFilter(resource_type=RT.TOPIC), [LIT, PRE, STAR, OTHER_PRE]),
    (AclBindingFilter(name="orders"), [LIT, GROUP_LIT]),
    (AclBindingFilter(name="ord"), [PRE]),
    (AclBindingFilter(name="*"), [STAR]),
    (AclBindingFilter(name="orders", pattern_type=PT.LITERAL), [LIT, GROUP_LIT]),
    (AclBindingFilter(name="orders", pattern_type=PT.PREFIXED), []),
    (AclBindingFilter(name="ord", pattern_type=PT.PREFIXED), [PRE]),
    (AclBindingFilter(pattern_type=PT.PREFIXED), [PRE, OTHER_PRE]),
    (AclBindingFilter(pattern_type=PT.LITERAL), [LIT, STAR, GROUP_LIT]),
    (AclBindingFilter(name="orders", pattern_type=PT.MATCH), [LIT, PRE, STAR, GROUP_LIT]),
    (AclBindingFilter(RT.TOPIC, "orders", PT.MATCH), [LIT, PRE, STAR]),
    (AclBindingFilter(RT.TOPIC, "or", PT.MATCH), [STAR]),
    (AclBindingFilter(RT.TOPIC, "payments", PT.MATCH), [STAR, OTHER_PRE]),
    (AclBindingFilter(RT.GROUP, "orders", PT.MATCH), [GROUP_LIT]),
    (AclBindingFilter(pattern_type=PT.MATCH), ALL_FIVE),
])
def test_filter_pattern_semantics(flt: AclBindingFilter, expected: list[AclBinding]) -> None:
    assert [b for b in ALL_FIVE if flt.matches(b)] == expected


def test_filter_entry_fields_match_exactly() -> None:
    wild = binding(principal="User:*", host="*", op=OP.ALL)
    alice = binding(principal="User:alice", host="h1", op=OP.READ, perm=PERM.DENY)
    both = [wild, alice]
    assert [b for b in both if AclBindingFilter(principal="User:alice").matches(b)] == [alice]
    assert [b for b in both if AclBindingFilter(principal="User:*").matches(b)] == [wild]
    assert [b for b in both if AclBindingFilter(host="h1").matches(b)] == [alice]
    assert [b for b in both if AclBindingFilter(host="*").matches(b)] == [wild]
    assert [b for b in both if AclBindingFilter(operation=OP.READ).matches(b)] == [alice]
    assert [b for b in both if AclBindingFilter(operation=OP.ALL).matches(b)] == [wild]
    assert [b for b in both if AclBindingFilter(permission=PERM.DENY).matches(b)] == [alice]
    assert [b for b in both if AclBindingFilter(permission=PERM.ALLOW).matches(b)] == [wild]


def test_filter_validate() -> None:
    AclBindingFilter().validate()
    AclBindingFilter(RT.TOPIC, "orders", PT.MATCH).validate()
    with pytest.raises(InvalidAclError, match="MATCH needs a resource name"):
        AclBindingFilter(pattern_type=PT.MATCH).validate()


# -- the index -----------------------------------------------------------------------

NAMES = st.text(alphabet="ab*", max_size=4)
small_binding = st.builds(
    binding, NAMES, rtype=st.sampled_from([RT.TOPIC, RT.GROUP]),
    ptype=st.sampled_from([PT.LITERAL, PT.PREFIXED]),
    principal=st.sampled_from(["User:alice", "User:*"]), op=st.sampled_from([OP.READ, OP.ALL]))
KEYS = st.sampled_from([f"k{i}" for i in range(8)])
index_ops = st.lists(st.one_of(st.tuples(st.just("put"), KEYS, small_binding),
                               st.tuples(st.just("remove"), KEYS, st.none())), max_size=40)


def brute_force(bindings: list[AclBinding], rtype: ResourceType, name: str) -> set[AclBinding]:
    found = set()
    for b in bindings:
        p = b.pattern
        if p.resource_type != rtype:
            continue
        if p.pattern_type == PT.LITERAL and (p.name == name or p.name == "*"):
            found.add(b)
        if p.pattern_type == PT.PREFIXED and name[:len(p.name)] == p.name:
            found.add(b)
    return found


@settings(max_examples=300)
@given(index_ops, st.lists(st.tuples(st.sampled_from([RT.TOPIC, RT.GROUP]), NAMES),
                           min_size=1, max_size=6))
def test_index_matches_a_scan(ops: list[tuple[str, str, AclBinding | None]],
                              queries: list[tuple[ResourceType, str]]) -> None:
    index, model = AclIndex(), dict[str, AclBinding]()
    for action, key, b in ops:
        if action == "put":
            assert b is not None
            index.put(key, b)
            model[key] = b
        else:
            index.remove(key)
            model.pop(key, None)
    distinct = set(model.values())
    assert len(index) == len(distinct)
    assert set(index.bindings()) == distinct and len(index.bindings()) == len(distinct)
    for rtype, name in queries:
        got = index.matching(rtype, name)
        assert len(got) == len(set(got))
        assert set(got) == brute_force(list(model.values()), rtype, name)
        match = AclBindingFilter(rtype, name, PT.MATCH)
        assert set(got) == {b for b in distinct if match.matches(b)}


def test_index_counts_keys_of_the_same_binding() -> None:
    index = AclIndex()
    index.put("k1", PRE)
    index.put("k2", PRE)
    assert len(index) == 1 and index.matching(RT.TOPIC, "orders") == [PRE]
    index.remove("k1")
    assert index.matching(RT.TOPIC, "orders") == [PRE]
    index.remove("k2")
    assert index.matching(RT.TOPIC, "orders") == [] and len(index) == 0
    index.remove("k2")  # gone already: nothing happens
    assert len(index) == 0


def test_index_put_replaces_what_a_key_held() -> None:
    index = AclIndex()
    index.put("k", LIT)
    index.put("k", PRE)
    index.put("k", PRE)
    assert index.bindings() == [PRE]
    assert index.matching(RT.TOPIC, "orders") == [PRE]
    assert index.matching(RT.TOPIC, "pay") == []


def test_index_bindings_and_matching_are_sorted() -> None:
    index = AclIndex()
    for i, b in enumerate(reversed(ALL_FIVE)):
        index.put(str(i), b)
    listed = index.bindings()
    assert listed == sorted(ALL_FIVE, key=lambda b: (b.pattern.resource_type.value,
                                                     b.pattern.name, b.pattern.pattern_type.value))
    assert index.matching(RT.TOPIC, "orders") == [STAR, PRE, LIT]
    with pytest.raises(ValueError, match="ANY"):
        index.matching(RT.ANY, "orders")


@given(index_ops)
def test_index_leaves_nothing_behind(ops: list[tuple[str, str, AclBinding | None]]) -> None:
    # White-box: a watcher churning ACLs for months must not grow the index's tables
    # (nor probe prefix lengths no prefix has any more).
    index = AclIndex()
    for action, key, b in ops:
        if action == "put" and b is not None:
            index.put(key, b)
        else:
            index.remove(key)
    for key in [f"k{i}" for i in range(8)]:
        index.remove(key)
    assert len(index) == 0
    assert not (index._by_key or index._keys_of or index._literal or index._prefixed
                or index._prefix_lengths)
