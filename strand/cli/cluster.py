"""``strand cluster status``: the cluster's health for an operator, with a verdict
scripts and probes read from the exit status. What is gathered here (through the
admin client and, for lag, a consumer's end offsets) is judged by the pure
strand/cli/cluster_health.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import click

from strand.cli.cluster_health import (
    BrokerState,
    ClusterSnapshot,
    GroupSnapshot,
    HealthReport,
    PartitionState,
    ReassignmentState,
    assess,
    topics_that_may_be_under_min_isr,
)
from strand.cli.common import (
    bootstrap,
    err,
    friendly_errors,
    open_admin,
    print_table,
    security,
)
from strand.cli.group import partition_lag
from strand.client.structs import TopicPartition
from strand.errors import (
    AuthorizationError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    NetworkError,
    RequestTimedOutError,
    StrandError,
    UnknownTopicOrPartitionError,
)

if TYPE_CHECKING:  # clients (gRPC) and rich load when a command runs
    from rich.table import Table
    from rich.text import Text

    from strand.admin import Admin, TopicDescription
    from strand.consumer import Consumer

# The health could not be found out (Nagios's UNKNOWN): 1 and 2 are verdicts here.
EXIT_UNKNOWN = 3
DEFAULT_LIMIT = 10
DEFAULT_TIMEOUT_MS = 5000
# What the consumer groups' coordinators answer while they cannot serve: the cluster
# is then DEGRADED, not the command failed.
_COORDINATORS_DOWN = (CoordinatorLoadInProgressError, CoordinatorNotAvailableError,
                      RequestTimedOutError)


@click.group()
def cluster() -> None:
    """The cluster's health: controller, storage nodes, partitions, consumer groups."""


class HealthUnknown(click.ClickException):
    """The health could not be found out: the message says why."""

    exit_code = EXIT_UNKNOWN


class WrongOption(click.UsageError):
    """A usage error of ``status``: click's exit status 2 means UNAVAILABLE here."""

    exit_code = EXIT_UNKNOWN


class _StatusCommand(click.Command):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise WrongOption(exc.format_message(), exc.ctx) from None


@cluster.command(cls=_StatusCommand)
@click.option("--json", "as_json", is_flag=True, help="The report as one JSON object.")
@click.option("--limit", type=click.IntRange(min=0), default=DEFAULT_LIMIT, show_default=True,
              help="List at most this many partitions of each kind, and groups (the "
                   "counts are always whole).")
@click.option("--no-lag", is_flag=True,
              help="Skip the consumer groups' lag (an offset fetch per group and an end "
                   "offset lookup); their count and states are still shown.")
@click.option("--timeout-ms", type=click.IntRange(min=1), default=DEFAULT_TIMEOUT_MS,
              show_default=True,
              help="How long to wait for the consumer groups' coordinators and the end "
                   "offsets; coordinators that do not answer make the cluster DEGRADED.")
@click.pass_context
def status(ctx: click.Context, as_json: bool, limit: int, no_lag: bool,
           timeout_ms: int) -> None:
    """The cluster's health: the active controller, the storage nodes (alive, and
    those replica lists name but that are not alive), offline, under-min-ISR,
    under-replicated and reassigning partitions, consumer groups with their lag,
    and a one-line verdict.

    \b
    Exit status, for scripts and probes:
      0  HEALTHY
      1  DEGRADED: under-min-ISR or under-replicated partitions, a storage node
         not alive, reassignments in progress, or the consumer groups'
         coordinators not answering
      2  UNAVAILABLE: offline partitions (no leader), no active controller,
         or no storage node alive
      3  the health could not be found out: the gateway cannot be reached,
         TLS or authentication failed, access was refused, or a wrong option

    Consumer lag is shown, never judged. With ACLs, the report covers what the
    user may describe.
    """
    try:
        snapshot = friendly_errors(gather)(ctx, measure_lag=not no_lag, timeout_ms=timeout_ms)
    except click.ClickException as exc:
        raise HealthUnknown(exc.message) from exc
    report = assess(snapshot, limit)
    if as_json:
        click.echo(json.dumps(report.as_json()))
    else:
        print_report(report)
    ctx.exit(report.exit_status)


# ----------------------------------------------------------------- gathering

def open_consumer(ctx: click.Context) -> Consumer:
    """A consumer of the command's gateway, for end offsets only (no group); a
    module-level name so that tests can put a fake in its place."""
    from strand.consumer import Consumer

    return Consumer(bootstrap(ctx), **security(ctx))


