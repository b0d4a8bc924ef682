"""``strand acl add|list|remove`` and ``strand user add|remove|list`` against a fake
Admin: the ACLs and filters built from each option combination (Kafka's --producer
and --consumer shortcuts too), what is refused before anything is sent, the
confirmation rules, passwords never taken as arguments, the JSON output, and
Strand's errors as one line with exit status 1."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

import strand.cli.acl as acl_cli
import strand.cli.user as user_cli
from strand.admin_acls import ScramUserDescription
from strand.cli.common import security
from strand.cli.main import cli
from strand.errors import (
    AuthenticationError,
    ClusterAuthorizationFailedError,
    ResourceNotFoundError,
    SecurityDisabledError,
    StrandError,
    TopicAuthorizationFailedError,
)
from strand.security.acl import (
    CLUSTER_RESOURCE_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    Operation,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from strand.security.scram import DEFAULT_ITERATIONS, MAX_ITERATIONS, MIN_ITERATIONS

REPO = Path(__file__).resolve().parents[3]
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
T, G, X, C = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID,
              ResourceType.CLUSTER)
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
OP = Operation


def binding(rtype: ResourceType, name: str, operation: Operation,
            principal: str = "User:alice", host: str = "*",
            permission: AclPermissionType = ALLOW,
            pattern: PatternType = LIT) -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, pattern),
                      AccessControlEntry(principal, host, operation, permission))


CLUSTER_IDEMPOTENT = binding(C, CLUSTER_RESOURCE_NAME, OP.IDEMPOTENT_WRITE)


class FakeAdmin:
    """The Admin's ACL and SCRAM calls over in-memory state; records every call."""

    def __init__(self, acls: Iterable[AclBinding] = (),
                 users: dict[str, int] | None = None) -> None:
        self.acls: list[AclBinding] = list(acls)
        self.users: dict[str, int] = dict(users or {})
        self.calls: list[tuple[str, Any]] = []
        self.fail: StrandError | None = None
        self.opened = 0
        self.settings: list[dict[str, Any]] = []

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def _call(self, name: str, argument: Any) -> None:
        self.calls.append((name, argument))
        if self.fail is not None:
            raise self.fail

    def called(self, name: str) -> list[Any]:
        return [argument for called, argument in self.calls if called == name]

    def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        self._call("create_acls", list(bindings))
        for b in bindings:
            b.validate()
            if b not in self.acls:
                self.acls.append(b)

    def describe_acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        self._call("describe_acls", acl_filter)
        acl_filter = acl_filter or AclBindingFilter()
        return [b for b in self.acls if acl_filter.matches(b)]

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclBinding]:
        self._call("delete_acls", list(filters))
        deleted = [b for b in self.acls if any(f.matches(b) for f in filters)]
        self.acls = [b for b in self.acls if b not in deleted]
        return deleted

    def upsert_scram_user(self, name: str, password: str,
                          iterations: int = DEFAULT_ITERATIONS) -> None:
        self._call("upsert_scram_user", (name, password, iterations))
        self.users[name] = iterations

    def delete_scram_user(self, name: str) -> None:
        self._call("delete_scram_user", name)
        if name not in self.users:
            raise ResourceNotFoundError(f"cannot change user {name!r}: no such user")
        del self.users[name]

    def describe_scram_users(self, names: Sequence[str] = ()) -> list[ScramUserDescription]:
        self._call("describe_scram_users", list(names))
        return [ScramUserDescription(name, "SCRAM-SHA-512", iterations)
                for name, iterations in self.users.items() if not names or name in names]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    admin = FakeAdmin()

    def open_admin(ctx: click.Context) -> FakeAdmin:
        admin.opened += 1
        admin.settings.append(dict(security(ctx)))
        return admin

    monkeypatch.setattr(acl_cli, "open_admin", open_admin)
    monkeypatch.setattr(user_cli, "open_admin", open_admin)
    return admin


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input)


def added(fake: FakeAdmin, *args: str) -> set[AclBinding]:
    """The ACLs one ``strand acl add ARGS`` sent, in one create_acls call."""
    result = run("acl", "add", *args)
    assert result.exit_code == 0, result.output
    (created,) = fake.called("create_acls")
    assert len(created) == len(set(created)), "duplicates sent"
    return set(created)


