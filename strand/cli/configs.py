"""``strand config describe topic NAME`` (Kafka's ``kafka-configs.sh --describe
--entity-type topics --entity-name NAME --all``): every config with its value and
where the value comes from."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from strand.cli.common import friendly_errors, open_admin

if TYPE_CHECKING:  # clients (gRPC) and rich load when a command runs
    from rich.table import Table

    from strand.admin import ConfigValue

ENTITY_TYPES = click.Choice(["topic"])


def config_rows(configs: Mapping[str, ConfigValue], overrides_only: bool = False
                ) -> list[dict[str, Any]]:
    """One row per config, by name: ``source`` is ``override`` (set on the topic) or
    ``default`` (the cluster's default)."""
    return [{"name": c.name, "value": c.value,
             "source": "default" if c.is_default else "override"}
            for _, c in sorted(configs.items()) if not (overrides_only and c.is_default)]


def config_table(title: str, rows: list[dict[str, Any]]) -> Table:
    from rich.table import Table

    table = Table(title=title)
    for column in ("config", "value", "source"):
        table.add_column(column)
    for row in rows:
        style = "bold" if row["source"] == "override" else None
        table.add_row(row["name"], row["value"], row["source"], style=style)
    return table


@click.group()
def config() -> None:
    """Describe configs (Kafka's kafka-configs); change them with `strand topic alter`."""


@config.command()
@click.argument("entity_type", metavar="topic", type=ENTITY_TYPES)
@click.argument("name")
@click.option("--overrides", is_flag=True, help="only the configs set on the topic")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly_errors
def describe(ctx: click.Context, entity_type: str, name: str, overrides: bool,
             as_json: bool) -> None:
    """Every config of topic NAME: value and source (override or default)."""
    from rich.console import Console

    with open_admin(ctx) as admin:
        rows = config_rows(admin.describe_configs(name), overrides)
    if as_json:
        click.echo(json.dumps({"type": entity_type, "name": name, "configs": rows}))
        return
    Console(soft_wrap=True).print(config_table(f"configs of {entity_type} {name}", rows))
