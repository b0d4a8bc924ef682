"""``strand topic create|list|describe|delete|alter|reassign`` (Kafka's kafka-topics.sh
and kafka-reassign-partitions.sh)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from strand.cli.common import err, friendly_errors, open_admin, parse_configs
from strand.cli.configs import config_rows, config_table

if TYPE_CHECKING:  # clients (gRPC) and rich load when a command runs
    pass


@click.group()
def topic() -> None:
    """Create, list, describe, alter and delete topics."""


@topic.command()
@click.argument("name")
@click.option("--partitions", type=click.IntRange(1), default=1, show_default=True)
@click.option("--replication-factor", type=click.IntRange(1), default=1, show_default=True)
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE",
              help="topic config, repeatable (e.g. --config retention.ms=60000)")
@click.pass_context
@friendly_errors
def create(ctx: click.Context, name: str, partitions: int, replication_factor: int,
           configs: tuple[str, ...]) -> None:
    """Create topic NAME."""
    from strand.admin import NewTopic

    with open_admin(ctx) as admin:
        admin.create_topics([NewTopic(name, partitions, replication_factor,
                                      parse_configs(configs))])
    err.print(f"created topic {name} ({partitions} partitions, "
              f"replication factor {replication_factor})")


@topic.command(name="list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly_errors
def list_(ctx: click.Context, as_json: bool) -> None:
    """List topic names."""
    with open_admin(ctx) as admin:
        names = sorted(admin.list_topics())
    if as_json:
        click.echo(json.dumps(names))
    else:
        for name in names:
            click.echo(name)


@topic.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly_errors
def describe(ctx: click.Context, name: str, as_json: bool) -> None:
    """Partitions (leader, replicas, in-sync replicas) and every config of topic NAME
    with its source (override: set on the topic; default)."""
    from rich.console import Console
    from rich.table import Table

    with open_admin(ctx) as admin:
        description = admin.describe_topics([name])[0]
        configs = config_rows(admin.describe_configs(name))
    partitions: list[dict[str, Any]] = [
        {"partition": p.partition, "leader": p.leader, "replicas": list(p.replicas),
         "isr": list(p.isr)} for p in description.partitions]
    if as_json:
        click.echo(json.dumps({"name": name, "topic_id": description.topic_id,
                               "internal": description.is_internal,
                               "partitions": partitions, "configs": configs}))
        return
    table = Table(title=f"topic {name}: {len(partitions)} partitions")
    for column in ("partition", "leader", "replicas", "isr"):
        table.add_column(column)
    for p in partitions:
        leader = "none" if p["leader"] is None else str(p["leader"])
        table.add_row(str(p["partition"]), leader,
                      ",".join(map(str, p["replicas"])), ",".join(map(str, p["isr"])))
    console = Console(soft_wrap=True)
    console.print(table)
    console.print(config_table(f"configs of topic {name}", configs))


@topic.command()
@click.argument("name")
@click.pass_context
@friendly_errors
def delete(ctx: click.Context, name: str) -> None:
    """Delete topic NAME and its data."""
    with open_admin(ctx) as admin:
        admin.delete_topics([name])
    err.print(f"deleted topic {name}")


@topic.command()
@click.argument("name")
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE")
@click.option("--delete-config", "deletes", multiple=True, metavar="KEY",
              help="back to the default, repeatable")
@click.option("--partitions", type=click.IntRange(1), default=None,
              help="new total partition count (can only grow)")
@click.pass_context
@friendly_errors
def alter(ctx: click.Context, name: str, configs: tuple[str, ...], deletes: tuple[str, ...],
          partitions: int | None) -> None:
    """Change configs or grow the partition count of topic NAME."""

    if not configs and not deletes and partitions is None:
        raise click.UsageError("nothing to change: give --config, --delete-config or "
                               "--partitions")
    with open_admin(ctx) as admin:
        if configs or deletes:
            admin.alter_configs(name, set=parse_configs(configs), delete=list(deletes))
        if partitions is not None:
            admin.create_partitions(name, partitions)
    err.print(f"altered topic {name}")


@topic.command()
@click.argument("name")
@click.option("--partition", "partitions", type=click.IntRange(0), multiple=True,
              help="partition to move, repeatable (with --list: only these)")
@click.option("--replicas", default=None, metavar="ID,ID,...",
              help="target brokers, preferred leader first (its length is the new RF)")
@click.option("--cancel", is_flag=True, help="stop the ongoing reassignment instead")
@click.option("--list", "show", is_flag=True,
              help="show the ongoing reassignments of NAME (all its partitions by default)")
@click.pass_context
@friendly_errors
def reassign(ctx: click.Context, name: str, partitions: tuple[int, ...], replicas: str | None,
             cancel: bool, show: bool) -> None:
    """Move partitions of topic NAME to other brokers, or change their replication
    factor: new replicas copy the data first (throttled), then the list switches."""

    if show:
        if cancel or replicas is not None:
            raise click.UsageError("--list shows reassignments: leave out --replicas and --cancel")
        with open_admin(ctx) as admin:
            ongoing = [r for r in admin.list_partition_reassignments([name])
                       if not partitions or r.partition in partitions]
        for r in ongoing:
            click.echo(f"{r.topic}-{r.partition}: replicas {list(r.replicas)} adding "
                       f"{list(r.adding)} removing {list(r.removing)} isr {list(r.isr)}")
        if not ongoing:
            err.print(f"no reassignment in progress for topic {name}")
        return
    if not partitions:
        raise click.UsageError("name the partitions to move with --partition (repeatable)")
    if cancel == (replicas is not None):
        raise click.UsageError("give either --replicas or --cancel")
    target: list[int] | None = None
    if replicas is not None:
        try:
            target = [int(r) for r in replicas.split(",") if r.strip()]
        except ValueError:
            raise click.BadParameter(f"not a list of broker ids: {replicas!r}",
                                     param_hint="--replicas") from None
    with open_admin(ctx) as admin:
        admin.alter_partition_reassignments({(name, p): target for p in partitions})
    what = "cancelled reassignment of" if cancel else f"reassigning to {target}:"
    err.print(f"{what} {', '.join(f'{name}-{p}' for p in partitions)}")