# ---------------------------------------------------------------- acl add


def test_add_is_the_cross_product_of_principals_hosts_and_operations(fake: FakeAdmin) -> None:
    got = added(fake, "--allow-principal", "User:alice", "--allow-principal", "User:bob",
                "--allow-host", "10.0.0.1", "--allow-host", "10.0.0.2",
                "--operation", "read", "--operation", "Describe-Configs", "--topic", "orders")
    assert got == {binding(T, "orders", op, principal, host)
                   for principal in ("User:alice", "User:bob")
                   for host in ("10.0.0.1", "10.0.0.2")
                   for op in (OP.READ, OP.DESCRIBE_CONFIGS)}


def test_add_allows_and_denies_each_from_its_own_hosts(fake: FakeAdmin) -> None:
    got = added(fake, "--allow-principal", "User:*", "--deny-principal", "User:mallory",
                "--deny-host", "10.6.6.6", "--operation", "WRITE", "--topic", "orders")
    assert got == {binding(T, "orders", OP.WRITE, "User:*"),
                   binding(T, "orders", OP.WRITE, "User:mallory", "10.6.6.6", DENY)}


@pytest.mark.parametrize(("args", "expected"), [
    (("--group", "billing", "--operation", "read"), binding(G, "billing", OP.READ)),
    (("--transactional-id", "tx-", "--resource-pattern-type", "PREFIXED",
      "--operation", "write"), binding(X, "tx-", OP.WRITE, pattern=PRE)),
    (("--cluster", "--operation", "idempotent_write"), CLUSTER_IDEMPOTENT),
    (("--cluster", "--operation", "IdempotentWrite"), CLUSTER_IDEMPOTENT),
    (("--topic", "*", "--operation", "all"), binding(T, "*", OP.ALL)),
    (("--topic", "logs.", "--resource-pattern-type", "prefixed", "--operation",
      "alter-configs"), binding(T, "logs.", OP.ALTER_CONFIGS, pattern=PRE)),
])
def test_add_names_one_resource_of_each_type(fake: FakeAdmin, args: tuple[str, ...],
                                             expected: AclBinding) -> None:
    assert added(fake, "--allow-principal", "User:alice", *args) == {expected}


def test_producer_shortcut_is_kafkas(fake: FakeAdmin) -> None:
    got = added(fake, "--allow-principal", "User:alice", "--producer", "--topic", "orders",
                "--transactional-id", "orders-tx")
    assert got == {binding(T, "orders", OP.WRITE), binding(T, "orders", OP.DESCRIBE),
                   binding(T, "orders", OP.CREATE), binding(X, "orders-tx", OP.WRITE),
                   binding(X, "orders-tx", OP.DESCRIBE), CLUSTER_IDEMPOTENT}


def test_producer_without_transactional_id_and_prefixed_keeps_the_cluster_literal(
        fake: FakeAdmin) -> None:
    got = added(fake, "--allow-principal", "User:alice", "--allow-host", "h", "--producer",
                "--topic", "orders.", "--resource-pattern-type", "prefixed")
    assert got == {binding(T, "orders.", op, host="h", pattern=PRE)
                   for op in (OP.WRITE, OP.DESCRIBE, OP.CREATE)} | {
        binding(C, CLUSTER_RESOURCE_NAME, OP.IDEMPOTENT_WRITE, host="h")}


def test_consumer_shortcut_is_kafkas(fake: FakeAdmin) -> None:
    got = added(fake, "--allow-principal", "User:bob", "--consumer", "--topic", "orders",
                "--group", "billing")
    assert got == {binding(T, "orders", OP.READ, "User:bob"),
                   binding(T, "orders", OP.DESCRIBE, "User:bob"),
                   binding(G, "billing", OP.READ, "User:bob")}