def gather(ctx: click.Context, *, measure_lag: bool, timeout_ms: int) -> ClusterSnapshot:
    """Describe the cluster through the command's gateway (see ClusterSnapshot)."""
    with open_admin(ctx) as admin:
        described = admin.describe_cluster()
        partitions = tuple(
            PartitionState(topic.name, p.partition, p.leader, p.replicas, p.isr)
            for topic in _describe_every_topic(admin) for p in topic.partitions)
        min_insync, notes = _min_insync_replicas(
            admin, topics_that_may_be_under_min_isr(partitions))
        reassignments = tuple(ReassignmentState(r.topic, r.partition, r.adding, r.removing)
                              for r in admin.list_partition_reassignments())
        online = {TopicPartition(p.topic, p.partition) for p in partitions
                  if p.leader is not None}
        groups, unavailable, group_notes = _groups(
            admin, lambda: open_consumer(ctx), online, measure_lag, timeout_ms)
    return ClusterSnapshot(
        cluster_id=described.cluster_id,
        brokers=tuple(BrokerState(b.node_id, b.rack) for b in described.brokers),
        partitions=partitions,
        controller_id=described.controller,
        min_insync_replicas=min_insync, reassignments=reassignments, groups=groups,
        groups_unavailable=unavailable, lag_measured=measure_lag,
        notes=(*notes, *group_notes))


def _describe_every_topic(admin: Admin) -> list[TopicDescription]:
    """Every topic, internal ones too (their health is the groups' and transactions')."""
    try:
        return admin.describe_topics(admin.list_topics(include_internal=True))
    except UnknownTopicOrPartitionError:  # one was deleted between the two calls
        return admin.describe_topics(admin.list_topics(include_internal=True))


def _min_insync_replicas(admin: Admin, topics: set[str]) -> tuple[dict[str, int], list[str]]:
    """``min.insync.replicas`` of ``topics``, and a note naming those it could not read."""
    found: dict[str, int] = {}
    refused: list[str] = []
    for topic in sorted(topics):
        try:
            configs = admin.describe_configs(topic)
        except UnknownTopicOrPartitionError:  # deleted since it was described
            continue
        except AuthorizationError:
            refused.append(topic)
            continue
        value = configs.get("min.insync.replicas")
        if value is not None:
            found[topic] = int(value.value)
    notes = [f"min.insync.replicas not checked (configs not readable): {', '.join(refused)}"
             ] if refused else []
    return found, notes


def _groups(admin: Admin, open_end_offsets: Callable[[], Consumer],
            online: set[TopicPartition], measure_lag: bool, timeout_ms: int
            ) -> tuple[tuple[GroupSnapshot, ...], str | None, list[str]]:
    """The consumer groups with their lag, why they could not be listed (None: they
    were), and notes on the lag that could not be measured."""
    try:
        listed = admin.list_groups(timeout_ms)
    except _COORDINATORS_DOWN as exc:
        return (), f"{exc.code.name}: {exc}", []
    if not measure_lag:
        return tuple(GroupSnapshot(g.group_id, g.state) for g in listed), None, []
    notes: list[str] = []
    committed: dict[str, dict[TopicPartition, int]] = {}
    unanswered: list[str] = []
    for listing in listed:
        try:
            committed[listing.group_id] = admin.list_group_offsets(listing.group_id)
        except GroupIdNotFoundError:  # deleted since the listing
            committed[listing.group_id] = {}
        except _COORDINATORS_DOWN:
            unanswered.append(listing.group_id)
    if unanswered:
        notes.append(f"committed offsets not fetched: {', '.join(unanswered)}")
    # Offline partitions are left out: asking their end offset would wait the whole
    # timeout for a leader; they count in lag_unknown_partitions instead.
    wanted = sorted({tp for offsets in committed.values() for tp in offsets if tp in online})
    ends: dict[TopicPartition, int] = {}
    if wanted:
        try:
            with open_end_offsets() as consumer:
                ends = consumer.end_offsets(wanted, timeout_ms)
        except NetworkError:
            raise
        except StrandError as exc:
            notes.append(f"end offsets not read ({exc.code.name}: {exc}): lag unknown")
    return tuple(GroupSnapshot(g.group_id, g.state, *group_lag(committed.get(g.group_id), ends))
                 for g in listed), None, notes


def group_lag(committed: Mapping[TopicPartition, int] | None,
              ends: Mapping[TopicPartition, int]) -> tuple[int | None, int]:
    """A group's total lag over its committed partitions whose end offset is known, and
    how many were left out; (None, 0) when nothing was committed or fetched."""
    if not committed:
        return None, 0
    lags = [partition_lag(offset, ends.get(tp)) for tp, offset in committed.items()]
    known = [lag for lag in lags if lag is not None]
    return (sum(known) if known else None), len(lags) - len(known)


# ----------------------------------------------------------------- printing

