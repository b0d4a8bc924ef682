"""``strand user add|remove|list`` (Kafka's ``kafka-configs.sh --entity-type users
--alter --add-config 'SCRAM-SHA-512=[...]'``): the SCRAM-SHA-512 users that can
authenticate to the cluster.

A password is never an argument (it would show in ``ps`` and the shell's history):
it comes from a file or a hidden prompt, and only its salted SCRAM form leaves this
process (see :mod:`strand.admin_acls`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from strand.cli.common import err, friendly_errors, open_admin, print_table
from strand.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MECHANISM,
    MIN_ITERATIONS,
    make_credential,
    validate_username,
)

if TYPE_CHECKING:  # clients (gRPC) load when a command runs
    pass



@click.group()
def user() -> None:
    """Add, list and remove SCRAM-SHA-512 users (Kafka's kafka-configs --entity-type users)."""


def _check_name(name: str) -> None:
    try:
        validate_username(name)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'NAME'") from None


def read_password(name: str, password_file: str | None) -> str:
    """The first line of ``password_file``, else typed twice at a hidden prompt."""
    if password_file is None:
        password: str = click.prompt(f"Password for user {name}", hide_input=True,
                                     confirmation_prompt=True, err=True)
        return password
    try:
        with open(password_file, encoding="utf-8") as lines:
            password = lines.readline().rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"cannot read it: {exc}",
                                 param_hint="'--password-file'") from None
    if not password:
        raise click.BadParameter(f"its first line is empty: {password_file}",
                                 param_hint="'--password-file'")
    return password


@user.command()
@click.argument("name")
@click.option("--password-file", default=None, metavar="PATH",
              type=click.Path(dir_okay=False),
              help="A file whose first line is NAME's password (default: ask for it, "
                   "hidden, twice). Never give a password as an argument.")
@click.option("--iterations", type=click.IntRange(MIN_ITERATIONS, MAX_ITERATIONS),
              default=DEFAULT_ITERATIONS, show_default=True,
              help="SCRAM iterations: more makes a guessed password slower to check.")
@click.pass_context
@friendly_errors
def add(ctx: click.Context, name: str, password_file: str | None, iterations: int) -> None:
    """Create user NAME with a SCRAM-SHA-512 password, or change NAME's password (its
    open sessions end). The password is read from --password-file or asked for.

    \b
    strand user add alice
    strand user add alice --password-file alice.password
    """
    _check_name(name)
    password = read_password(name, password_file)
    try:  # the checks upsert_scram_user makes, before connecting
        make_credential(password, iterations)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="password") from None
    with open_admin(ctx) as admin:
        admin.upsert_scram_user(name, password, iterations)
    err.print(f"set the {MECHANISM} password of user {name} ({iterations} iterations)")


@user.command()
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
@friendly_errors
def remove(ctx: click.Context, name: str, yes: bool) -> None:
    """Remove user NAME's credential: it can no longer authenticate, and its open
    sessions end. Its ACLs stay (remove them with `strand acl remove --principal
    User:NAME`)."""
    if not yes:
        click.confirm(f"Remove user {name}?", abort=True, err=True)
    with open_admin(ctx) as admin:
        admin.delete_scram_user(name)
    err.print(f"removed user {name}")


@user.command(name="list")
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("--json", "as_json", is_flag=True,
              help="A JSON array, one object per user.")
@click.pass_context
@friendly_errors
def list_(ctx: click.Context, names: tuple[str, ...], as_json: bool) -> None:
    """The users with a credential (only NAMEs if given): name, mechanism and
    iterations. Passwords cannot be shown: the cluster does not have them."""
    from rich.table import Table

    with open_admin(ctx) as admin:
        users = sorted(admin.describe_scram_users(names), key=lambda u: u.name)
    if as_json:
        click.echo(json.dumps([{"name": u.name, "mechanism": u.mechanism,
                                "iterations": u.iterations} for u in users]))
        return
    if not users:
        err.print("no users")
        return
    table = Table()
    for column in ("name", "mechanism", "iterations"):
        table.add_column(column, overflow="fold")
    for u in users:
        table.add_row(u.name, u.mechanism, str(u.iterations))
    print_table(table)