def test_producer_and_consumer_together_send_each_acl_once(fake: FakeAdmin) -> None:
    got = added(fake, "--allow-principal", "User:bob", "--producer", "--consumer",
                "--topic", "orders", "--group", "billing", "--transactional-id", "tx")
    assert {(b.pattern.resource_type, b.entry.operation) for b in got} == {
        (T, OP.WRITE), (T, OP.DESCRIBE), (T, OP.CREATE), (T, OP.READ), (X, OP.WRITE),
        (X, OP.DESCRIBE), (C, OP.IDEMPOTENT_WRITE), (G, OP.READ)}
    assert len(got) == 8


def test_add_prints_what_it_added(fake: FakeAdmin) -> None:
    result = run("acl", "add", "--allow-principal", "User:alice", "--operation", "read",
                 "--operation", "write", "--topic", "orders")
    assert result.exit_code == 0, result.output
    assert "added 2 ACLs" in result.stdout
    assert result.stdout.count("User:alice") == 2 and "WRITE" in result.stdout


OPS = ("--operation", "read")


@pytest.mark.parametrize(("args", "message"), [
    (("--allow-principal", "User:a", *OPS, "--topic", "t", "--group", "g"),
     "name one resource, not --topic and --group"),
    (("--allow-principal", "User:a", *OPS, "--cluster", "--transactional-id", "x"),
     "not --transactional-id and --cluster"),
    (("--allow-principal", "User:a", *OPS), "name the resource"),
    ((*OPS, "--topic", "t"), "name who"),
    (("--allow-principal", "User:a", "--topic", "t"), "name the operations"),
    (("--allow-principal", "User:a", "--operation", "reed", "--topic", "t"),
     "unknown operation 'reed'"),
    (("--allow-principal", "User:a", *OPS, "--cluster"),
     "operation READ does not apply to CLUSTER"),
    (("--allow-principal", "User:a", "--operation", "idempotent-write", "--topic", "t"),
     "operation IDEMPOTENT_WRITE does not apply to TOPIC"),
    (("--allow-principal", "User:a", "--operation", "any", "--topic", "t"),
     "operation ANY is for filters"),
    (("--allow-principal", "alice", *OPS, "--topic", "t"), "cannot parse principal 'alice'"),
    (("--allow-host", "h", "--deny-principal", "User:a", *OPS, "--topic", "t"),
     "--allow-host needs --allow-principal"),
    (("--allow-principal", "User:a", *OPS, "--cluster", "--resource-pattern-type",
      "prefixed"), "a CLUSTER ACL names the cluster as LITERAL"),
    (("--allow-principal", "User:a", *OPS, "--topic", "*", "--resource-pattern-type",
      "prefixed"), "PREFIXED '*'"),
    (("--allow-principal", "User:a", *OPS, "--topic", ""), "resource name is empty"),
    (("--allow-principal", "User:a", *OPS, "--topic", "t", "--resource-pattern-type",
      "match"), "'match' is not one of"),
    (("--allow-principal", "User:a", "--producer", *OPS, "--topic", "t"),
     "leave out --operation"),
    (("--allow-principal", "User:a", "--producer"), "--producer needs --topic"),
    (("--allow-principal", "User:a", "--consumer", "--topic", "t"), "--consumer needs --group"),
    (("--allow-principal", "User:a", "--producer", "--topic", "t", "--cluster"),
     "leave out --cluster"),
    (("--allow-principal", "User:a", "--deny-principal", "User:b", "--producer", "--topic",
      "t"), "leave out --deny-principal"),
    (("--allow-principal", "User:a", "--producer", "--topic", "t", "--group", "g"),
     "--group goes with --consumer"),
    (("--allow-principal", "User:a", "--consumer", "--topic", "t", "--group", "g",
      "--transactional-id", "x"), "--transactional-id goes with --producer"),
])
def test_add_refuses_before_sending_anything(fake: FakeAdmin, args: tuple[str, ...],
                                             message: str) -> None:
    result = run("acl", "add", *args)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.stderr.split()), result.stderr
    assert fake.opened == 0 and fake.calls == []


def test_one_invalid_acl_among_several_adds_none(fake: FakeAdmin) -> None:
    result = run("acl", "add", "--allow-principal", "User:a", "--allow-principal", "User:b",
                 "--operation", "read", "--operation", "cluster-action", "--topic", "t")
    assert result.exit_code == 2
    assert "invalid ACL (User:a has ALLOW permission for operation CLUSTER_ACTION on " \
           "TOPIC:LITERAL:t from host *)" in " ".join(result.stderr.split())
    assert fake.calls == [] and fake.acls == []


