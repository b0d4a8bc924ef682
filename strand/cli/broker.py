"""``strand broker list`` (Kafka's kafka-broker-api-versions / the brokers of
kafka-metadata-quorum): the storage nodes the gateway knows, with what they lead."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING

import click

from strand.cli.common import friendly_errors, open_admin

if TYPE_CHECKING:  # clients (gRPC) and rich load when a command runs
    pass


@click.group()
def broker() -> None:
    """The cluster's storage nodes (Kafka's brokers)."""


@broker.command(name="list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly_errors
def list_(ctx: click.Context, as_json: bool) -> None:
    """Every live storage node: id, address, rack, and how many partition replicas
    it holds and leads. A node that stopped renewing its lease is not listed."""
    from rich.console import Console
    from rich.table import Table

    with open_admin(ctx) as admin:
        cluster = admin.describe_cluster()
        topics = admin.describe_topics(admin.list_topics(include_internal=True))
    leaders: Counter[int] = Counter()
    replicas: Counter[int] = Counter()
    for topic in topics:
        for p in topic.partitions:
            replicas.update(p.replicas)
            if p.leader is not None:
                leaders[p.leader] += 1
    rows = [{"id": b.node_id, "address": b.address, "rack": b.rack, "state": "alive",
             "replicas": replicas[b.node_id], "leaders": leaders[b.node_id]}
            for b in cluster.brokers]
    if as_json:
        click.echo(json.dumps({"cluster": cluster.cluster_id,
                               "controller": cluster.controller, "brokers": rows}))
        return
    table = Table(title=f"cluster {cluster.cluster_id}: {len(rows)} storage nodes")
    for column in ("id", "address", "rack", "state", "replicas", "leaders"):
        table.add_column(column, justify="right" if column in ("id", "replicas", "leaders")
                         else "left")
    for row in rows:
        table.add_row(str(row["id"]), str(row["address"]), str(row["rack"] or "-"),
                      str(row["state"]), str(row["replicas"]), str(row["leaders"]))
    Console(soft_wrap=True).print(table)
