"""``strand group list|describe|reset-offsets|delete`` (Kafka's kafka-consumer-groups.sh)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from strand.cli.common import bootstrap, err, friendly_errors, open_admin, print_table, security
from strand.cli.offset_reset import (
    PartitionReset,
    ResetError,
    ResetSpec,
    parse_datetime,
    parse_topic_scope,
    plan,
)
from strand.client.structs import TopicPartition
from strand.errors import UnknownTopicOrPartitionError
from strand.security.settings import ClientTlsSettings

if TYPE_CHECKING:  # clients (gRPC) and rich load when a command runs
    from strand.admin import Admin
    from strand.consumer import Consumer


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
    with open_admin(ctx) as admin:
        groups = admin.list_groups(timeout_ms)
    if as_json:
        click.echo(json.dumps([{"group": g.group_id, "state": g.state} for g in groups]))
        return
    for listing in groups:
        click.echo(f"{listing.group_id}\t{listing.state}")


def partition_lag(committed: int | None, end: int | None) -> int | None:
    """A group's lag on a partition (Kafka's): the partition's end offset (its high
    watermark) less the group's committed offset; None when either is unknown.
    ``strand cluster status`` sums these per group."""
    return end - committed if end is not None and committed is not None else None


def _lag_rows(admin: Admin, bootstrap_address: str | None, group_id: str,
              tls: ClientTlsSettings) -> tuple[list[dict[str, Any]], Any]:
    from strand.consumer import Consumer

    description = admin.describe_group(group_id)
    committed = admin.list_group_offsets(group_id)
    owner = {tp: m for m in description.members for tp in m.partitions}
    partitions = sorted(set(committed) | set(owner))
    ends: dict[TopicPartition, int] = {}
    if partitions:
        with Consumer(bootstrap_address, **tls) as consumer:
            ends = consumer.end_offsets(partitions)
    rows = []
    for tp in partitions:
        end = ends.get(tp)
        offset = committed.get(tp)
        member = owner.get(tp)
        rows.append({"topic": tp.topic, "partition": tp.partition, "committed": offset,
                     "high_watermark": end,
                     "lag": partition_lag(offset, end),
                     "member": member.member_id if member else None,
                     "host": member.client_host or None if member else None,
                     "client": member.client_id if member else None})
    return rows, description


@group.command()
@click.argument("group_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly_errors
def describe(ctx: click.Context, group_id: str, as_json: bool) -> None:
    """GROUP_ID's state, members and, per partition, committed offset, HW, lag and the
    member that owns it (its id, host and client id)."""
    from rich.table import Table

    with open_admin(ctx) as admin:
        rows, description = _lag_rows(admin, bootstrap(ctx), group_id, security(ctx))
    if as_json:
        click.echo(json.dumps({
            "group": group_id, "state": description.state,
            "protocol": description.protocol, "generation": description.generation,
            "members": len(description.members),
            "consumers": [{"member": m.member_id, "instance": m.group_instance_id,
                           "host": m.client_host or None, "client": m.client_id,
                           "partitions": [[tp.topic, tp.partition] for tp in m.partitions]}
                          for m in description.members],
            "partitions": rows}))
        return
    table = Table(title=f"group {group_id}: {description.state}, generation "
                        f"{description.generation}, {len(description.members)} member(s), "
                        f"assignor {description.protocol or '-'}")
    for column in ("topic", "partition", "committed", "high watermark", "lag", "member",
                   "host", "client"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row["topic"], str(row["partition"]),
                      "-" if row["committed"] is None else str(row["committed"]),
                      "-" if row["high_watermark"] is None else str(row["high_watermark"]),
                      "-" if row["lag"] is None else str(row["lag"]), row["member"] or "-",
                      row["host"] or "-", row["client"] or "-")
    print_table(table)


_SPECS = ("--to-earliest", "--to-latest", "--to-offset", "--to-datetime", "--shift-by")


def _reset_spec(to_earliest: bool, to_latest: bool, to_offset: int | None,
                to_datetime: str | None, shift_by: int | None) -> ResetSpec:
    given = [name for name, value in zip(_SPECS, (
        to_earliest or None, to_latest or None, to_offset, to_datetime, shift_by), strict=True)
        if value is not None]
    if len(given) != 1:
        raise click.UsageError(
            f"give exactly one of {', '.join(_SPECS)}"
            + (f" (got {' and '.join(given)})" if given else ""))
    if to_earliest:
        return ResetSpec("earliest")
    if to_latest:
        return ResetSpec("latest")
    if to_offset is not None:
        return ResetSpec("offset", to_offset)
    if shift_by is not None:
        return ResetSpec("shift", shift_by)
    assert to_datetime is not None
    try:
        return ResetSpec("datetime", parse_datetime(to_datetime))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--to-datetime") from None


def _scope(consumer: Consumer, admin: Admin, group_id: str, topics: tuple[str, ...],
           all_topics: bool) -> list[TopicPartition]:
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic TOPIC[:P1,P2] (repeatable) or --all-topics")
    if all_topics:
        partitions = sorted(admin.list_group_offsets(group_id))
        if not partitions:
            raise click.UsageError(f"group {group_id!r} has no committed offsets: "
                                   "name the topics to reset with --topic")
        return partitions
    chosen: list[TopicPartition] = []
    for text in topics:
        try:
            topic, wanted = parse_topic_scope(text)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--topic") from None
        existing = consumer.partitions_for(topic)
        missing = sorted(set(wanted or ()) - set(existing))
        if missing:
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} has partitions {_ranges(existing)}; "
                f"no partition {', '.join(map(str, missing))}")
        chosen.extend(TopicPartition(topic, p) for p in (wanted or existing))
    return sorted(set(chosen))


def _ranges(partitions: list[int]) -> str:
    return f"0-{max(partitions)}" if partitions == list(range(len(partitions))) \
        else ", ".join(map(str, partitions))


@group.command(name="reset-offsets")
@click.argument("group_id")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC[:P1,P2]",
              help="A topic (or some of its partitions) to reset; repeatable.")
@click.option("--all-topics", is_flag=True,
              help="Every topic the group has committed offsets for.")
@click.option("--to-earliest", is_flag=True, help="To the log start offset.")
@click.option("--to-latest", is_flag=True, help="To the log end offset.")
@click.option("--to-offset", type=click.IntRange(0), default=None, metavar="N",
              help="To offset N (clamped to each partition's start..end).")
@click.option("--to-datetime", default=None, metavar="YYYY-MM-DDTHH:MM:SS[.sss][Z|±HH:MM]",
              help="To the first record at or after this time (no zone: local time).")
@click.option("--shift-by", type=int, default=None, metavar="N",
              help="The committed offset plus N (negative: back), clamped.")
@click.option("--dry-run", is_flag=True, help="Show the new offsets; change nothing.")
@click.option("--execute", is_flag=True,
              help="Set them (the default; accepted for scripts written for Kafka's tool).")
@click.option("--json", "as_json", is_flag=True, help="The plan as JSON on stdout.")
@click.pass_context
@friendly_errors
def reset_offsets(ctx: click.Context, group_id: str, topics: tuple[str, ...], all_topics: bool,
                  to_earliest: bool, to_latest: bool, to_offset: int | None,
                  to_datetime: str | None, shift_by: int | None, dry_run: bool, execute: bool,
                  as_json: bool) -> None:
    """Set GROUP_ID's committed offsets (the group must have no members).

    Exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by;
    offsets outside a partition's range are clamped to it. Unlike Kafka's tool, this
    changes the offsets unless --dry-run is given (as it always has here)."""
    from strand.consumer import Consumer

    spec = _reset_spec(to_earliest, to_latest, to_offset, to_datetime, shift_by)
    if dry_run and execute:
        raise click.UsageError("give --dry-run or --execute, not both")
    with open_admin(ctx) as admin, \
            Consumer(bootstrap(ctx), **security(ctx)) as consumer:
        partitions = _scope(consumer, admin, group_id, topics, all_topics)
        committed = admin.list_group_offsets(group_id)
        starts = consumer.beginning_offsets(partitions)
        ends = consumer.end_offsets(partitions)
        by_time = (consumer.offsets_for_times(dict.fromkeys(partitions, spec.value))
                   if spec.kind == "datetime" else None)
        try:
            resets = plan(spec, partitions, committed, starts, ends, by_time)
        except ResetError as exc:
            raise click.UsageError(str(exc)) from None
        active = len(admin.describe_group(group_id).members) if dry_run else 0
        if not dry_run:
            admin.alter_group_offsets(group_id, {r.tp: r.new for r in resets})
    _print_plan(group_id, resets, as_json)
    for reset in resets:
        if reset.note:
            err.print(f"note: {reset.tp.topic}-{reset.tp.partition}: {reset.note}")
    if dry_run:
        err.print(f"dry run: nothing changed for group {group_id}"
                  + (f" (it has {active} active member(s): a reset would be refused with "
                     "GROUP_NOT_EMPTY until they stop)" if active else ""))
    else:
        err.print(f"reset {len(resets)} partition(s) for group {group_id}")


def _print_plan(group_id: str, resets: list[PartitionReset], as_json: bool) -> None:
    from rich.table import Table

    if as_json:
        click.echo(json.dumps([{"group": group_id, "topic": r.tp.topic,
                                "partition": r.tp.partition, "current": r.current,
                                "new": r.new, "note": r.note or None} for r in resets]))
        return
    table = Table()
    for column in ("group", "topic", "partition", "current offset", "new offset"):
        table.add_column(column, overflow="fold")
    for r in resets:
        table.add_row(group_id, r.tp.topic, str(r.tp.partition),
                      "-" if r.current is None else str(r.current), str(r.new))
    print_table(table)


@group.command()
@click.argument("group_id")
@click.pass_context
@friendly_errors
def delete(ctx: click.Context, group_id: str) -> None:
    """Delete GROUP_ID and its committed offsets (the group must have no members)."""
    with open_admin(ctx) as admin:
        admin.delete_group(group_id)
    err.print(f"deleted group {group_id}")