# ---------------------------------------------------------------- acl list


def listed_filters(fake: FakeAdmin, *args: str) -> list[AclBindingFilter]:
    result = run("acl", "list", *args)
    assert result.exit_code == 0, result.output
    return list(fake.called("describe_acls"))


@pytest.mark.parametrize(("args", "expected"), [
    ((), [AclBindingFilter()]),
    (("--topic", "orders"), [AclBindingFilter(T, "orders", LIT)]),
    (("--topic", "orders", "--resource-pattern-type", "match"),
     [AclBindingFilter(T, "orders", PatternType.MATCH)]),
    (("--group", "g", "--resource-pattern-type", "any"), [AclBindingFilter(G, "g")]),
    (("--cluster",), [AclBindingFilter(C, CLUSTER_RESOURCE_NAME, LIT)]),
    (("--resource-pattern-type", "prefixed"), [AclBindingFilter(pattern_type=PRE)]),
    (("--deny-host", "10.6.6.6"), [AclBindingFilter(host="10.6.6.6", permission=DENY)]),
    (("--transactional-id", "tx", "--operation", "write", "--operation", "DESCRIBE"),
     [AclBindingFilter(X, "tx", LIT, operation=OP.WRITE),
      AclBindingFilter(X, "tx", LIT, operation=OP.DESCRIBE)]),
    (("--principal", "User:a", "--allow-principal", "User:b", "--allow-host", "h"),
     [AclBindingFilter(principal="User:a"),
      AclBindingFilter(principal="User:b", host="h", permission=ALLOW)]),
    (("--allow-principal", "User:a", "--deny-principal", "User:b", "--operation", "read"),
     [AclBindingFilter(principal="User:a", operation=OP.READ, permission=ALLOW),
      AclBindingFilter(principal="User:b", operation=OP.READ, permission=DENY)]),
])
def test_list_filters(fake: FakeAdmin, args: tuple[str, ...],
                      expected: list[AclBindingFilter]) -> None:
    assert listed_filters(fake, *args) == expected


@pytest.mark.parametrize(("args", "message"), [
    (("--topic", "t", "--cluster"), "name one resource, not --topic and --cluster"),
    (("--resource-pattern-type", "match"), "pattern type MATCH needs a resource name"),
    (("--operation", "nope"), "unknown operation 'nope'"),
    (("--principal", "bob"), "cannot parse principal 'bob'"),
])
def test_list_refuses_bad_filters(fake: FakeAdmin, args: tuple[str, ...],
                                  message: str) -> None:
    result = run("acl", "list", *args)
    assert result.exit_code == 2
    assert message in " ".join(result.stderr.split()), result.stderr
    assert fake.calls == []


ACLS = [binding(T, "orders", OP.READ, "User:bob"),
        binding(T, "orders", OP.WRITE),
        binding(T, "ord", OP.READ, pattern=PRE),
        binding(G, "billing", OP.READ, "User:bob", "10.0.0.1", DENY),
        CLUSTER_IDEMPOTENT]


def test_list_json_is_one_object_per_acl_sorted_and_each_once(fake: FakeAdmin) -> None:
    fake.acls = list(ACLS)
    result = run("acl", "list", "--json", "--principal", "User:bob", "--operation", "read")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {"resource_type": "GROUP", "resource_name": "billing", "pattern_type": "LITERAL",
         "principal": "User:bob", "host": "10.0.0.1", "operation": "READ",
         "permission": "DENY"},
        {"resource_type": "TOPIC", "resource_name": "orders", "pattern_type": "LITERAL",
         "principal": "User:bob", "host": "*", "operation": "READ", "permission": "ALLOW"}]
    fake.calls.clear()
    both = run("acl", "list", "--json", "--principal", "User:alice", "--allow-principal",
               "User:alice", "--topic", "orders")  # two filters, the same ACL
    assert [acl["operation"] for acl in json.loads(both.stdout)] == ["WRITE"]
    assert len(fake.called("describe_acls")) == 2


