"""Entry point of the ``strand`` command (command shapes follow Kafka's tools).

Subcommands are imported only when they run (click's LazyGroup pattern): ``strand
--help`` and ``strand dev …`` do not load gRPC and the SDK's clients, which ``topic``,
``produce`` and the rest need. Each entry of :data:`COMMANDS` names the command's
module and its one-line help, shown by ``strand --help`` without importing it
(tests/unit/test_cli_lazy.py checks it is the command's own).
"""

from __future__ import annotations

import importlib
import os

import click

from strand.security.settings import client_tls_settings

# name → ("module:attribute", the command's short help)
COMMANDS: dict[str, tuple[str, str]] = {
    "acl": ("strand.cli.acl:acl", "Add, list and remove ACLs (Kafka's kafka-acls)."),
    "bench": ("strand.cli.bench:bench",
              "Measure produce and consume throughput against a cluster."),
    "broker": ("strand.cli.broker:broker", "The cluster's storage nodes (Kafka's brokers)."),
    "cluster": ("strand.cli.cluster:cluster", "The cluster's health: controller, storage "
                                              "nodes, partitions, consumer groups."),
    "config": ("strand.cli.configs:config", "Describe configs (Kafka's kafka-configs); "
                                            "change them with `strand topic alter`."),
    "consume": ("strand.cli.produce:consume", "Print the records of TOPIC, one value per line."),
    "dev": ("strand.cli.dev:dev", "Run a local development cluster: etcd, 2 controllers, "
                                  "storage nodes, a gateway."),
    "group": ("strand.cli.group:group", "List, describe, reset and delete consumer groups."),
    "mirror": ("strand.cli.mirror:mirror", "Translate a consumer group's offsets to the "
                                           "target of a mirror."),
    "produce": ("strand.cli.produce:produce",
                "Send each line of standard input as a record of TOPIC."),
    "quota": ("strand.cli.quota:quota", "Set, list and remove client quotas "
                                        "(Kafka's kafka-configs --entity-type users/clients)."),
    "topic": ("strand.cli.topic:topic", "Create, list, describe, alter and delete topics."),
    "transactions": ("strand.cli.transactions:transactions",
                     "List, describe and abort transactions; find hanging ones (KIP-664)."),
    "user": ("strand.cli.user:user", "Add, list and remove SCRAM-SHA-512 users "
                                     "(Kafka's kafka-configs --entity-type users)."),
    "verify": ("strand.cli.verify:verify", "Check a cluster end to end: sequence-numbered "
                                           "records written, then read back."),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported from ``lazy`` ("module:attribute") when
    one is run or its own help is asked for."""

    def __init__(self, *args: object, lazy: dict[str, tuple[str, str]],
                 **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy or cmd_name in self.commands:
            return super().get_command(ctx, cmd_name)
        path, _ = self.lazy[cmd_name]
        module, _, attribute = path.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{path} is a {type(command).__name__}, not a click command")
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Like click's, with the short help from the table: listing the commands
        must not import them."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            # An unloaded command's help goes through a stand-in, shortened as click does.
            command = self.commands.get(name) or click.Command(name, help=self.lazy[name][1])
            rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, lazy=COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap", envvar="STRAND_BOOTSTRAP", default=None, metavar="HOST:PORT",
              help="a gateway address (default: the local dev cluster)")
@click.option("--tls", is_flag=True, envvar="STRAND_TLS",
              help="TLS to the gateway, verified with the system's CAs unless --tls-ca "
                   "(implied by any --tls-* file)")
@click.option("--tls-ca", envvar="STRAND_TLS_CA", default=None, metavar="PEM",
              help="the CA bundle the gateway's certificate chains to")
@click.option("--tls-cert", envvar="STRAND_TLS_CERT", default=None, metavar="PEM",
              help="this client's certificate (mutual TLS), with --tls-key")
@click.option("--tls-key", envvar="STRAND_TLS_KEY", default=None, metavar="PEM",
              help="the key of --tls-cert")
@click.option("--user", envvar="STRAND_USER", default=None, metavar="NAME",
              help="authenticate as this SCRAM-SHA-512 user; the password comes from "
                   "--password-file or STRAND_PASSWORD")
@click.option("--password-file", envvar="STRAND_PASSWORD_FILE", default=None,
              type=click.Path(dir_okay=False), metavar="PATH",
              help="a file holding --user's password (its first line)")
@click.pass_context
def cli(ctx: click.Context, bootstrap: str | None, tls: bool, tls_ca: str | None,
        tls_cert: str | None, tls_key: str | None, user: str | None,
        password_file: str | None) -> None:
    """Strand: a partitioned, replicated, durable commit log."""
    ctx.obj = {"bootstrap": bootstrap,
               "security": client_tls_settings(tls, tls_ca, tls_cert, tls_key, user,
                                               _password(user, password_file))}


def _password(user: str | None, password_file: str | None) -> str | None:
    """--user's password: never on the command line (it would show in ps and shell
    history)."""
    if not user:
        if password_file:
            raise click.UsageError("--password-file needs --user")
        return None
    if password_file:
        try:
            with open(password_file, encoding="utf-8") as lines:
                password = lines.readline().rstrip("\r\n")
        except OSError as exc:
            raise click.UsageError(f"cannot read --password-file: {exc}") from exc
    else:
        password = os.environ.get("STRAND_PASSWORD", "")
    if not password:
        raise click.UsageError(f"no password for --user {user}: give --password-file or set "
                               "STRAND_PASSWORD")
    return password


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
