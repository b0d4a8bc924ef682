"""Helpers shared by the CLI commands."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.console import Console

from strand.errors import StrandError

F = TypeVar("F", bound=Callable[..., Any])
err = Console(stderr=True)


def bootstrap(ctx: click.Context) -> str | None:
    obj = ctx.find_root().obj or {}
    return obj.get("bootstrap")


def friendly_errors(func: F) -> F:
    """Turn Strand's typed errors into a one-line message and exit status 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except StrandError as exc:
            raise click.ClickException(f"{exc.code.name}: {exc}") from exc

    return wrapper  # type: ignore[return-value]


def parse_configs(pairs: tuple[str, ...]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected key=value, got {pair!r}", param_hint="--config")
        configs[key.strip()] = value.strip()
    return configs