def test_list_match_finds_what_applies_to_a_name(fake: FakeAdmin) -> None:
    fake.acls = list(ACLS)
    result = run("acl", "list", "--json", "--topic", "orders", "--resource-pattern-type",
                 "match")
    assert {(a["resource_name"], a["pattern_type"]) for a in json.loads(result.stdout)} == {
        ("orders", "LITERAL"), ("ord", "PREFIXED")}


def test_list_prints_a_table_or_says_none_match(fake: FakeAdmin) -> None:
    fake.acls = list(ACLS)
    result = run("acl", "list")
    assert result.exit_code == 0
    header = next(line for line in result.stdout.splitlines() if "principal" in line)
    assert [w for w in header.replace("┃", " ").replace("|", " ").split()] == [
        "resource", "type", "name", "pattern", "principal", "host", "operation", "permission"]
    for acl in ACLS:
        assert str(acl.pattern.name) in result.stdout
    assert "IDEMPOTENT_WRITE" in result.stdout and "10.0.0.1" in result.stdout
    none = run("acl", "list", "--topic", "nothing")
    assert none.exit_code == 0 and none.stdout == "" and "no ACLs match" in none.stderr
    assert json.loads(run("acl", "list", "--json", "--topic", "nothing").stdout) == []


# ---------------------------------------------------------------- acl remove


@pytest.mark.parametrize("args", [(), ("--resource-pattern-type", "any"), ("--yes",)])
def test_remove_refuses_an_empty_filter_without_all(fake: FakeAdmin,
                                                    args: tuple[str, ...]) -> None:
    fake.acls = list(ACLS)
    result = run("acl", "remove", *args)
    assert result.exit_code == 2
    assert "no filter" in result.stderr and "--all" in result.stderr
    assert fake.calls == [] and fake.acls == ACLS


def test_remove_all_refuses_filter_options(fake: FakeAdmin) -> None:
    result = run("acl", "remove", "--all", "--yes", "--topic", "orders")
    assert result.exit_code == 2 and "--all removes every ACL" in result.stderr
    assert fake.calls == []


def test_remove_all_with_yes_removes_everything(fake: FakeAdmin) -> None:
    fake.acls = list(ACLS)
    result = run("acl", "remove", "--all", "--yes")
    assert result.exit_code == 0, result.output
    assert fake.called("delete_acls") == [[AclBindingFilter()]]
    assert fake.called("describe_acls") == [] and fake.acls == []
    assert "removed 5 ACLs" in result.stdout


def test_remove_asks_first_and_keeps_everything_on_no(fake: FakeAdmin) -> None:
    fake.acls = list(ACLS)
    result = run("acl", "remove", "--principal", "User:bob", input="n\n")
    assert result.exit_code == 1 and "Aborted" in result.stderr
    assert "to remove: 2 ACLs" in result.stderr and "Remove these 2 ACLs?" in result.stderr
    assert fake.called("delete_acls") == [] and fake.acls == ACLS


def test_remove_deletes_on_yes_and_prints_what_was_deleted(fake: FakeAdmin) -> None:
    fake.acls = list(ACLS)
    result = run("acl", "remove", "--principal", "User:bob", input="y\n")
    assert result.exit_code == 0, result.output
    assert fake.called("delete_acls") == [[AclBindingFilter(principal="User:bob")]]
    assert fake.acls == [a for a in ACLS if a.entry.principal != "User:bob"]
    assert "removed 2 ACLs" in result.stdout and "billing" in result.stdout
    assert "User:alice" not in result.stdout


def test_remove_with_yes_does_not_ask(fake: FakeAdmin) -> None:
    fake.acls = list(ACLS)
    result = run("acl", "remove", "--topic", "orders", "--operation", "write", "-y")
    assert result.exit_code == 0, result.output
    assert fake.called("describe_acls") == []
    assert fake.called("delete_acls") == [[AclBindingFilter(T, "orders", LIT,
                                                            operation=OP.WRITE)]]
    assert "?" not in result.stderr and "removed 1 ACL" in result.stdout


