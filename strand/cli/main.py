"""Entry point of the ``strand`` command (command shapes follow Kafka's tools)."""

from __future__ import annotations

import click

from strand.cli.bench import bench
from strand.cli.broker import broker
from strand.cli.configs import config
from strand.cli.dev import dev
from strand.cli.group import group
from strand.cli.produce import consume, produce
from strand.cli.topic import topic


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap", envvar="STRAND_BOOTSTRAP", default=None, metavar="HOST:PORT",
              help="a gateway address (default: the local dev cluster)")
@click.pass_context
def cli(ctx: click.Context, bootstrap: str | None) -> None:
    """Strand: a partitioned, replicated, durable commit log."""
    ctx.obj = {"bootstrap": bootstrap}


for command in (dev, topic, produce, consume, group, broker, config, bench):
    cli.add_command(command)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
