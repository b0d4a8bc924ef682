"""``strand transactions list|describe|describe-producers|find-hanging|abort`` (Kafka's
kafka-transactions.sh, KIP-664).

A hanging transaction is open on a partition while no coordinator will ever end it
(see :mod:`strand.client.transactions`): ``find-hanging`` lists them, ``abort`` writes
the ABORT marker that ends one (docs/operations.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from strand.cli.common import err, friendly_errors, open_admin, print_table

if TYPE_CHECKING:  # clients (gRPC) and rich load when a command runs
    from strand.admin import Admin
    from strand.client.transactions import OpenTransaction, ProducerState

DEFAULT_MAX_TIMEOUT_MIN = 15.0  # Kafka's tool: transaction.max.timeout.ms


@click.group()
def transactions() -> None:
    """List, describe and abort transactions; find hanging ones (KIP-664)."""


def _table(columns: Sequence[str], rows: Sequence[Sequence[object]],
           title: str | None = None) -> None:
    from rich.table import Table

    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("-" if cell is None else str(cell) for cell in row))
    print_table(table)


def _json(value: Any) -> None:
    click.echo(json.dumps(value))


@transactions.command(name="list")
@click.option("--state", "states", multiple=True,
              help="Only transactions in this state (Ongoing, PrepareCommit, ...); repeatable.")
@click.option("--producer-id", "producer_ids", multiple=True, type=click.IntRange(min=0),
              help="Only this producer id; repeatable.")
@click.option("--duration-filter", type=click.IntRange(min=0), default=None, metavar="MS",
              help="Only transactions open for at least MS milliseconds.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly_errors
def list_(ctx: click.Context, states: tuple[str, ...], producer_ids: tuple[int, ...],
          duration_filter: int | None, as_json: bool) -> None:
    """Every transactional id with its producer id and state."""
    with open_admin(ctx) as admin:
        listed = admin.list_transactions(states, producer_ids, duration_filter)
    if as_json:
        _json([{"transactional_id": t.transactional_id, "producer_id": t.producer_id,
                "state": t.state} for t in listed])
        return
    _table(("TransactionalId", "ProducerId", "TransactionState"),
           [(t.transactional_id, t.producer_id, t.state) for t in listed])


@transactions.command()
@click.argument("transactional_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly_errors
def describe(ctx: click.Context, transactional_id: str, as_json: bool) -> None:
    """TRANSACTIONAL_ID's producer, state, timeout and the partitions of its open
    transaction."""
    with open_admin(ctx) as admin:
        (found,) = admin.describe_transactions([transactional_id])
    now = int(time.time() * 1000)
    duration = None if found.start_time_ms is None else now - found.start_time_ms
    partitions = [f"{tp.topic}-{tp.partition}" for tp in sorted(found.partitions)]
    if as_json:
        _json({"transactional_id": found.transactional_id, "producer_id": found.producer_id,
               "producer_epoch": found.producer_epoch, "state": found.state,
               "timeout_ms": found.timeout_ms, "start_time_ms": found.start_time_ms,
               "duration_ms": duration, "partitions": partitions})
        return
    _table(("TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
            "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
            "TopicPartitions"),
           [(found.transactional_id, found.producer_id, found.producer_epoch, found.state,
             found.timeout_ms, found.start_time_ms, duration, ",".join(partitions) or None)])


_PRODUCER_COLUMNS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                     "LastTimestamp", "CurrentTransactionStartOffset")


def _producer_row(p: ProducerState) -> tuple[object, ...]:
    return (p.producer_id, p.producer_epoch, p.coordinator_epoch, p.last_sequence,
            p.last_timestamp, p.current_txn_start_offset)


def _producer_json(p: ProducerState) -> dict[str, Any]:
    return {"producer_id": p.producer_id, "producer_epoch": p.producer_epoch,
            "coordinator_epoch": p.coordinator_epoch, "last_sequence": p.last_sequence,
            "last_timestamp": p.last_timestamp,
            "current_transaction_start_offset": p.current_txn_start_offset}


@transactions.command(name="describe-producers")
@click.option("--topic", required=True)
@click.option("--partition", required=True, type=click.IntRange(min=0))
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly_errors
def describe_producers(ctx: click.Context, topic: str, partition: int, as_json: bool) -> None:
    """The producers the leader of TOPIC's PARTITION knows: epochs, last sequence and
    timestamp, and the start offset of an open transaction."""
    with open_admin(ctx) as admin:
        producers = next(iter(admin.describe_producers([(topic, partition)]).values()))
    if as_json:
        _json([_producer_json(p) for p in producers])
        return
    _table(_PRODUCER_COLUMNS, [_producer_row(p) for p in producers])


def _partitions_to_search(admin: Admin, topic: str | None, partition: int | None,
                          broker_id: int | None) -> list[tuple[str, int]]:
    """The partitions named, else those of every topic (internal ones too), limited
    to those with a replica on ``broker_id`` when given."""
    if topic is not None and partition is not None:
        return [(topic, partition)]
    names = [topic] if topic is not None else admin.list_topics(include_internal=True)
    return [(t.name, p.partition) for t in admin.describe_topics(names) for p in t.partitions
            if broker_id is None or broker_id in p.replicas]


def find_hanging_transactions(admin: Admin, partitions: Sequence[tuple[str, int]],
                              max_timeout_ms: float, now_ms: int) -> list[OpenTransaction]:
    """Kafka's find-hanging: the open transactions idle past ``max_timeout_ms`` on
    ``partitions``, checked with the coordinators (ListTransactions by producer id,
    then DescribeTransactions)."""
    from strand.client.transactions import TransactionDescription, hanging, open_transactions
    from strand.errors import TransactionalIdNotFoundError

    candidates = open_transactions(admin.describe_producers(partitions) if partitions else {},
                                   now_ms, max_timeout_ms)
    if not candidates:
        return []
    producer_ids = sorted({c.producer.producer_id for c in candidates})
    transactional_ids = {t.producer_id: t.transactional_id
                         for t in admin.list_transactions(producer_ids=producer_ids)}
    descriptions: dict[str, TransactionDescription | None] = {}
    for tid in sorted(set(transactional_ids.values())):
        try:
            (descriptions[tid],) = admin.describe_transactions([tid])
        except TransactionalIdNotFoundError:  # expired since it was listed
            descriptions[tid] = None
    return hanging(candidates, transactional_ids, descriptions)


@transactions.command(name="find-hanging")
@click.option("--broker-id", type=int, default=None,
              help="Only partitions with a replica on this storage node.")
@click.option("--topic", default=None, help="Only this topic (default: every topic).")
@click.option("--partition", type=click.IntRange(min=0), default=None,
              help="Only this partition of --topic.")
@click.option("--max-transaction-timeout", type=click.FloatRange(min=0, min_open=True),
              default=DEFAULT_MAX_TIMEOUT_MIN, show_default=True, metavar="MINUTES",
              help="The longest transaction timeout of the cluster's producers: open "
                   "transactions idle for longer are checked with the coordinators.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly_errors
def find_hanging(ctx: click.Context, broker_id: int | None, topic: str | None,
                 partition: int | None, max_transaction_timeout: float,
                 as_json: bool) -> None:
    """Open transactions no coordinator will end: they hold the last stable offset and
    read_committed readers back. End one with `strand transactions abort`."""

    if partition is not None and topic is None:
        raise click.UsageError("--partition needs --topic")
    now = int(time.time() * 1000)
    with open_admin(ctx) as admin:
        found = find_hanging_transactions(
            admin, _partitions_to_search(admin, topic, partition, broker_id),
            max_transaction_timeout * 60_000, now)
    if as_json:
        _json([{"topic": h.partition.topic, "partition": h.partition.partition,
                **_producer_json(h.producer),
                "duration_ms": now - h.producer.last_timestamp} for h in found])
        return
    _table(("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
            "StartOffset", "LastTimestamp", "Duration(min)"),
           [(h.partition.topic, h.partition.partition, h.producer.producer_id,
             h.producer.producer_epoch, h.producer.coordinator_epoch,
             h.producer.current_txn_start_offset, h.producer.last_timestamp,
             (now - h.producer.last_timestamp) // 60_000) for h in found])
    if found:
        err.print(f"{len(found)} hanging transaction(s); end one with `strand transactions "
                  "abort --topic T --partition P --start-offset O`")


@transactions.command()
@click.option("--topic", required=True)
@click.option("--partition", required=True, type=click.IntRange(min=0))
@click.option("--start-offset", type=click.IntRange(min=0), default=None,
              help="The first offset of the open transaction to abort (as find-hanging "
                   "shows it); the producer and epochs are looked up.")
@click.option("--producer-id", type=click.IntRange(min=0), default=None)
@click.option("--producer-epoch", type=click.IntRange(0, 32767), default=None)
@click.option("--coordinator-epoch", type=int, default=None,
              help="As describe-producers shows it (none or -1: 0).")
@click.pass_context
@friendly_errors
def abort(ctx: click.Context, topic: str, partition: int, start_offset: int | None,
          producer_id: int | None, producer_epoch: int | None,
          coordinator_epoch: int | None) -> None:
    """End a hanging transaction on TOPIC's PARTITION with an ABORT marker: give
    --start-offset, or --producer-id, --producer-epoch and --coordinator-epoch."""

    explicit = (producer_id, producer_epoch, coordinator_epoch)
    if (start_offset is None) == all(v is None for v in explicit):
        raise click.UsageError("identify the transaction by --start-offset, or by "
                               "--producer-id, --producer-epoch and --coordinator-epoch "
                               "(not both)")
    with open_admin(ctx) as admin:
        if start_offset is not None:
            pid, epoch, coordinator = _by_start_offset(admin, topic, partition, start_offset)
        else:
            if any(v is None for v in explicit):
                raise click.UsageError("--producer-id, --producer-epoch and "
                                       "--coordinator-epoch go together")
            assert producer_id is not None and producer_epoch is not None
            pid, epoch, coordinator = producer_id, producer_epoch, coordinator_epoch or 0
        # A transaction that hung before any marker has no coordinator epoch on the
        # partition: 0 is at most any real one (as Kafka's tool).
        admin.abort_transaction(topic, partition, pid, epoch, max(coordinator, 0))
    err.print(f"aborted the transaction of producer {pid} (epoch {epoch}) on "
              f"{topic}-{partition}")


def _by_start_offset(admin: Admin, topic: str, partition: int,
                     start_offset: int) -> tuple[int, int, int]:
    producers = next(iter(admin.describe_producers([(topic, partition)]).values()))
    for p in producers:
        if p.current_txn_start_offset == start_offset:
            return p.producer_id, p.producer_epoch, p.coordinator_epoch or 0
    open_at = sorted(p.current_txn_start_offset for p in producers
                     if p.current_txn_start_offset is not None)
    raise click.ClickException(
        f"no open transaction starts at offset {start_offset} on {topic}-{partition}"
        + (f" (open transactions start at {', '.join(map(str, open_at))})" if open_at
           else " (it has no open transaction)")
        + "; see `strand transactions find-hanging`")
