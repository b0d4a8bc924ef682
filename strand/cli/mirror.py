"""``strand mirror``: what the mirror job (spark-on-k8s/jobs/mirror.py) leaves for
people to use, on the command line."""

from __future__ import annotations

import json

import click

from strand.cli.common import bootstrap, friendly_errors, print_table


@click.group()
def mirror() -> None:
    """Translate a consumer group's offsets to the target of a mirror."""


@mirror.command()
@click.option("--group", "group_id", required=True, help="the consumer group to move")
@click.option("--source-bootstrap", required=True,
              help="a gateway of the source cluster (where the group has read)")
@click.option("--source-cluster", required=True,
              help="the source cluster's name, as the mirror job was given it")
@click.option("--apply", is_flag=True,
              help="commit the positions for the group on the target (the group must "
                   "have no active members there)")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly_errors
def translate(ctx: click.Context, group_id: str, source_bootstrap: str, source_cluster: str,
              apply: bool, as_json: bool) -> None:
    """Translate GROUP's committed offsets on the source into positions on the target
    (this command's --bootstrap), exactly, from the offset map the mirror writes with
    its copies. With --apply the group resumes there from them."""
    from strand.mirror.translate import TranslationGap, translate_group

    try:
        positions = translate_group(source_bootstrap, bootstrap(ctx), source_cluster,
                                    group_id, apply=apply)
    except (TranslationGap, LookupError) as exc:
        raise click.ClickException(str(exc)) from None
    rows = [{"topic": tp.topic, "partition": tp.partition, "offset": offset}
            for tp, offset in sorted(positions.items())]
    if as_json:
        click.echo(json.dumps({"group": group_id, "applied": apply, "positions": rows}))
        return
    from rich.table import Table

    table = Table("TOPIC", "PARTITION", "OFFSET",
                  title=f"{group_id} on the target" + (" (committed)" if apply else ""))
    for tp, offset in sorted(positions.items()):
        table.add_row(tp.topic, str(tp.partition), str(offset))
    print_table(table)
