"""The ``strand`` command imports only what a command needs (issue 11, point 15).

Timing is measured by bench/cli_startup.py; these tests check the structure that
makes it fast, which a new top-level import would silently undo: what ``sys.modules``
holds after a command's ``--help``, the lazy command table, the lazy packages.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

import strand.cli
from strand.cli.main import COMMANDS, cli

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("grpc", "google.protobuf", "strand.v1", "strand.admin", "strand.consumer.consumer",
         "strand.producer.producer", "cramjam", "opentelemetry", "rich")


def imported_after(*args: str) -> set[str]:
    """The heavy modules a fresh interpreter holds after ``strand ARGS`` has run."""
    probe = ("import sys\n"
             "from strand.cli.main import cli\n"
             "try:\n"
             f"    cli({list(args)!r})\n"
             "except SystemExit as exc:\n"
             "    assert exc.code in (0, None), exc.code\n"
             f"heavy = {HEAVY!r}\n"
             "print('MODULES:', *sorted({m for m in sys.modules for h in heavy\n"
             "                            if m == h or m.startswith(h + '.')}))\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=True)
    return set(done.stdout.rsplit("MODULES:", 1)[1].split())


@pytest.mark.parametrize("args", [
    ("--help",),
    ("dev", "--help"),
    ("dev", "up", "--help"),
    ("dev", "restart", "--help"),
])
def test_help_imports_no_client_nor_grpc(args: tuple[str, ...]) -> None:
    assert imported_after(*args) == set()


@pytest.mark.parametrize("args", [
    ("topic", "list", "--help"),
    ("topic", "describe", "--help"),
    ("produce", "--help"),
    ("consume", "--help"),
    ("group", "describe", "--help"),
    ("cluster", "status", "--help"),
    ("bench", "produce", "--help"),
    ("transactions", "find-hanging", "--help"),
    ("transactions", "abort", "--help"),
    ("mirror", "translate", "--help"),
])
def test_a_client_commands_help_imports_no_client_nor_grpc(args: tuple[str, ...]) -> None:
    # rich only: strand.cli.common's console for errors
    assert {m for m in imported_after(*args) if m.split(".")[0] != "rich"} == set()


def test_import_strand_loads_no_client() -> None:
    probe = (f"import sys, strand, strand.client, strand.consumer, strand.producer\n"
             f"print(sorted(m for m in sys.modules if m.startswith({HEAVY!r})))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_the_table_shows_each_commands_own_short_help() -> None:
    ctx = click.Context(cli)
    for name, (_, short_help) in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
        assert command.get_short_help_str(1000) == click.Command(
            name, help=short_help).get_short_help_str(1000), name


def test_help_lists_every_command() -> None:
    out = subprocess.run([sys.executable, "-m", "strand.cli.main", "--help"], cwd=REPO,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    listed = out.split("Commands:", 1)[1].split()
    assert set(COMMANDS) <= set(listed)


def test_every_command_in_strand_cli_is_reachable() -> None:
    """A command written in strand/cli but left out of COMMANDS would not be found."""
    ctx = click.Context(cli)
    reachable: set[int] = set()
    todo: list[click.Command] = [c for name in COMMANDS if (c := cli.get_command(ctx, name))]
    while todo:
        command = todo.pop()
        reachable.add(id(command))
        if isinstance(command, click.Group):
            todo.extend(command.commands.values())
    for info in pkgutil.iter_modules(strand.cli.__path__):
        module = importlib.import_module(f"strand.cli.{info.name}")
        for attr, value in vars(module).items():
            if isinstance(value, click.Command) and value is not cli:
                assert id(value) in reachable, f"strand.cli.{info.name}.{attr} is not in COMMANDS"


LAZY_PACKAGES = ("strand", "strand.client", "strand.consumer", "strand.producer")


def type_checking_imports(package: str) -> dict[str, tuple[str, str]]:
    """Public name → (module, attribute) of the package's ``if TYPE_CHECKING:`` block."""
    module = importlib.import_module(package)
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text())
    names: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imported in node.body:
                assert isinstance(imported, ast.ImportFrom) and imported.module
                for alias in imported.names:
                    names[alias.asname or alias.name] = (imported.module, alias.name)
    return names


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_lazy_packages_export_what_type_checkers_see(package: str) -> None:
    module = importlib.import_module(package)
    declared = type_checking_imports(package)
    assert set(declared) == set(module.__all__)
    for name, (source, attribute) in declared.items():
        assert getattr(module, name) is getattr(importlib.import_module(source), attribute), name
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = module.Nope
