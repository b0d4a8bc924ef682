"""``strand group list|describe|reset-offsets|delete`` (Kafka's kafka-consumer-groups.sh)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from strand.cli.common import bootstrap, err, friendly_errors
from strand.client.structs import TopicPartition

if TYPE_CHECKING:  # the clients (and gRPC) are imported by the commands that use them
    from strand.admin import Admin


@click.group()
def group() -> None:
    """List, describe, reset and delete consumer groups."""


@group.command(name="list")
@click.option("--json", "as_json", is_flag=True)
@click.option("--timeout-ms", type=click.IntRange(min=0), default=None,
              help="How long to wait for coordinator shards that are loading or moving "
                   "(default 15000); the command fails, naming them, if they do not answer.")
@click.pass_context
@friendly_errors
def list_(ctx: click.Context, as_json: bool, timeout_ms: int | None) -> None:
    """Every consumer group with its state."""
    from strand.admin import Admin

    with Admin(bootstrap(ctx)) as admin:
        groups = admin.list_groups(timeout_ms)
    if as_json:
        click.echo(json.dumps([{"group": g.group_id, "state": g.state} for g in groups]))
        return
    for listing in groups:
        click.echo(f"{listing.group_id}\t{listing.state}")


def _lag_rows(admin: Admin, bootstrap_address: str | None, group_id: str
              ) -> tuple[list[dict[str, Any]], Any]:
    from strand.consumer import Consumer

    description = admin.describe_group(group_id)
    committed = admin.list_group_offsets(group_id)
    owner = {tp: m for m in description.members for tp in m.partitions}
    partitions = sorted(set(committed) | set(owner))
    ends: dict[TopicPartition, int] = {}
    if partitions:
        with Consumer(bootstrap_address) as consumer:
            ends = consumer.end_offsets(partitions)
    rows = []
    for tp in partitions:
        end = ends.get(tp)
        offset = committed.get(tp)
        member = owner.get(tp)
        rows.append({"topic": tp.topic, "partition": tp.partition, "committed": offset,
                     "high_watermark": end,
                     "lag": (end - offset) if end is not None and offset is not None else None,
                     "member": member.member_id if member else None,
                     "client": member.client_id if member else None})
    return rows, description


@group.command()
@click.argument("group_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly_errors
def describe(ctx: click.Context, group_id: str, as_json: bool) -> None:
    """GROUP_ID's state, members and, per partition, committed offset, HW and lag."""
    from rich.console import Console
    from rich.table import Table

    from strand.admin import Admin

    with Admin(bootstrap(ctx)) as admin:
        rows, description = _lag_rows(admin, bootstrap(ctx), group_id)
    if as_json:
        click.echo(json.dumps({"group": group_id, "state": description.state,
                               "protocol": description.protocol,
                               "generation": description.generation,
                               "members": len(description.members), "partitions": rows}))
        return
    table = Table(title=f"group {group_id}: {description.state}, generation "
                        f"{description.generation}, {len(description.members)} member(s), "
                        f"assignor {description.protocol or '-'}")
    for column in ("topic", "partition", "committed", "high watermark", "lag", "member"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["topic"], str(row["partition"]),
                      "-" if row["committed"] is None else str(row["committed"]),
                      "-" if row["high_watermark"] is None else str(row["high_watermark"]),
                      "-" if row["lag"] is None else str(row["lag"]), row["member"] or "-")
    Console().print(table)


@group.command(name="reset-offsets")
@click.argument("group_id")
@click.option("--topic", required=True)
@click.option("--to-earliest", "where", flag_value="earliest")
@click.option("--to-latest", "where", flag_value="latest")
@click.option("--to-offset", type=click.IntRange(0), default=None)
@click.pass_context
@friendly_errors
def reset_offsets(ctx: click.Context, group_id: str, topic: str, where: str | None,
                  to_offset: int | None) -> None:
    """Set GROUP_ID's committed offsets of TOPIC (the group must have no members)."""
    from strand.admin import Admin
    from strand.consumer import Consumer

    if (where is None) == (to_offset is None):
        raise click.UsageError("give one of --to-earliest, --to-latest, --to-offset N")
    with Consumer(bootstrap(ctx)) as consumer:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for(topic)]
        if where == "earliest":
            offsets = consumer.beginning_offsets(tps)
        elif where == "latest":
            offsets = consumer.end_offsets(tps)
        else:
            assert to_offset is not None
            offsets = {tp: to_offset for tp in tps}
    with Admin(bootstrap(ctx)) as admin:
        admin.alter_group_offsets(group_id, offsets)
    err.print(f"reset {len(offsets)} partition(s) of {topic} for group {group_id}")


@group.command()
@click.argument("group_id")
@click.pass_context
@friendly_errors
def delete(ctx: click.Context, group_id: str) -> None:
    """Delete GROUP_ID and its committed offsets (the group must have no members)."""
    from strand.admin import Admin

    with Admin(bootstrap(ctx)) as admin:
        admin.delete_group(group_id)
    err.print(f"deleted group {group_id}")
