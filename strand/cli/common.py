"""Helpers shared by the CLI commands: which gateway, errors in a CLI user's words,
and waiting that says what it waits for."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from strand.client.bootstrap import (
    ENV_BOOTSTRAP,
    BootstrapError,
    dev_cluster_file,
    resolve_bootstrap,
)
from strand.errors import NetworkError, StrandError, UnknownTopicOrPartitionError
from strand.security.settings import ClientTlsSettings, TlsError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from strand.admin import Admin

F = TypeVar("F", bound=Callable[..., Any])


class _Stderr:
    """rich's console on stderr, made on first use: importing rich costs every command
    ~30 ms at start-up, and most print nothing there."""

    _console: Console | None = None

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=True, highlight=False, soft_wrap=True)
        return self._console

    def print(self, *objects: Any, **kwargs: Any) -> None:
        self.console.print(*objects, **kwargs)


err = _Stderr()

# How long a command waits for the gateway to accept a connection before it gives
# up naming the address: Kafka's socket.connection.setup.timeout.ms default.
CONNECT_TIMEOUT_MS = 10_000
_TOPIC_POLL_S = 0.5


@dataclass(frozen=True, slots=True)
class Gateway:
    """The gateway a command talks to, and where its address came from (for messages)."""

    address: str
    source: str


def gateway(ctx: click.Context) -> Gateway:
    """The gateway from ``--bootstrap``, ``$STRAND_BOOTSTRAP`` or the dev cluster's file,
    resolved once per command; a missing or malformed address is a ClickException
    that says which of the three was wrong and what to do."""
    root = ctx.find_root()
    obj = root.obj if isinstance(root.obj, dict) else {}
    found = obj.get("gateway")
    if isinstance(found, Gateway):
        return found
    given = obj.get("bootstrap")
    if given is not None:
        from_env = root.get_parameter_source("bootstrap") == click.core.ParameterSource.ENVIRONMENT
        source = f"${ENV_BOOTSTRAP}" if from_env else "--bootstrap"
        try:
            address = resolve_bootstrap(given)
        except BootstrapError:
            raise click.ClickException(
                f"invalid {source} {given!r}: expected HOST:PORT of a Strand gateway, "
                "e.g. 127.0.0.1:7070") from None
    else:
        path = dev_cluster_file()
        source = f"the dev cluster's {path}"
        if not path.exists():
            raise click.ClickException(
                f"no gateway address: pass --bootstrap HOST:PORT, set {ENV_BOOTSTRAP}=HOST:PORT, "
                f"or start a local cluster with `strand dev up` (it writes {path})")
        try:
            address = resolve_bootstrap(None, {k: v for k, v in os.environ.items()
                                               if k != ENV_BOOTSTRAP})
        except BootstrapError as exc:
            raise click.ClickException(str(exc)) from None
    resolved = Gateway(address, source)
    obj["gateway"] = resolved
    root.obj = obj
    return resolved


def bootstrap(ctx: click.Context) -> str:
    """The address of the gateway to use (see ``gateway``)."""
    return gateway(ctx).address


def open_admin(ctx: click.Context) -> Admin:
    """An admin client of the command's gateway, with its security settings (a
    command module imports this name, so tests can put a fake in its place)."""
    from strand.admin import Admin

    # A command fails at once when the gateway cannot be reached (it says so and
    # how to start one) instead of trying again until its timeout.
    return Admin(bootstrap(ctx), **security(ctx), retry_reads=False)


def security(ctx: click.Context) -> ClientTlsSettings:
    """The TLS settings every client of the command is made with."""
    obj = ctx.find_root().obj
    found = obj.get("security") if isinstance(obj, dict) else None
    return found if isinstance(found, dict) else ClientTlsSettings()  # type: ignore[return-value]


def _unreachable(where: Gateway, why: str) -> click.ClickException:
    return click.ClickException(
        f"cannot connect to the gateway at {where.address} (from {where.source}): {why}; "
        "is the cluster running? start one with `strand dev up`")


def _current_gateway() -> Gateway | None:
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None
    obj = ctx.find_root().obj
    found = obj.get("gateway") if isinstance(obj, dict) else None
    return found if isinstance(found, Gateway) else None


def friendly_errors(func: F) -> F:
    """Turn Strand's typed errors into a one-line message and exit status 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except NetworkError as exc:  # the SDK's TransportError, with its gRPC status
            where = _current_gateway()
            if where is not None and getattr(exc, "status", None) == "UNAVAILABLE":
                raise _unreachable(where, str(exc)) from exc
            raise click.ClickException(f"{exc.code.name}: {exc}") from exc
        except StrandError as exc:
            raise click.ClickException(f"{exc.code.name}: {exc}") from exc
        except TlsError as exc:
            raise click.ClickException(f"TLS: {exc}") from exc

    return wrapper  # type: ignore[return-value]