def verdict_line(report: HealthReport) -> str:
    """``HEALTHY``, or the verdict and its reasons: the first line, for `head -1`."""
    if not report.reasons:
        return report.verdict.name
    return f"{report.verdict.name}: {'; '.join(report.reasons)}"


def summary_rows(report: HealthReport) -> list[tuple[str, str]]:
    """(what, its state) rows of the text report."""
    if not report.controller_reported:
        controller = "not reported by the gateway"
    else:
        controller = report.controller_id or "none"
    nodes = ", ".join(f"{b.node_id} (rack {b.rack})" if b.rack else str(b.node_id)
                      for b in report.brokers)
    brokers = f"{len(report.brokers)} alive" + (f": {nodes}" if nodes else "")
    if report.missing_brokers:
        brokers += ("; not alive but named by replica lists: "
                    + ", ".join(map(str, report.missing_brokers)))
    rows = [("cluster", report.cluster_id), ("controller", controller),
            ("storage nodes", brokers),
            ("topics", f"{report.topic_count} ({report.partition_count} partitions)")]
    rows += [("offline", str(report.offline.total)),
             ("under min ISR", str(report.under_min_isr.total)),
             ("under-replicated", str(report.under_replicated.total)),
             ("reassigning", str(report.reassigning.total))]
    if report.groups_unavailable is not None:
        groups = f"unavailable ({report.groups_unavailable})"
    else:
        states = ", ".join(f"{count} {state}" for state, count in report.group_states.items())
        groups = str(report.groups.total) + (f" ({states})" if states else "")
        if not report.lag_measured:
            groups += "; lag not measured (--no-lag)"
    rows.append(("consumer groups", groups))
    return rows


def _ids(nodes: Sequence[int]) -> str:
    return ",".join(map(str, nodes)) or "-"


def _text(value: str) -> Text:
    from rich.text import Text

    return Text(value)  # never markup: topic and group names may hold [brackets]


def _partitions_table(report: HealthReport) -> Table | None:
    """The listed partitions of every kind, each once with all its problems; the
    caption counts those left out."""
    from rich.table import Table

    kinds = (("offline", report.offline), ("under min ISR", report.under_min_isr),
             ("under-replicated", report.under_replicated))
    problems: dict[tuple[str, int], list[str]] = {}
    states: dict[tuple[str, int], PartitionState] = {}
    for label, bounded in kinds:
        for p in bounded.shown:
            problems.setdefault((p.topic, p.partition), []).append(label)
            states[p.topic, p.partition] = p
    for move in report.reassigning.shown:
        problems.setdefault((move.topic, move.partition), []).append(
            f"reassigning (adding {_ids(move.adding)}, removing {_ids(move.removing)})")
    if not problems:
        return None
    left_out = [f"{bounded.more} more {label}" for label, bounded in
                (*kinds, ("reassigning", report.reassigning)) if bounded.more]
    table = Table(title="affected partitions",
                  caption=f"… and {', '.join(left_out)} (--limit)" if left_out else None)
    for column in ("partition", "problem", "leader", "replicas", "isr"):
        table.add_column(column, overflow="fold")
    for key in sorted(problems):
        state = states.get(key)
        leader = "-" if state is None else "none" if state.leader is None else str(state.leader)
        table.add_row(_text(f"{key[0]}-{key[1]}"), ", ".join(problems[key]), leader,
                      "-" if state is None else _ids(state.replicas),
                      "-" if state is None else _ids(state.isr))
    return table


def _groups_table(report: HealthReport) -> Table | None:
    from rich.table import Table

    if not report.groups.shown:
        return None
    more = report.groups.more
    table = Table(title="consumer groups, most lag first" if report.lag_measured
                  else "consumer groups", caption=f"… and {more} more (--limit)" if more else None)
    for column in ("group", "state", "lag"):
        table.add_column(column, overflow="fold", justify="right" if column == "lag" else "left")
    for g in report.groups.shown:
        lag = "-" if g.lag is None else str(g.lag)
        if g.lag_unknown_partitions:
            lag += f" (+{g.lag_unknown_partitions} partition(s) unknown)"
        table.add_row(_text(g.group_id), g.state, lag)
    return table


def print_report(report: HealthReport) -> None:
    from rich.table import Table

    click.echo(verdict_line(report))
    summary = Table(show_header=False, box=None, pad_edge=False)
    summary.add_column(style="bold")
    summary.add_column(overflow="fold")
    for label, value in summary_rows(report):
        summary.add_row(label, _text(value))
    print_table(summary)
    for table in (_partitions_table(report), _groups_table(report)):
        if table is not None:
            print_table(table)
    for note in report.notes:
        err.print(_text(f"note: {note}"))