def test_remove_of_nothing_says_so_without_asking(fake: FakeAdmin) -> None:
    fake.acls = list(ACLS)
    result = run("acl", "remove", "--topic", "nothing")
    assert result.exit_code == 0
    assert "nothing removed" in result.stderr and fake.called("delete_acls") == []


# ---------------------------------------------------------------- user


def password_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "password"
    path.write_bytes(text.encode())
    return str(path)


@pytest.mark.parametrize("args", [
    ("user", "add", "alice", "--password", "s3cret"),
    ("user", "add", "alice", "s3cret"),
    ("user", "add", "alice", "-p", "s3cret"),
])
def test_a_password_is_never_an_argument(fake: FakeAdmin, args: tuple[str, ...]) -> None:
    result = run(*args, input="")
    assert result.exit_code == 2
    assert fake.calls == []


def test_user_add_reads_the_first_line_of_the_password_file(fake: FakeAdmin,
                                                             tmp_path: Path) -> None:
    path = password_file(tmp_path, "s3cret pass\r\nsecond line\n")
    result = run("user", "add", "alice", "--password-file", path)
    assert result.exit_code == 0, result.output
    assert fake.called("upsert_scram_user") == [("alice", "s3cret pass", DEFAULT_ITERATIONS)]
    assert "s3cret" not in result.output
    again = run("user", "add", "alice", "--password-file", path, "--iterations", "8192")
    assert again.exit_code == 0
    assert fake.called("upsert_scram_user")[-1] == ("alice", "s3cret pass", 8192)


def test_the_users_password_file_is_not_the_clis_own(fake: FakeAdmin,
                                                     tmp_path: Path) -> None:
    mine = tmp_path / "admin.pw"
    mine.write_text("admin-secret\n")
    alice = password_file(tmp_path, "alice-secret\n")
    result = run("--user", "admin", "--password-file", str(mine), "user", "add", "alice",
                 "--password-file", alice)
    assert result.exit_code == 0, result.output
    assert fake.called("upsert_scram_user") == [("alice", "alice-secret", DEFAULT_ITERATIONS)]
    assert fake.settings[0]["sasl_plain_username"] == "admin"
    assert fake.settings[0]["sasl_plain_password"] == "admin-secret"


@pytest.mark.parametrize(("content", "message"), [
    (None, "cannot read it"), ("\nsecond\n", "its first line is empty"), ("", "empty")])
def test_user_add_refuses_an_unusable_password_file(fake: FakeAdmin, tmp_path: Path,
                                                    content: str | None,
                                                    message: str) -> None:
    path = str(tmp_path / "missing") if content is None else password_file(tmp_path, content)
    result = run("user", "add", "alice", "--password-file", path)
    assert result.exit_code == 2 and message in result.stderr
    assert fake.calls == []


def test_user_add_prompts_hidden_twice(fake: FakeAdmin) -> None:
    result = run("user", "add", "alice", input="one\ntwo\ns3cret\ns3cret\n")
    assert result.exit_code == 0, result.output
    assert fake.called("upsert_scram_user") == [("alice", "s3cret", DEFAULT_ITERATIONS)]
    assert "do not match" in result.output
    assert "s3cret" not in result.output and "one" not in result.output


def test_user_add_without_a_password_aborts(fake: FakeAdmin) -> None:
    result = run("user", "add", "alice", input="")
    assert result.exit_code == 1 and fake.calls == []


@pytest.mark.parametrize("iterations", [MIN_ITERATIONS - 1, MAX_ITERATIONS + 1, 0])
def test_user_add_range_checks_iterations(fake: FakeAdmin, tmp_path: Path,
                                          iterations: int) -> None:
    result = run("user", "add", "alice", "--password-file",
                 password_file(tmp_path, "pw\n"), "--iterations", str(iterations))
    assert result.exit_code == 2 and "--iterations" in result.stderr
    assert fake.calls == []


@pytest.mark.parametrize(("name", "message"), [
    ("al\x07ice", "control or invisible character"), ("", "non-empty")])
def test_user_add_refuses_a_name_that_could_never_log_in(fake: FakeAdmin, tmp_path: Path,
                                                         name: str, message: str) -> None:
    result = run("user", "add", name, "--password-file", password_file(tmp_path, "pw\n"))
    assert result.exit_code == 2 and message in result.stderr
    assert fake.calls == []


