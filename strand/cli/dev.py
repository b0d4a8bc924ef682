"""``strand dev up|status|down``: a local cluster of real processes."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from strand import devcluster

console = Console(stderr=True)
dir_option = click.option(
    "--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
    default=None, help="where the cluster keeps data, logs and cluster.json "
                       "(default: $STRAND_DEV_DIR or ~/.strand/dev)")


@click.group()
def dev() -> None:
    """Run a local development cluster: etcd, 2 controllers, storage nodes, a gateway."""


@dev.command()
@dir_option
@click.option("--storage-nodes", default=3, show_default=True, type=click.IntRange(1, 9))
def up(directory: Path | None, storage_nodes: int) -> None:
    """Start the cluster; returns once it serves."""
    directory = directory or devcluster.default_directory()
    try:
        with console.status("starting the dev cluster") as spinner:
            cluster = devcluster.up(directory, storage_nodes=storage_nodes,
                                    progress=lambda msg: spinner.update(msg))
    except devcluster.DevClusterError as exc:
        raise click.ClickException(str(exc)) from exc
    console.print(f"[green]dev cluster serving[/green]: gateway {cluster.gateway}, "
                  f"etcd {cluster.etcd}, {storage_nodes} storage nodes; "
                  f"logs in {directory / 'logs'}")


@dev.command()
@dir_option
@click.option("--json", "as_json", is_flag=True, help="one JSON object on stdout")
def status(directory: Path | None, as_json: bool) -> None:
    """Role, id, pid and address of every process."""
    directory = directory or devcluster.default_directory()
    rows = devcluster.status(directory)
    if as_json:
        click.echo(json.dumps({"directory": str(directory), "processes": rows}))
        return
    if not rows:
        console.print(f"no dev cluster in {directory} (start one with: strand dev up)")
        return
    table = Table(title=f"dev cluster in {directory}")
    for column in ("role", "id", "pid", "address", "state"):
        table.add_column(column)
    for row in rows:
        state = ("[green]serving[/green]" if row["serving"] else
                 "[yellow]starting[/yellow]" if row["running"] else "[red]stopped[/red]")
        table.add_row(str(row["role"]), str(row["id"]), str(row["pid"]), str(row["address"]),
                      state)
    Console().print(table)


@dev.command()
@dir_option
def down(directory: Path | None) -> None:
    """Stop every process of the cluster (data is kept for the next `up`)."""
    directory = directory or devcluster.default_directory()
    stopped = devcluster.down(directory, progress=lambda msg: console.print(msg))
    console.print(f"stopped {stopped} processes" if stopped else
                  f"no dev cluster running from {directory}")
