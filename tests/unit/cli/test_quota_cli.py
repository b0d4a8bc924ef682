"""``strand quota set|remove|list`` against a fake Admin: the entity each combination
of options names, the byte rates and their units, what is refused before anything is
sent, removing some or all quotas of an entity, the filters ``list`` sends, its table
and JSON, the root's --user beside the commands' own, and errors as one line."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

import strand.cli.quota as quota_cli
from strand.cli.common import security
from strand.cli.main import cli
from strand.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    SecurityDisabledError,
    StrandError,
)
from strand.security.quota_fields import FilterComponent, filter_matches
from strand.security.quotas import (
    ABSENT,
    DEFAULT,
    QUOTA_KEYS,
    InvalidQuotaError,
    QuotaEntity,
    QuotaValues,
)

REPO = Path(__file__).resolve().parents[3]
P, C, R = QUOTA_KEYS  # producer_byte_rate, consumer_byte_rate, request_percentage
ALICE = QuotaEntity(user="alice")


class FakeAdmin:
    """The Admin's client-quota calls over an in-memory store; records every call."""

    def __init__(self) -> None:
        self.quotas: dict[QuotaEntity, dict[str, float]] = {}
        self.calls: list[tuple[str, Any]] = []
        self.fail: Exception | None = None
        self.settings: list[dict[str, Any]] = []

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def called(self, name: str) -> list[Any]:
        return [argument for called, argument in self.calls if called == name]

    def alter_client_quotas(self, entity: QuotaEntity, set: Mapping[str, float] | None = None,
                            remove: Sequence[str] = (), validate_only: bool = False) -> None:
        self.calls.append(("alter_client_quotas",
                           (entity, dict(set or {}), list(remove), validate_only)))
        if self.fail is not None:
            raise self.fail
        ops = [*(set or {}).items(), *((key, None) for key in remove)]
        values = QuotaValues(**self.quotas.get(entity, {})).altered(ops)  # as the Admin
        if not validate_only:
            self.quotas[entity] = values.as_dict()
            if values.is_empty():
                del self.quotas[entity]

    def describe_client_quotas(self, components: Sequence[FilterComponent] = (),
                               strict: bool = False
                               ) -> list[tuple[QuotaEntity, dict[str, float]]]:
        self.calls.append(("describe_client_quotas", (list(components), strict)))
        if self.fail is not None:
            raise self.fail
        for component in components:
            component.validate()
        return [(entity, dict(values)) for entity, values in self.quotas.items()
                if filter_matches(entity, components, strict)]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    admin = FakeAdmin()

    def open_admin(ctx: click.Context) -> FakeAdmin:
        admin.settings.append(dict(security(ctx)))
        return admin

    monkeypatch.setattr(quota_cli, "open_admin", open_admin)
    return admin