def test_user_remove_asks_unless_yes(fake: FakeAdmin) -> None:
    fake.users = {"alice": 4096, "bob": 8192}
    refused = run("user", "remove", "alice", input="n\n")
    assert refused.exit_code == 1 and "Remove user alice?" in refused.stderr
    assert fake.calls == [] and "alice" in fake.users
    confirmed = run("user", "remove", "alice", input="y\n")
    assert confirmed.exit_code == 0 and "removed user alice" in confirmed.stderr
    assert fake.called("delete_scram_user") == ["alice"]
    forced = run("user", "remove", "bob", "--yes")
    assert forced.exit_code == 0 and fake.users == {}


def test_user_list_table_and_json(fake: FakeAdmin) -> None:
    fake.users = {"bob": 8192, "alice": 4096}
    table = run("user", "list")
    assert table.exit_code == 0, table.output
    rows = [line.split() for line in table.stdout.splitlines() if "SCRAM" in line]
    assert [[w for w in row if w not in "│┃|"] for row in rows] == [
        ["alice", "SCRAM-SHA-512", "4096"], ["bob", "SCRAM-SHA-512", "8192"]]
    out = run("user", "list", "--json", "bob")
    assert json.loads(out.stdout) == [
        {"name": "bob", "mechanism": "SCRAM-SHA-512", "iterations": 8192}]
    assert fake.called("describe_scram_users")[-1] == ["bob"]


# ---------------------------------------------------------------- errors and wiring


@pytest.mark.parametrize(("args", "error"), [
    (("acl", "add", "--allow-principal", "User:a", "--operation", "read", "--topic", "t"),
     ClusterAuthorizationFailedError("User:a may not ALTER the cluster")),
    (("acl", "list"), SecurityDisabledError("no authorizer is configured")),
    (("acl", "remove", "--topic", "t", "--yes"),
     TopicAuthorizationFailedError("not authorized")),
    (("user", "list"), AuthenticationError("invalid username or password")),
    (("user", "remove", "ghost", "--yes"), ResourceNotFoundError("no such user 'ghost'")),
])
def test_strand_errors_are_one_line_and_exit_1(fake: FakeAdmin, args: tuple[str, ...],
                                               error: StrandError) -> None:
    fake.fail = error
    result = run(*args)
    assert result.exit_code == 1
    assert result.stderr == f"Error: {error.code.name}: {error}\n"
    assert result.stdout == ""


def test_removing_a_missing_user_is_resource_not_found(fake: FakeAdmin) -> None:
    result = run("user", "remove", "ghost", "--yes")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: RESOURCE_NOT_FOUND: ")


def test_the_commands_make_their_admin_from_the_global_options(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    made: list[tuple[str, dict[str, Any]]] = []
    fake = FakeAdmin()

    def admin(address: str, **settings: Any) -> FakeAdmin:
        made.append((address, settings))
        return fake

    monkeypatch.setattr("strand.admin.Admin", admin)
    pw = tmp_path / "pw"
    pw.write_text("admin-secret\n")
    common = ("--bootstrap", "127.0.0.1:7099", "--user", "admin", "--password-file", str(pw))
    assert run(*common, "acl", "list").exit_code == 0
    assert run(*common, "user", "list").exit_code == 0
    assert [address for address, _ in made] == ["127.0.0.1:7099"] * 2
    for _, settings in made:
        assert settings["security_protocol"] == "SASL_PLAINTEXT"
        assert settings["sasl_plain_username"] == "admin"


def test_help_loads_no_client() -> None:
    probe = ("import sys\n"
             "from strand.cli.main import cli\n"
             "for args in (['acl', 'add', '--help'], ['acl', 'list', '--help'],\n"
             "             ['user', 'add', '--help']):\n"
             "    try:\n"
             "        cli(args)\n"
             "    except SystemExit as exc:\n"
             "        assert exc.code in (0, None), exc.code\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'grpc'\n"
             "             or m.startswith(('strand.admin', 'strand.v1'))))\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