def connect(ctx: click.Context, timeout_ms: float | None = None) -> str:
    """The gateway's address once it accepts a connection: after a first failure
    says on stderr that it is retrying, and gives up (naming the address and where
    it came from) after ``timeout_ms``, at most CONNECT_TIMEOUT_MS."""
    where = gateway(ctx)
    budget = CONNECT_TIMEOUT_MS if timeout_ms is None else min(timeout_ms, CONNECT_TIMEOUT_MS)

    def retrying() -> None:
        err.print(f"cannot reach the gateway at {where.address} (from {where.source}), "
                  f"retrying for up to {budget / 1000:g} s…")

    from strand.client.channel import wait_for_gateway  # gRPC: only for commands that connect
    from strand.security.tls import ClientTls

    try:
        settings = security(ctx)
        tls = ClientTls.from_settings(settings.get("security_protocol", "PLAINTEXT"),
                                      settings.get("ssl_cafile"), settings.get("ssl_certfile"),
                                      settings.get("ssl_keyfile"))
    except TlsError as exc:
        raise click.ClickException(f"TLS: {exc}") from exc
    if not wait_for_gateway(where.address, budget / 1000, retrying, tls):
        raise _unreachable(where, f"no connection within {budget / 1000:g} s")
    return where.address


def await_topic(ctx: click.Context, topic: str, timeout_ms: float | None,
                what: str = "timeout") -> None:
    """Return once ``topic`` exists. Until then says on stderr what is awaited (topics
    are not created on first use); after ``timeout_ms`` (None: no limit) fails with
    UNKNOWN_TOPIC_OR_PARTITION naming the topic and ``what`` set the limit."""
    from strand.admin import Admin  # the admin client only for this check

    start = time.monotonic()
    address = connect(ctx, timeout_ms)
    said = False
    with Admin(address, **security(ctx)) as admin:
        while True:
            try:
                admin.describe_topics([topic])
            except UnknownTopicOrPartitionError:
                pass
            else:
                if said:
                    err.print(f"topic {topic} exists now")
                return
            if not said:
                err.print(f"waiting for topic {topic} to exist (topics are not created "
                          f"on first use: `strand topic create {topic}`)…")
                said = True
            waited_ms = (time.monotonic() - start) * 1000
            if timeout_ms is not None and waited_ms >= timeout_ms:
                raise click.ClickException(
                    f"UNKNOWN_TOPIC_OR_PARTITION: topic {topic!r} does not exist "
                    f"(waited {what}={timeout_ms:g} ms)")
            time.sleep(_TOPIC_POLL_S if timeout_ms is None
                       else min(_TOPIC_POLL_S, max(0.0, (timeout_ms - waited_ms) / 1000)))


def parse_configs(pairs: tuple[str, ...]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected key=value, got {pair!r}", param_hint="--config")
        configs[key.strip()] = value.strip()
    return configs


def print_table(table: Table) -> None:
    """Print ``table`` whole: never cut a column (a member id) to fit a width. Piped
    output is as wide as the table needs; on a terminal long cells wrap."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        unbounded = console.options.update_width(1 << 20)
        needed = console.measure(table, options=unbounded).maximum
        console = Console(width=max(console.width, needed))
    console.print(table)