def run(*args: str, env: Mapping[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env)


def altered(fake: FakeAdmin, *args: str) -> tuple[QuotaEntity, dict[str, float], list[str],
                                                     bool]:
    """What one ``strand quota ARGS`` sent, in its one alter_client_quotas call."""
    result = run("quota", *args)
    assert result.exit_code == 0, result.output
    (call,) = fake.called("alter_client_quotas")
    return call  # type: ignore[no-any-return]


def refused(fake: FakeAdmin, *args: str) -> str:
    """The error of ``strand quota ARGS``, which must be a usage error sending nothing."""
    result = run("quota", *args)
    assert result.exit_code == 2, result.output
    assert fake.calls == []
    assert result.stdout == ""
    return result.stderr


# ---------------------------------------------------------------- set: entities


@pytest.mark.parametrize(("args", "entity"), [
    (("--user", "alice"), QuotaEntity(user="alice")),
    (("--user-default",), QuotaEntity(user=DEFAULT)),
    (("--client-id", "etl"), QuotaEntity(client_id="etl")),
    (("--client-id-default",), QuotaEntity(client_id=DEFAULT)),
    (("--user", "alice", "--client-id", "etl"), QuotaEntity("alice", "etl")),
    (("--user", "alice", "--client-id-default"), QuotaEntity("alice", DEFAULT)),
    (("--user-default", "--client-id", "etl"), QuotaEntity(DEFAULT, "etl")),
    (("--user-default", "--client-id-default"), QuotaEntity(DEFAULT, DEFAULT)),
    (("--client-id", ""), QuotaEntity(client_id="")),  # Kafka clients may have no id
])
def test_set_names_the_entity_of_the_options(fake: FakeAdmin, args: tuple[str, ...],
                                             entity: QuotaEntity) -> None:
    assert altered(fake, "set", *args, "--producer-byte-rate", "1024") == (
        entity, {P: 1024.0}, [], False)
    assert fake.quotas == {entity: {P: 1024.0}}


def test_a_user_part_and_the_default_are_not_the_same_entity(fake: FakeAdmin) -> None:
    """--user-default is the default (None), never a user named '<default>' nor an
    entity without a user."""
    (entity, *_) = altered(fake, "set", "--user-default", "--client-id", "etl",
                           "--request-percentage", "10")
    assert entity.user is DEFAULT and entity.user is not ABSENT and entity.client_id == "etl"


@pytest.mark.parametrize(("args", "message"), [
    ((), "name the entity: --user NAME or --user-default"),
    (("--user", "alice", "--user-default"), "--user and --user-default together"),
    (("--client-id", "etl", "--client-id-default"),
     "--client-id and --client-id-default together"),
    (("--user", "<default>"), "for the default give --user-default"),
    (("--client-id", "<default>"), "for the default give --client-id-default"),
    (("--user", "al\udcffice"), "must be valid unicode"),  # InvalidQuotaError, as usage
])
def test_set_refuses_an_entity(fake: FakeAdmin, args: tuple[str, ...], message: str) -> None:
    assert message in refused(fake, "set", *args, "--producer-byte-rate", "1k")


# ---------------------------------------------------------------- set: quotas


@pytest.mark.parametrize(("text", "rate"), [
    ("1024", 1024.0), ("1", 1.0), ("2.5", 2.5), (".5", 0.5), ("+7", 7.0),
    ("500k", 500_000.0), ("500kB", 500_000.0), ("5M", 5_000_000.0), ("5MB", 5_000_000.0),
    ("2G", 2e9), ("2GB/s", 2e9), ("100B", 100.0), ("100/s", 100.0),
    ("1Ki", 1024.0), ("1.5KiB", 1536.0), ("5Mi", 5 * 2 ** 20), ("5MiB", 5 * 2 ** 20),
    ("5MiB/s", 5 * 2 ** 20), ("2GiB", 2 * 2 ** 30), (" 5 MiB ", 5 * 2 ** 20),
])
def test_byte_rates_take_decimal_and_binary_units(fake: FakeAdmin, text: str,
                                                  rate: float) -> None:
    assert quota_cli.parse_byte_rate(text) == rate
    (_, values, _, _) = altered(fake, "set", "--user", "alice", "--consumer-byte-rate", text)
    assert values == {C: rate}


def test_set_sends_every_quota_given_and_says_what_it_set(fake: FakeAdmin) -> None:
    fake.quotas = {ALICE: {R: 30.0}}
    result = run("quota", "set", "--user", "alice", "--producer-byte-rate", "1MiB",
                 "--consumer-byte-rate", "2048", "--request-percentage", "250%")
    assert result.exit_code == 0, result.output
    assert fake.called("alter_client_quotas") == [
        (ALICE, {P: 1048576.0, C: 2048.0, R: 250.0}, [], False)]
    assert result.stderr == ("set producer_byte_rate=1048576, consumer_byte_rate=2048, "
                             "request_percentage=250 on user=alice\n")
    assert result.stdout == ""


def test_set_leaves_the_other_quotas_of_the_entity(fake: FakeAdmin) -> None:
    fake.quotas = {ALICE: {R: 30.0, C: 10.0}}
    assert altered(fake, "set", "--user", "alice", "--consumer-byte-rate", "20")[1] == {C: 20.0}
    assert fake.quotas == {ALICE: {R: 30.0, C: 20.0}}


def test_set_dry_run_is_validate_only(fake: FakeAdmin) -> None:
    result = run("quota", "set", "--user-default", "--client-id", "etl",
                 "--request-percentage", "12.5", "--dry-run")
    assert result.exit_code == 0, result.output
    assert fake.called("alter_client_quotas") == [
        (QuotaEntity(DEFAULT, "etl"), {R: 12.5}, [], True)]
    assert fake.quotas == {}
    assert result.stderr == ("dry run, nothing changed: would set request_percentage=12.5 "
                             "on user=<default>, client-id=etl\n")


@pytest.mark.parametrize(("args", "message"), [
    ((), "name a quota to set"),
    (("--producer-byte-rate", "0"), "'0': must be positive"),
    (("--producer-byte-rate", "0k"), "'0k': must be positive"),
    (("--consumer-byte-rate", "-5"), "'-5': must be positive"),
    (("--consumer-byte-rate", "-1MiB"), "must be positive"),
    (("--request-percentage", "0"), "'0': must be positive"),
    (("--request-percentage", "-10%"), "must be positive"),
    (("--producer-byte-rate", "5K"), "K is ambiguous: write k (x1000) or Ki (x1024)"),
    (("--producer-byte-rate", "5KB"), "K is ambiguous"),
    (("--producer-byte-rate", "5kb"), "unknown unit 'kb'"),  # b: bits
    (("--producer-byte-rate", "5m"), "unknown unit 'm'"),  # milli
    (("--producer-byte-rate", "5T"), "unknown unit 'T'"),
    (("--producer-byte-rate", "5mib"), "unknown unit 'mib'"),
    (("--producer-byte-rate", "1e6"), "is not a byte rate"),
    (("--producer-byte-rate", "inf"), "is not a byte rate"),
    (("--producer-byte-rate", "nan"), "is not a byte rate"),
    (("--producer-byte-rate", ""), "is not a byte rate"),
    (("--producer-byte-rate", "5 M B"), "is not a byte rate"),
    (("--producer-byte-rate", "9" * 400), "must be positive (and finite)"),
    (("--request-percentage", "5k"), "is not a percentage"),
    (("--request-percentage", "inf"), "is not a percentage"),
])
def test_set_refuses_a_quota(fake: FakeAdmin, args: tuple[str, ...], message: str) -> None:
    assert message in refused(fake, "set", "--user", "alice", *args)


def test_an_invalid_quota_error_is_a_usage_error(fake: FakeAdmin) -> None:
    fake.fail = InvalidQuotaError("quota producer_byte_rate is too large: 1e400")
    result = run("quota", "set", "--user", "alice", "--producer-byte-rate", "1")
    assert result.exit_code == 2
    assert result.stderr.endswith(
        "Error: quota producer_byte_rate is too large: 1e400\n")


# ---------------------------------------------------------------- remove


def test_remove_sends_the_quotas_named(fake: FakeAdmin) -> None:
    fake.quotas = {ALICE: {P: 1.0, C: 2.0, R: 3.0}}
    result = run("quota", "remove", "--user", "alice", "--request-percentage",
                 "--producer-byte-rate")
    assert result.exit_code == 0, result.output
    assert fake.calls == [("alter_client_quotas",
                           (ALICE, {}, [P, R], False))]  # no describe needed
    assert fake.quotas == {ALICE: {C: 2.0}}
    assert result.stderr == "removed producer_byte_rate, request_percentage of user=alice\n"


def test_remove_all_removes_what_the_entity_has_and_nothing_else(fake: FakeAdmin) -> None:
    mine = QuotaEntity("alice", "etl")
    others = {ALICE: {P: 1.0}, QuotaEntity("alice", DEFAULT): {C: 2.0},
              QuotaEntity(DEFAULT, "etl"): {R: 3.0}, QuotaEntity(client_id="etl"): {P: 4.0}}
    fake.quotas = {mine: {R: 5.0, P: 6.0}, **others}
    result = run("quota", "remove", "--user", "alice", "--client-id", "etl", "--all")
    assert result.exit_code == 0, result.output
    assert fake.called("describe_client_quotas") == [
        ([FilterComponent("user", "EXACT", "alice"),
          FilterComponent("client-id", "EXACT", "etl")], True)]
    assert fake.called("alter_client_quotas") == [(mine, {}, [P, R], False)]
    assert fake.quotas == others
    assert result.stderr == ("removed producer_byte_rate, request_percentage of "
                             "user=alice, client-id=etl\n")


@pytest.mark.parametrize(("args", "entity", "components"), [
    (("--user-default",), QuotaEntity(user=DEFAULT), [FilterComponent("user", "DEFAULT")]),
    (("--user-default", "--client-id-default"), QuotaEntity(DEFAULT, DEFAULT),
     [FilterComponent("user", "DEFAULT"), FilterComponent("client-id", "DEFAULT")]),
    # an EXACT match cannot name '': any client id, then this entity picked out
    (("--client-id", ""), QuotaEntity(client_id=""), [FilterComponent("client-id", "ANY")]),
])
def test_remove_all_of_defaults_and_empty_names(fake: FakeAdmin, args: tuple[str, ...],
                                                entity: QuotaEntity,
                                                components: list[FilterComponent]) -> None:
    # the others match a filter with an ANY component: their quotas are not removed
    fake.quotas = {entity: {C: 1.0}, QuotaEntity(client_id="x"): {P: 2.0},
                   QuotaEntity("bob", "x"): {R: 3.0}, QuotaEntity(user="bob"): {P: 4.0}}
    result = run("quota", "remove", *args, "--all")
    assert result.exit_code == 0, result.output
    assert fake.called("describe_client_quotas") == [(components, True)]
    assert fake.called("alter_client_quotas") == [(entity, {}, [C], False)]
    assert entity not in fake.quotas and len(fake.quotas) == 3


def test_remove_all_of_an_entity_without_quotas_sends_no_change(fake: FakeAdmin) -> None:
    fake.quotas = {QuotaEntity("alice", "etl"): {P: 1.0}}
    result = run("quota", "remove", "--user", "alice", "--all")
    assert result.exit_code == 0, result.output
    assert fake.called("alter_client_quotas") == []
    assert result.stderr == "no quotas set on user=alice: nothing removed\n"


def test_remove_dry_run_is_validate_only(fake: FakeAdmin) -> None:
    fake.quotas = {ALICE: {P: 1.0, C: 2.0}}
    result = run("quota", "remove", "--user", "alice", "--all", "--dry-run")
    assert result.exit_code == 0, result.output
    assert fake.called("alter_client_quotas") == [(ALICE, {}, [P, C], True)]
    assert fake.quotas == {ALICE: {P: 1.0, C: 2.0}}
    assert result.stderr.startswith("dry run, nothing changed: would remove")


@pytest.mark.parametrize(("args", "message"), [
    (("--user", "alice"), "name the quotas to remove"),
    (("--user", "alice", "--all", "--consumer-byte-rate"),
     "--all removes every quota: leave out --consumer-byte-rate"),
    (("--all",), "name the entity"),
    (("--user", "alice", "--user-default", "--all"), "--user and --user-default together"),
    (("--user", "alice", "--producer-byte-rate", "1k"), "Got unexpected extra argument"),
])
def test_remove_refuses(fake: FakeAdmin, args: tuple[str, ...], message: str) -> None:
    assert message in refused(fake, "remove", *args)


# ---------------------------------------------------------------- list


U, CID = "user", "client-id"


@pytest.mark.parametrize(("args", "components", "strict"), [
    ((), [], False),
    (("--user", "alice"), [FilterComponent(U, "EXACT", "alice")], False),
    (("--user-default",), [FilterComponent(U, "DEFAULT")], False),
    (("--any-user",), [FilterComponent(U, "ANY")], False),
    (("--client-id", "etl"), [FilterComponent(CID, "EXACT", "etl")], False),
    (("--client-id-default",), [FilterComponent(CID, "DEFAULT")], False),
    (("--any-client-id",), [FilterComponent(CID, "ANY")], False),
    (("--user", "alice", "--client-id-default"),
     [FilterComponent(U, "EXACT", "alice"), FilterComponent(CID, "DEFAULT")], False),
    (("--any-client-id", "--user-default", "--strict"),
     [FilterComponent(U, "DEFAULT"), FilterComponent(CID, "ANY")], True),
    (("--user", "alice", "--strict"), [FilterComponent(U, "EXACT", "alice")], True),
])
def test_list_sends_the_filter_of_the_options(fake: FakeAdmin, args: tuple[str, ...],
                                              components: list[FilterComponent],
                                              strict: bool) -> None:
    result = run("quota", "list", *args)
    assert result.exit_code == 0, result.output
    assert fake.calls == [("describe_client_quotas", (components, strict))]


@pytest.mark.parametrize(("args", "message"), [
    (("--user", "alice", "--any-user"), "--user and --any-user together"),
    (("--user-default", "--any-user"), "--user-default and --any-user together"),
    (("--client-id", "x", "--client-id-default", "--any-client-id"),
     "--client-id and --client-id-default and --any-client-id together"),
    (("--strict",), "--strict needs a filter"),
    (("--user", ""), "an empty name cannot be matched; --any-user lists every one"),
    (("--client-id", "<default>"), "for the default give --client-id-default"),
])
def test_list_refuses_bad_filters(fake: FakeAdmin, args: tuple[str, ...],
                                  message: str) -> None:
    assert message in refused(fake, "list", *args)


def entities() -> dict[QuotaEntity, dict[str, float]]:
    return {QuotaEntity(client_id=DEFAULT): {C: 1000.0},
            QuotaEntity("bob", "etl"): {P: 1.5, R: 200.0},
            ALICE: {P: 1048576.0, C: 2097152.0, R: 50.0},
            QuotaEntity(DEFAULT, DEFAULT): {R: 10.0},
            QuotaEntity(user=DEFAULT): {C: 5e6}}


def table_rows(output: str) -> list[list[str]]:
    """The cells of each row of a rich table (header included), empty ones kept."""
    return [[cell.strip() for cell in line.split(sep)[1:-1]]
            for line in output.splitlines() for sep in ("│", "┃") if sep in line]


def test_list_prints_a_table_sorted_by_entity(fake: FakeAdmin) -> None:
    fake.quotas = entities()
    result = run("quota", "list")
    assert result.exit_code == 0, result.output
    assert table_rows(result.stdout) == [
        ["user", "client id", P, C, R],
        ["", "<default>", "", "1000", ""],
        ["<default>", "", "", "5000000", ""],
        ["<default>", "<default>", "", "", "10"],
        ["alice", "", "1048576", "2097152", "50"],
        ["bob", "etl", "1.5", "", "200"],
    ]


def test_list_table_shows_names_as_they_are(fake: FakeAdmin) -> None:
    fake.quotas = {QuotaEntity("[bold]eve[/bold]", "a:b"): {P: 1.0}}
    result = run("quota", "list")
    assert table_rows(result.stdout)[1] == ["[bold]eve[/bold]", "a:b", "1", "", ""]


def test_list_json_is_one_object_per_entity(fake: FakeAdmin) -> None:
    fake.quotas = entities()
    result = run("quota", "list", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {"user": None, "client_id": "<default>", "quotas": {C: 1000}},
        {"user": "<default>", "client_id": None, "quotas": {C: 5000000}},
        {"user": "<default>", "client_id": "<default>", "quotas": {R: 10}},
        {"user": "alice", "client_id": None,
         "quotas": {P: 1048576, C: 2097152, R: 50}},
        {"user": "bob", "client_id": "etl", "quotas": {P: 1.5, R: 200}},
    ]
    assert result.stdout.count("\n") == 1 and "1048576," in result.stdout  # whole: no .0
    assert result.stderr == ""


def test_list_json_of_a_filter(fake: FakeAdmin) -> None:
    fake.quotas = entities()
    result = run("quota", "list", "--user-default", "--json")
    assert [(e["user"], e["client_id"]) for e in json.loads(result.stdout)] == [
        ("<default>", None), ("<default>", "<default>")]
    strict = run("quota", "list", "--user-default", "--strict", "--json")
    assert [(e["user"], e["client_id"]) for e in json.loads(strict.stdout)] == [
        ("<default>", None)]


def test_list_of_nothing_says_so(fake: FakeAdmin) -> None:
    empty = run("quota", "list")
    assert empty.exit_code == 0 and empty.stdout == "" and empty.stderr == "no quotas set\n"
    fake.quotas = entities()
    none = run("quota", "list", "--user", "carol")
    assert none.exit_code == 0 and none.stdout == "" and none.stderr == "no quotas match\n"
    as_json = run("quota", "list", "--user", "carol", "--json")
    assert as_json.exit_code == 0 and json.loads(as_json.stdout) == []


# ---------------------------------------------------------------- the root's --user


@pytest.fixture
def admin_password(tmp_path: Path) -> str:
    path = tmp_path / "admin.pw"
    path.write_text("admin-secret\n")
    return str(path)


@pytest.mark.parametrize("command", [
    ("set", "--user", "alice", "--producer-byte-rate", "1k"),
    ("remove", "--user", "alice", "--producer-byte-rate"),
])
def test_the_roots_user_authenticates_the_commands_user_is_the_entity(
        fake: FakeAdmin, admin_password: str, command: tuple[str, ...]) -> None:
    result = run("--user", "admin", "--password-file", admin_password, "quota", *command)
    assert result.exit_code == 0, result.output
    ((entity, *_),) = fake.called("alter_client_quotas")
    assert entity == ALICE
    (settings,) = fake.settings
    assert settings["sasl_plain_username"] == "admin"
    assert settings["sasl_plain_password"] == "admin-secret"


def test_the_roots_user_and_a_list_filter(fake: FakeAdmin, admin_password: str) -> None:
    result = run("--user", "admin", "--password-file", admin_password, "quota", "list",
                 "--user", "alice")
    assert result.exit_code == 0, result.output
    assert fake.called("describe_client_quotas") == [
        ([FilterComponent(U, "EXACT", "alice")], False)]
    assert fake.settings[0]["sasl_plain_username"] == "admin"


def test_strand_user_from_the_environment_is_not_the_entity(fake: FakeAdmin) -> None:
    env = {"STRAND_USER": "admin", "STRAND_PASSWORD": "admin-secret"}
    result = run("quota", "set", "--client-id", "etl", "--producer-byte-rate", "1k", env=env)
    assert result.exit_code == 0, result.output
    assert fake.called("alter_client_quotas")[0][0] == QuotaEntity(client_id="etl")
    assert fake.settings[0]["sasl_plain_username"] == "admin"


def test_the_commands_user_alone_does_not_authenticate(fake: FakeAdmin) -> None:
    result = run("quota", "set", "--user", "alice", "--producer-byte-rate", "1k",
                 env={"STRAND_USER": None, "STRAND_PASSWORD": None})
    assert result.exit_code == 0, result.output
    assert "sasl_plain_username" not in fake.settings[0]


def test_the_roots_user_goes_before_the_command(fake: FakeAdmin) -> None:
    """The group takes no --user: between `quota` and `set` it is not the root's."""
    result = run("quota", "--user", "admin", "set", "--user", "alice",
                 "--producer-byte-rate", "1k")
    assert result.exit_code == 2
    assert "No such option" in result.stderr and "--user" in result.stderr
    assert fake.calls == []


# ---------------------------------------------------------------- errors and wiring


@pytest.mark.parametrize(("args", "error"), [
    (("set", "--user", "a", "--producer-byte-rate", "1"),
     ClusterAuthorizationFailedError("User:a may not ALTER_CONFIGS the cluster")),
    (("remove", "--user", "a", "--all"), SecurityDisabledError("no quotas here")),
    (("list",), InvalidRequestError("bad filter")),
])
def test_strand_errors_are_one_line_and_exit_1(fake: FakeAdmin, args: tuple[str, ...],
                                               error: StrandError) -> None:
    fake.fail = error
    result = run("quota", *args)
    assert result.exit_code == 1
    assert result.stderr == f"Error: {error.code.name}: {error}\n"
    assert result.stdout == ""


def test_the_commands_make_their_admin_from_the_global_options(
        monkeypatch: pytest.MonkeyPatch, admin_password: str) -> None:
    made: list[tuple[str, dict[str, Any]]] = []

    def admin(address: str, **settings: Any) -> FakeAdmin:
        made.append((address, settings))
        return FakeAdmin()

    monkeypatch.setattr("strand.admin.Admin", admin)
    result = run("--bootstrap", "127.0.0.1:7099", "--user", "admin", "--password-file",
                 admin_password, "quota", "list")
    assert result.exit_code == 0, result.output
    ((address, settings),) = made
    assert address == "127.0.0.1:7099"
    assert settings["security_protocol"] == "SASL_PLAINTEXT"
    assert settings["sasl_plain_username"] == "admin"


def test_help_loads_no_client() -> None:
    probe = ("import sys\n"
             "from strand.cli.main import cli\n"
             "for args in (['quota', '--help'], ['quota', 'set', '--help'],\n"
             "             ['quota', 'remove', '--help'], ['quota', 'list', '--help']):\n"
             "    try:\n"
             "        cli(args)\n"
             "    except SystemExit as exc:\n"
             "        assert exc.code in (0, None), exc.code\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'rich')\n"
             "             or m.startswith(('strand.admin', 'strand.v1'))))\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
