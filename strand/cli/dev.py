"""``strand dev up|status|restart|down``: a local cluster of real processes.

The launcher (and gRPC, for health checks) and rich are imported inside the commands,
so that ``strand dev --help`` starts at once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from rich.console import Console

dir_option = click.option(
    "--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
    default=None, help="where the cluster keeps data, logs and cluster.json (default: "
                       "$STRAND_DEV_DIR, else the directory of the last `strand dev up`, "
                       "else ~/.strand/dev)")


def console() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def chosen(directory: Path | None) -> Path:
    from strand import devcluster

    return directory or devcluster.default_directory()


@click.group()
def dev() -> None:
    """Run a local development cluster: etcd, 2 controllers, storage nodes, a gateway."""


@dev.command()
@dir_option
@click.option("--storage-nodes", default=3, show_default=True, type=click.IntRange(1, 9))
def up(directory: Path | None, storage_nodes: int) -> None:
    """Start the cluster; returns once it serves.

    Later commands find it without --dir or STRAND_DEV_DIR until `strand dev down`.
    """
    import os

    from strand import devcluster
    from strand.client.bootstrap import ENV_DEV_DIR

    directory = chosen(directory)
    if not os.environ.get(ENV_DEV_DIR):  # $STRAND_DEV_DIR wins anyway: nothing to remember
        devcluster.remember(directory)  # before the start: `dev down` finds a half-started one
    out = console()
    try:
        with out.status("starting the dev cluster") as spinner:
            cluster = devcluster.up(directory, storage_nodes=storage_nodes,
                                    progress=lambda msg: spinner.update(msg))
    except devcluster.DevClusterError as exc:
        raise click.ClickException(str(exc)) from exc
    out.print(f"[green]dev cluster serving[/green]: gateway {cluster.gateway}, "
              f"Kafka clients' bootstrap {cluster.kafka}, "
              f"etcd {cluster.etcd}, {storage_nodes} storage nodes; "
              f"logs in {directory / 'logs'}")


@dev.command()
@dir_option
@click.option("--json", "as_json", is_flag=True, help="one JSON object on stdout")
def status(directory: Path | None, as_json: bool) -> None:
    """Role, id, pid, address and state of every process; how to restart the stopped."""
    from strand import devcluster

    directory = chosen(directory)
    rows = devcluster.status(directory)
    if as_json:
        click.echo(json.dumps({"directory": str(directory), "processes": rows}))
        return
    out = console()
    if not rows:
        out.print(f"no dev cluster in {directory} (start one with: strand dev up)")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"dev cluster in {directory}")
    for column in ("role", "id", "pid", "address", "state"):
        table.add_column(column)
    for row in rows:
        state = ("[green]serving[/green]" if row["serving"] else
                 "[yellow]starting[/yellow]" if row["running"] else "[red]stopped[/red]")
        table.add_row(str(row["role"]), str(row["id"]), str(row["pid"]), str(row["address"]),
                      state)
    Console().print(table)
    stopped = [str(row["id"]) for row in rows if not row["running"]]
    if stopped:
        dir_flag = "" if directory == devcluster.default_directory() else f" --dir {directory}"
        out.print(f"[red]{len(stopped)} stopped[/red]: {', '.join(stopped)}; start again with "
                  + " / ".join(f"strand dev restart {name}{dir_flag}" for name in stopped)
                  + f" (logs in {directory / 'logs'})")


@dev.command()
@dir_option
@click.argument("name")
def restart(directory: Path | None, name: str) -> None:
    """Start process NAME again (e.g. storage-2, gateway; see `strand dev status`):
    stopped first if it runs, then started with its own ports and data."""
    from strand import devcluster

    directory = chosen(directory)
    out = console()
    try:
        info = devcluster.restart(directory, name, progress=lambda msg: out.print(msg))
    except devcluster.DevClusterError as exc:
        raise click.ClickException(str(exc)) from exc
    out.print(f"[green]{name} serving[/green] on {info.address} (pid {info.pid})")


@dev.command()
@dir_option
def down(directory: Path | None) -> None:
    """Stop every process of the cluster (data is kept for the next `up`)."""
    from strand import devcluster

    directory = chosen(directory)
    out = console()
    stopped = devcluster.down(directory, progress=lambda msg: out.print(msg))
    devcluster.forget(directory)
    out.print(f"stopped {stopped} processes" if stopped else
              f"no dev cluster running from {directory}")
