"""``strand quota set|remove|list`` (Kafka's ``kafka-configs.sh --entity-type users
--entity-type clients --alter --add-config 'producer_byte_rate=...'``, ``--delete-config``
and ``--describe``): the client quotas that keep one tenant from starving the rest.

A quota is set on an entity: a user (``--user NAME``), a client id (``--client-id
NAME``), or both (that user's clients with that id); either may be the default of its
type (``--user-default``, ``--client-id-default``: Kafka's ``<default>``), which applies
to every user or client id without a quota of its own. The most specific entity's
quota applies to a client (Kafka's precedence, see
:meth:`strand.security.quotas.QuotaStore.resolve`).

The quotas: ``producer_byte_rate`` and ``consumer_byte_rate`` in bytes per second,
``request_percentage`` in percent of one request thread's time (200: two threads).
A byte rate is a positive number with an optional unit: k, M, G (powers of 1000) or
Ki, Mi, Gi (powers of 1024), optionally followed by B and /s: ``500k`` is 500000,
``5MB`` 5000000, ``5MiB/s`` 5242880. ``K`` alone is refused: it is read both ways.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from strand.cli.common import err, friendly_errors, open_admin, print_table

if TYPE_CHECKING:  # clients (gRPC), rich and the quota model load when a command runs
    from rich.table import Table

    from strand.security.quota_fields import FilterComponent
    from strand.security.quotas import QuotaEntity

F = TypeVar("F", bound=Callable[..., Any])

# The quota keys (strand.security.quotas.QUOTA_KEYS), each with its option.
KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
OPTIONS = {key: "--" + key.replace("_", "-") for key in KEYS}
DEFAULT_TEXT = "<default>"  # how a default is shown (Kafka's)
COLUMNS = ("user", "client id", *KEYS)



@click.group()
def quota() -> None:
    """Set, list and remove client quotas (Kafka's kafka-configs --entity-type users/clients).

    A quota is set on a user, a client id, or both (that user's clients with that id);
    either may be the default of its type: for every user (client id) without a quota
    of its own. The most specific entity's quota applies to a client. Byte rates are
    bytes per second, with an optional unit: k, M, G (x1000) or Ki, Mi, Gi (x1024).
    """


# ---------------------------------------------------------------- values


_UNITS = {"": 1, "k": 1000, "M": 1000 ** 2, "G": 1000 ** 3,
          "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3}
_NUMBER = r"(?P<number>[-+]?(?:\d+(?:\.\d*)?|\.\d+))"  # a sign: refused as not positive
_BYTE_RATE = re.compile(_NUMBER + r"\s*(?P<unit>[A-Za-z]*?)B?(?:/s)?")
_PERCENT = re.compile(_NUMBER + r"\s*%?")
BYTE_RATE_HELP = ("k, M, G (x1000) or Ki, Mi, Gi (x1024), optionally followed by B "
                  "(500k, 5MB, 5MiB)")


def parse_byte_rate(text: str) -> float:
    """Bytes per second: a positive number, with an optional unit (see the module);
    ValueError saying what is wrong."""
    found = _BYTE_RATE.fullmatch(text.strip())
    if found is None:
        raise ValueError(f"{text!r} is not a byte rate: a positive number of bytes per "
                         f"second, with an optional unit: {BYTE_RATE_HELP}")
    unit = found["unit"]
    if unit == "K":
        raise ValueError(f"{text!r}: K is ambiguous: write k (x1000) or Ki (x1024)")
    if unit not in _UNITS:
        raise ValueError(f"{text!r}: unknown unit {unit!r}: {BYTE_RATE_HELP}")
    return _positive(float(found["number"]) * _UNITS[unit], text)


def parse_percentage(text: str) -> float:
    """Percent of one request thread's time: a positive number, an optional '%'."""
    found = _PERCENT.fullmatch(text.strip())
    if found is None:
        raise ValueError(f"{text!r} is not a percentage: a positive number (100: one "
                         "thread's time, 200: two)")
    return _positive(float(found["number"]), text)


def _positive(number: float, text: str) -> float:
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{text!r}: must be positive (and finite)")
    return number


def _converter(parse: Callable[[str], float]
               ) -> Callable[[click.Context, click.Parameter, str | None], float | None]:
    """An option's callback: ``parse`` its value, if given (a plain callback, not a
    ParamType: click's is generic only from 8.2)."""

    def convert(ctx: click.Context, param: click.Parameter, value: str | None
                ) -> float | None:
        if value is None:
            return None
        try:
            return parse(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx, param) from None

    return convert


def number_text(value: float) -> str:
    """A quota as shown: whole numbers without '.0'."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e18 else repr(value)


def _json_number(value: float) -> int | float:
    return int(value) if value.is_integer() and abs(value) < 2 ** 53 else value


# ---------------------------------------------------------------- entities


def _entity_options(filtering: bool = False) -> Callable[[F], F]:
    """--user/--user-default and --client-id/--client-id-default; ``filtering``: with
    --any-user and --any-client-id, as filters."""
    if filtering:
        helps = ("Only entities of user NAME.", "Only entities of the default user.",
                 "Only entities with a user (any, or the default).",
                 "Only entities of client id NAME.", "Only entities of the default client id.",
                 "Only entities with a client id (any, or the default).")
    else:
        helps = ("The user NAME (Kafka's --entity-type users --entity-name NAME).",
                 "The default user: every user without a quota of its own.",
                 "",
                 "The client id NAME (Kafka's --entity-type clients --entity-name NAME); "
                 "with --user: that user's clients with this id.",
                 "The default client id: every client id without a quota of its own.",
                 "")
    options = [
        click.option("--user", default=None, metavar="NAME", help=helps[0]),
        click.option("--user-default", is_flag=True, help=helps[1]),
        click.option("--client-id", default=None, metavar="NAME", help=helps[3]),
        click.option("--client-id-default", is_flag=True, help=helps[4]),
    ]
    if filtering:
        options.insert(2, click.option("--any-user", is_flag=True, help=helps[2]))
        options.append(click.option("--any-client-id", is_flag=True, help=helps[5]))

    def apply(func: F) -> F:
        for option in reversed(options):
            func = option(func)
        return func

    return apply


def _one(kind: str, named: Sequence[tuple[str, bool]]) -> None:
    given = [option for option, on in named if on]
    if len(given) > 1:
        raise click.UsageError(f"{' and '.join(given)} together: give one (each names "
                               f"the {kind})")


def _check_name(name: str | None, option: str) -> None:
    if name == DEFAULT_TEXT:
        raise click.UsageError(f"{option} {DEFAULT_TEXT!r}: for the default give "
                               f"{option}-default")


def build_entity(user: str | None, user_default: bool, client_id: str | None,
                 client_id_default: bool) -> QuotaEntity:
    """The entity the options name: a user, a client id or both, each a name or the
    default."""
    from strand.security.quotas import ABSENT, DEFAULT, QuotaEntity

    _one("user", [("--user", user is not None), ("--user-default", user_default)])
    _one("client id", [("--client-id", client_id is not None),
                       ("--client-id-default", client_id_default)])
    if user is None and not user_default and client_id is None and not client_id_default:
        raise click.UsageError("name the entity: --user NAME or --user-default, "
                               "--client-id NAME or --client-id-default, or a user and a "
                               "client id (that user's clients with that id)")
    _check_name(user, "--user")
    _check_name(client_id, "--client-id")
    with _quota_errors():
        return QuotaEntity(DEFAULT if user_default else ABSENT if user is None else user,
                           DEFAULT if client_id_default
                           else ABSENT if client_id is None else client_id)


def build_components(user: str | None, user_default: bool, any_user: bool,
                     client_id: str | None, client_id_default: bool,
                     any_client_id: bool) -> list[FilterComponent]:
    """Kafka's DescribeClientQuotas filter of ``list``'s options: one component per
    entity type named (none: every entity)."""
    from strand.security.quota_fields import FilterComponent
    from strand.security.quotas import CLIENT_ID, USER

    _one("user", [("--user", user is not None), ("--user-default", user_default),
                  ("--any-user", any_user)])
    _one("client id", [("--client-id", client_id is not None),
                       ("--client-id-default", client_id_default),
                       ("--any-client-id", any_client_id)])
    _check_name(user, "--user")
    _check_name(client_id, "--client-id")
    components: list[FilterComponent] = []
    for kind, option, name, default, any_ in (
            (USER, "--user", user, user_default, any_user),
            (CLIENT_ID, "--client-id", client_id, client_id_default, any_client_id)):
        if name == "":
            raise click.UsageError(f"{option} '': an empty name cannot be matched; "
                                   f"--any-{option[2:]} lists every one")
        if name is not None:
            components.append(FilterComponent(kind, "EXACT", name))
        elif default:
            components.append(FilterComponent(kind, "DEFAULT"))
        elif any_:
            components.append(FilterComponent(kind, "ANY"))
    with _quota_errors():
        for component in components:
            component.validate()
    return components


def _exactly(entity: QuotaEntity) -> list[FilterComponent]:
    """A strict filter that matches ``entity`` (and, for a part named '', which no
    EXACT match can name, the others of that type: the caller picks ``entity``)."""
    from strand.security.quota_fields import FilterComponent

    return [FilterComponent(kind, "DEFAULT") if name is None
            else FilterComponent(kind, "EXACT", name) if name
            else FilterComponent(kind, "ANY") for kind, name in entity.to_fields()]


@contextmanager
def _quota_errors() -> Iterator[None]:
    """An entity or a quota the cluster would refuse: a usage error saying why."""
    from strand.security.quotas import InvalidQuotaError

    try:
        yield
    except InvalidQuotaError as exc:
        raise click.UsageError(str(exc)) from None


def _values_text(values: Mapping[str, float]) -> str:
    return ", ".join(f"{key}={number_text(value)}" for key, value in values.items())


# ---------------------------------------------------------------- set


@quota.command(name="set")
@_entity_options()
@click.option("--producer-byte-rate", default=None,
              callback=_converter(parse_byte_rate), metavar="BYTES_PER_S",
              help="The most bytes per second the entity's producers may send: a number, "
                   f"with an optional unit: {BYTE_RATE_HELP}.")
@click.option("--consumer-byte-rate", default=None,
              callback=_converter(parse_byte_rate), metavar="BYTES_PER_S",
              help="The most bytes per second the entity's consumers may fetch (units as "
                   "--producer-byte-rate).")
@click.option("--request-percentage", default=None,
              callback=_converter(parse_percentage), metavar="PCT",
              help="The most request-handling time the entity may use, in percent of one "
                   "thread's time (200: two threads).")
@click.option("--dry-run", is_flag=True,
              help="Have the cluster check the quotas, and change nothing.")
@click.pass_context
@friendly_errors
def set_(ctx: click.Context, /, user: str | None, user_default: bool, client_id: str | None,
         client_id_default: bool, producer_byte_rate: float | None,
         consumer_byte_rate: float | None, request_percentage: float | None,
         dry_run: bool) -> None:
    """Set quotas of an entity (a user, a client id, or both); the entity's other
    quotas stay as they are.

    \b
    strand quota set --user alice --producer-byte-rate 1MiB --consumer-byte-rate 2MiB
    strand quota set --user-default --request-percentage 50
    strand quota set --user alice --client-id etl --consumer-byte-rate 500k
    strand quota set --client-id-default --producer-byte-rate 10MB --dry-run
    """
    from strand.security.quotas import QuotaValues

    entity = build_entity(user, user_default, client_id, client_id_default)
    given = dict(zip(KEYS, (producer_byte_rate, consumer_byte_rate, request_percentage),
                     strict=True))
    values = {key: value for key, value in given.items() if value is not None}
    if not values:
        raise click.UsageError("name a quota to set: --producer-byte-rate BYTES_PER_S, "
                               "--consumer-byte-rate BYTES_PER_S or --request-percentage PCT")
    with _quota_errors():
        QuotaValues().altered(values.items())  # the checks the cluster makes
    with open_admin(ctx) as admin, _quota_errors():
        admin.alter_client_quotas(entity, set=values, validate_only=dry_run)
    done = "dry run, nothing changed: would set" if dry_run else "set"
    err.print(f"{done} {_values_text(values)} on {entity}", markup=False)


# ---------------------------------------------------------------- remove


@quota.command()
@_entity_options()
@click.option("--producer-byte-rate", "producer", is_flag=True,
              help="Remove the producer_byte_rate quota.")
@click.option("--consumer-byte-rate", "consumer", is_flag=True,
              help="Remove the consumer_byte_rate quota.")
@click.option("--request-percentage", "request", is_flag=True,
              help="Remove the request_percentage quota.")
@click.option("--all", "all_", is_flag=True, help="Remove every quota set on the entity.")
@click.option("--dry-run", is_flag=True,
              help="Have the cluster check the removal, and change nothing.")
@click.pass_context
@friendly_errors
def remove(ctx: click.Context, /, user: str | None, user_default: bool,
           client_id: str | None, client_id_default: bool, producer: bool, consumer: bool,
           request: bool, all_: bool, dry_run: bool) -> None:
    """Remove quotas of an entity (a user, a client id, or both): then the next
    entity in Kafka's precedence decides, if any. Removing a quota that is not set
    changes nothing.

    \b
    strand quota remove --user alice --producer-byte-rate
    strand quota remove --user alice --client-id etl --all
    """
    entity = build_entity(user, user_default, client_id, client_id_default)
    named = [key for key, on in zip(KEYS, (producer, consumer, request), strict=True) if on]
    if all_ and named:
        raise click.UsageError(f"--all removes every quota: leave out "
                               f"{' and '.join(OPTIONS[key] for key in named)} (or --all)")
    if not all_ and not named:
        raise click.UsageError("name the quotas to remove: --producer-byte-rate, "
                               "--consumer-byte-rate, --request-percentage, or --all")
    with open_admin(ctx) as admin:
        if all_:
            found = {key for listed, values in admin.describe_client_quotas(
                _exactly(entity), strict=True) if listed == entity for key in values}
            named = [key for key in KEYS if key in found]
            if not named:
                err.print(f"no quotas set on {entity}: nothing removed", markup=False)
                return
        with _quota_errors():
            admin.alter_client_quotas(entity, remove=named, validate_only=dry_run)
    done = "dry run, nothing changed: would remove" if dry_run else "removed"
    err.print(f"{done} {', '.join(named)} of {entity}", markup=False)


# ---------------------------------------------------------------- list


@quota.command(name="list")
@_entity_options(filtering=True)
@click.option("--strict", is_flag=True,
              help="Only entities with no part besides those filtered (--user alice: "
                   "alice's own quotas, not those of her client ids).")
@click.option("--json", "as_json", is_flag=True,
              help="A JSON array, one object per entity: user and client_id (a name, "
                   f"{DEFAULT_TEXT!r} or null when not part of it), and quotas.")
@click.pass_context
@friendly_errors
def list_(ctx: click.Context, /, user: str | None, user_default: bool, any_user: bool,
          client_id: str | None, client_id_default: bool, any_client_id: bool, strict: bool,
          as_json: bool) -> None:
    """List the entities with quotas and their quotas (all, or those the options match;
    with both a user and a client-id option, entities matching both).

    \b
    strand quota list
    strand quota list --user alice --strict
    strand quota list --any-user --client-id-default --json
    """
    components = build_components(user, user_default, any_user, client_id,
                                  client_id_default, any_client_id)
    if strict and not components:
        raise click.UsageError("--strict needs a filter: --user, --user-default, "
                               "--any-user, --client-id, --client-id-default or "
                               "--any-client-id")
    with open_admin(ctx) as admin:
        found = sorted(admin.describe_client_quotas(components, strict=strict),
                       key=lambda entry: entry[0])
    if as_json:
        click.echo(json.dumps([quota_json(entity, values) for entity, values in found]))
    elif found:
        print_table(_table(found))
    else:
        err.print("no quotas match" if components else "no quotas set")


def _name(name: object) -> str | None:
    """An entity's part as ``--json`` gives it."""
    from strand.security.quotas import Absent

    return None if isinstance(name, Absent) else DEFAULT_TEXT if name is None else str(name)


def quota_json(entity: QuotaEntity, values: Mapping[str, float]) -> dict[str, Any]:
    """One entity as ``--json`` prints it."""
    return {"user": _name(entity.user), "client_id": _name(entity.client_id),
            "quotas": {key: _json_number(values[key])
                       for key in sorted(values, key=_key_order)}}


def _key_order(key: str) -> tuple[int, str]:
    return (KEYS.index(key), "") if key in KEYS else (len(KEYS), key)


def _table(found: Sequence[tuple[QuotaEntity, Mapping[str, float]]]) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table()
    for column in COLUMNS:
        table.add_column(column, overflow="fold",
                         justify="right" if column in KEYS else "left")
    for entity, values in found:
        # Text: a name is shown as it is, never read as rich markup
        table.add_row(*(Text(_name(part) or "") for part in (entity.user, entity.client_id)),
                      *(number_text(values[key]) if key in values else "" for key in KEYS))
    return table
