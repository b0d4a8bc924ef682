"""``strand acl add|list|remove`` (Kafka's kafka-acls.sh): who may do what on which
topics, consumer groups, transactional ids and the cluster.

An ACL allows (or denies) a principal (``User:alice``; ``User:*`` for everyone) an
operation on the resources a pattern names (one name, ``*`` for all, or a prefix),
from a host (``*`` for any). ``add`` makes the cross product of the principals, hosts
and operations given, on one resource; ``--producer`` and ``--consumer`` are Kafka's
shortcuts for what a producer or a consumer needs. ``list`` and ``remove`` take the
same options as a filter. Every ACL is checked here before any is sent: a command
that would add one invalid ACL adds none.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from strand.cli.common import err, friendly_errors, open_admin, print_table

if TYPE_CHECKING:  # clients (gRPC), rich and the ACL model load when a command runs
    from rich.table import Table

    from strand.admin import Admin
    from strand.security.acl import (
        AclBinding,
        AclBindingFilter,
        AclPermissionType,
        Operation,
        PatternType,
        ResourcePattern,
        ResourceType,
    )

F = TypeVar("F", bound=Callable[..., Any])

ADD_PATTERN_TYPES = ("literal", "prefixed")
FILTER_PATTERN_TYPES = ("any", "match", "literal", "prefixed")
COLUMNS = ("resource type", "name", "pattern", "principal", "host", "operation", "permission")



@click.group()
def acl() -> None:
    """Add, list and remove ACLs (Kafka's kafka-acls)."""


# ---------------------------------------------------------------- options


@dataclass(frozen=True, slots=True)
class Selection:
    """What the options of a command name: the resource, who, from where, what."""

    topic: str | None = None
    group: str | None = None
    transactional_id: str | None = None
    cluster: bool = False
    pattern_type: str | None = None
    allow_principals: tuple[str, ...] = ()
    deny_principals: tuple[str, ...] = ()
    allow_hosts: tuple[str, ...] = ()
    deny_hosts: tuple[str, ...] = ()
    operations: tuple[str, ...] = ()
    principals: tuple[str, ...] = ()  # filters only: either permission

    def resources(self) -> list[tuple[ResourceType, str, str]]:
        """(type, name, the option that named it) of each resource named."""
        from strand.security.acl import CLUSTER_RESOURCE_NAME, ResourceType

        named = [(ResourceType.TOPIC, self.topic, "--topic"),
                 (ResourceType.GROUP, self.group, "--group"),
                 (ResourceType.TRANSACTIONAL_ID, self.transactional_id, "--transactional-id"),
                 (ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME if self.cluster else None,
                  "--cluster")]
        return [(rtype, name, option) for rtype, name, option in named if name is not None]


def _resource_options(pattern_types: Sequence[str], pattern_help: str,
                      filtering: bool = False) -> Callable[[F], F]:
    """The options naming the resource and the entries; ``filtering``: their help as
    filters."""
    if filtering:
        who = {"--allow-principal": "Only ALLOW ACLs of this principal; repeatable.",
               "--deny-principal": "Only DENY ACLs of this principal; repeatable.",
               "--allow-host": "Only ALLOW ACLs from this host; repeatable.",
               "--deny-host": "Only DENY ACLs from this host; repeatable."}
    else:
        who = {"--allow-principal": "A principal allowed (User:alice, User:* for everyone); "
                                    "repeatable.",
               "--deny-principal": "A principal denied; repeatable. A DENY wins over any "
                                   "ALLOW.",
               "--allow-host": "A host the --allow-principal ACLs apply from; repeatable "
                               "(default: '*', every host).",
               "--deny-host": "A host the --deny-principal ACLs apply from; repeatable "
                              "(default: '*', every host)."}
    options = [
        click.option("--topic", default=None, metavar="NAME",
                     help="A topic ('*' with literal: every topic)."),
        click.option("--group", default=None, metavar="NAME",
                     help="A consumer group ('*' with literal: every group)."),
        click.option("--transactional-id", default=None, metavar="NAME",
                     help="A producer's transactional id ('*' with literal: every one)."),
        click.option("--cluster", is_flag=True,
                     help="The cluster itself (cluster-wide operations)."),
        click.option("--resource-pattern-type", "pattern_type", default=None,
                     type=click.Choice(pattern_types, case_sensitive=False),
                     help=pattern_help),
        click.option("--allow-principal", "allow_principals", multiple=True,
                     metavar="TYPE:NAME", help=who["--allow-principal"]),
        click.option("--deny-principal", "deny_principals", multiple=True,
                     metavar="TYPE:NAME", help=who["--deny-principal"]),
        click.option("--allow-host", "allow_hosts", multiple=True, metavar="HOST",
                     help=who["--allow-host"]),
        click.option("--deny-host", "deny_hosts", multiple=True, metavar="HOST",
                     help=who["--deny-host"]),
        click.option("--operation", "operations", multiple=True, metavar="OP",
                     help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                     "DescribeConfigs, AlterConfigs, IdempotentWrite or All (any case, "
                     "'-' or '_' between words); repeatable."),
    ]

    def apply(func: F) -> F:
        for option in reversed(options):
            func = option(func)
        return func

    return apply


def _operations(texts: Iterable[str]) -> list[Operation]:
    from strand.security.acl import InvalidAclError, Operation

    parsed: list[Operation] = []
    for text in texts:
        try:
            parsed.append(Operation.parse(text))
        except InvalidAclError as exc:
            raise click.BadParameter(str(exc), param_hint="'--operation'") from None
    return list(dict.fromkeys(parsed))


def _pattern_type(text: str) -> PatternType:
    from strand.security.acl import PatternType

    return PatternType.parse(text)


def _check_principals(principals: Iterable[str], option: str) -> None:
    """A principal is TYPE:NAME (User:alice); say so before anything is sent."""
    from strand.security.principal import Principal

    for text in principals:
        try:
            Principal.parse(text)
        except ValueError as exc:
            raise click.BadParameter(f"{exc} (or 'User:*' for every principal)",
                                     param_hint=f"'{option}'") from None


def _one_resource(selection: Selection, optional: bool) -> tuple[ResourceType, str] | None:
    named = selection.resources()
    if len(named) > 1:
        raise click.UsageError(
            f"name one resource, not {' and '.join(option for *_, option in named)}: "
            "an ACL applies to one (run the command once for each)")
    if not named:
        if optional:
            return None
        raise click.UsageError("name the resource: --topic NAME, --group NAME, "
                               "--transactional-id NAME or --cluster")
    rtype, name, _ = named[0]
    return rtype, name


# ---------------------------------------------------------------- add


def build_bindings(selection: Selection, producer: bool = False,
                   consumer: bool = False) -> list[AclBinding]:
    """The ACLs ``strand acl add`` makes of its options: principals x hosts x operations
    on the resource (or on each resource of --producer/--consumer), each checked as the
    cluster checks it (click's errors name what is wrong)."""
    from strand.security.acl import (
        CLUSTER_RESOURCE_NAME,
        AccessControlEntry,
        AclBinding,
        AclPermissionType,
        InvalidAclError,
        Operation,
        PatternType,
        ResourcePattern,
        ResourceType,
    )

    s = selection
    if not s.allow_principals and not s.deny_principals:
        raise click.UsageError("name who: --allow-principal or --deny-principal TYPE:NAME "
                               "(e.g. User:alice; User:* for everyone), repeatable")
    if s.allow_hosts and not s.allow_principals:
        raise click.UsageError("--allow-host needs --allow-principal")
    if s.deny_hosts and not s.deny_principals:
        raise click.UsageError("--deny-host needs --deny-principal")
    _check_principals(s.allow_principals, "--allow-principal")
    _check_principals(s.deny_principals, "--deny-principal")
    ptype = _pattern_type(s.pattern_type or "literal")

    targets: list[tuple[ResourcePattern, list[Operation]]] = []
    if producer or consumer:
        shortcut = "/".join(name for name, on in (("--producer", producer),
                                                  ("--consumer", consumer)) if on)
        if s.operations:
            raise click.UsageError(f"{shortcut} chooses the operations: leave out --operation")
        if s.deny_principals or s.deny_hosts:
            raise click.UsageError(f"{shortcut} adds ALLOW ACLs: leave out --deny-principal "
                                   "and --deny-host")
        if s.cluster:
            raise click.UsageError(f"{shortcut} names the cluster itself when it needs it: "
                                   "leave out --cluster")
        if s.topic is None:
            raise click.UsageError(f"{shortcut} needs --topic")
        if consumer and s.group is None:
            raise click.UsageError("--consumer needs --group")
        if s.group is not None and not consumer:
            raise click.UsageError("--group goes with --consumer (or without --producer)")
        if s.transactional_id is not None and not producer:
            raise click.UsageError("--transactional-id goes with --producer (or without "
                                   "--consumer)")
        topic = ResourcePattern(ResourceType.TOPIC, s.topic, ptype)
        if producer:
            targets.append((topic, [Operation.WRITE, Operation.DESCRIBE, Operation.CREATE]))
            if s.transactional_id is not None:
                targets.append((ResourcePattern(ResourceType.TRANSACTIONAL_ID,
                                                s.transactional_id, ptype),
                                [Operation.WRITE, Operation.DESCRIBE]))
            targets.append((ResourcePattern(ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME,
                                            PatternType.LITERAL), [Operation.IDEMPOTENT_WRITE]))
        if consumer:
            assert s.group is not None
            targets.append((topic, [Operation.READ, Operation.DESCRIBE]))
            targets.append((ResourcePattern(ResourceType.GROUP, s.group, ptype),
                            [Operation.READ]))
    else:
        if not s.operations:
            raise click.UsageError("name the operations: --operation OP (repeatable), or "
                                   "use --producer or --consumer")
        resource = _one_resource(s, optional=False)
        assert resource is not None
        targets.append((ResourcePattern(resource[0], resource[1], ptype),
                        _operations(s.operations)))

    sides = [(AclPermissionType.ALLOW, s.allow_principals, s.allow_hosts or ("*",)),
             (AclPermissionType.DENY, s.deny_principals, s.deny_hosts or ("*",))]
    bindings = list(dict.fromkeys(
        AclBinding(pattern, AccessControlEntry(principal, host, operation, permission))
        for permission, principals, hosts in sides
        for principal in dict.fromkeys(principals)
        for host in dict.fromkeys(hosts)
        for pattern, operations in targets
        for operation in operations))
    for binding in bindings:
        try:
            binding.validate()
        except InvalidAclError as exc:
            raise click.UsageError(f"invalid ACL ({binding}): {exc}") from None
    return bindings


@acl.command()
@_resource_options(ADD_PATTERN_TYPES,
                   "How the resource name is matched: literal (that name; '*' for all) "
                   "or prefixed (every name starting with it).  [default: literal]")
@click.option("--producer", is_flag=True,
              help="Kafka's shortcut for a producer: WRITE, DESCRIBE and CREATE on --topic, "
                   "WRITE and DESCRIBE on --transactional-id if given, IDEMPOTENT_WRITE on "
                   "the cluster.")
@click.option("--consumer", is_flag=True,
              help="Kafka's shortcut for a consumer: READ and DESCRIBE on --topic, READ on "
                   "--group.")
@click.pass_context
@friendly_errors
def add(ctx: click.Context, /, producer: bool, consumer: bool, **options: Any) -> None:
    """Add ACLs: each principal is allowed (or denied) each operation on the resource
    from each host. All are checked first: if one is invalid none is added.

    \b
    strand acl add --allow-principal User:alice --operation read --topic orders
    strand acl add --allow-principal User:bob --producer --topic orders \\
        --transactional-id orders-tx
    strand acl add --allow-principal User:carol --consumer --topic orders. \\
        --resource-pattern-type prefixed --group billing
    """
    bindings = build_bindings(Selection(**options), producer, consumer)
    with open_admin(ctx) as admin:
        admin.create_acls(bindings)
    print_table(_table(bindings, f"added {_count(len(bindings))}"))


# ---------------------------------------------------------------- list and remove


_FILTER_PATTERN_HELP = ("Which patterns: literal or prefixed (ACLs naming exactly that), "
                        "any (both), match (every ACL that applies to the resource named: "
                        "literal, '*' and prefixes of it).  [default: literal when a "
                        "resource is named, as Kafka's; any otherwise]")


def _filter_options(func: F) -> F:
    func = click.option("--principal", "principals", multiple=True, metavar="TYPE:NAME",
                        help="Only ACLs of this principal, ALLOW or DENY; repeatable.")(func)
    return _resource_options(FILTER_PATTERN_TYPES, _FILTER_PATTERN_HELP, filtering=True)(func)


def build_filters(selection: Selection) -> list[AclBindingFilter]:
    """The filters ``list`` and ``remove`` make of their options: each option left out
    matches anything; the repeatable ones make one filter per value (their union)."""
    from strand.security.acl import (
        AclBindingFilter,
        AclPermissionType,
        InvalidAclError,
        Operation,
        PatternType,
        ResourceType,
    )

    s = selection
    resource = _one_resource(s, optional=True)
    rtype, name = resource if resource is not None else (ResourceType.ANY, None)
    if s.pattern_type is not None:
        ptype = _pattern_type(s.pattern_type)
    else:
        ptype = PatternType.ANY if resource is None else PatternType.LITERAL
    for principals, option in ((s.principals, "--principal"),
                               (s.allow_principals, "--allow-principal"),
                               (s.deny_principals, "--deny-principal")):
        _check_principals(principals, option)

    who: list[tuple[AclPermissionType, str | None, str | None]] = [
        (AclPermissionType.ANY, principal, None) for principal in s.principals]
    for permission, principals, hosts in (
            (AclPermissionType.ALLOW, s.allow_principals, s.allow_hosts),
            (AclPermissionType.DENY, s.deny_principals, s.deny_hosts)):
        if principals or hosts:
            who += [(permission, principal, host) for principal in principals or (None,)
                    for host in hosts or (None,)]
    operations = _operations(s.operations) or [Operation.ANY]
    filters = list(dict.fromkeys(
        AclBindingFilter(rtype, name, ptype, principal, host, operation, permission)
        for permission, principal, host in who or [(AclPermissionType.ANY, None, None)]
        for operation in operations))
    for acl_filter in filters:
        try:
            acl_filter.validate()
        except InvalidAclError as exc:
            raise click.UsageError(str(exc)) from None
    return filters


def _describe(admin: Admin, filters: Sequence[AclBindingFilter]) -> list[AclBinding]:
    """What any of ``filters`` matches, each ACL once, sorted."""
    found: dict[AclBinding, None] = {}
    for acl_filter in filters:
        found.update(dict.fromkeys(admin.describe_acls(acl_filter)))
    return sorted(found, key=_sort_key)


@acl.command(name="list")
@_filter_options
@click.option("--json", "as_json", is_flag=True, help="A JSON array, one object per ACL.")
@click.pass_context
@friendly_errors
def list_(ctx: click.Context, /, as_json: bool, **options: Any) -> None:
    """List the ACLs the options match (every ACL without any).

    \b
    strand acl list
    strand acl list --topic orders --resource-pattern-type match
    strand acl list --principal User:alice --json
    """
    filters = build_filters(Selection(**options))
    with open_admin(ctx) as admin:
        found = _describe(admin, filters)
    if as_json:
        click.echo(json.dumps([acl_json(binding) for binding in found]))
    elif found:
        print_table(_table(found))
    else:
        err.print("no ACLs match")


@acl.command()
@_filter_options
@click.option("--all", "all_", is_flag=True,
              help="Remove every ACL of the cluster (without any filter option).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
@friendly_errors
def remove(ctx: click.Context, /, all_: bool, yes: bool, **options: Any) -> None:
    """Remove the ACLs the options match, after showing them and asking (unless --yes).
    A command without filter options removes nothing: --all says to remove every ACL.

    \b
    strand acl remove --allow-principal User:alice --topic orders
    strand acl remove --principal User:bob --yes
    """
    from strand.security.acl import AclBindingFilter

    filters = build_filters(Selection(**options))
    everything = AclBindingFilter()
    if all_:
        if filters != [everything]:
            raise click.UsageError("--all removes every ACL: leave out the filter options "
                                   "(or --all)")
    elif everything in filters:
        raise click.UsageError("no filter: name a resource, a principal, a host or an "
                               "operation; or give --all to remove every ACL")
    with open_admin(ctx) as admin:
        if not yes:
            matching = _describe(admin, filters)
            if not matching:
                err.print("no ACLs match: nothing removed")
                return
            _print_to_stderr(_table(matching, f"to remove: {_count(len(matching))}"))
            click.confirm(f"Remove these {_count(len(matching))}?", abort=True,
                          err=True)
        deleted = sorted(dict.fromkeys(admin.delete_acls(filters)), key=_sort_key)
    if deleted:
        print_table(_table(deleted, f"removed {_count(len(deleted))}"))
    else:
        err.print("no ACLs match: nothing removed")


# ---------------------------------------------------------------- output


def acl_json(binding: AclBinding) -> dict[str, str]:
    """One ACL as ``--json`` prints it: the seven fields by their wire names."""
    from strand.security.acl_fields import fields_of

    return fields_of(binding)


def _sort_key(binding: AclBinding) -> tuple[str, ...]:
    from strand.security.acl_fields import FIELDS

    fields = acl_json(binding)
    return tuple(fields[name] for name in FIELDS)


def _count(n: int) -> str:
    return f"{n} ACL" + ("" if n == 1 else "s")


def _table(bindings: Iterable[AclBinding], title: str | None = None) -> Table:
    from rich.table import Table

    from strand.security.acl_fields import FIELDS

    table = Table(title=title)
    for column in COLUMNS:
        table.add_column(column, overflow="fold")
    for binding in bindings:
        fields = acl_json(binding)
        table.add_row(*(fields[name] for name in FIELDS))
    return table


def _print_to_stderr(table: Table) -> None:
    """As ``print_table``, on stderr (beside the question it goes with)."""
    from rich.console import Console

    console = err.console
    if not console.is_terminal:
        needed = console.measure(table, options=console.options.update_width(1 << 20)).maximum
        console = Console(stderr=True, highlight=False, width=max(console.width, needed))
    console.print(table)
