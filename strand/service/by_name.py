"""``strand-service NAME [ARGS...]``: the image's one entry point. It runs, in this
process, exactly what ``python -m <module of NAME> ARGS`` runs: the same argument
parsing, exit codes and signal handling, because it is the same module run the same
way (``runpy``, as ``python -m`` does)."""

from __future__ import annotations

import importlib.util
import runpy
import sys
from collections.abc import Sequence
from typing import NoReturn

# NAME -> the module ``python -m`` would run. The modules are named, not imported:
# the import contract `strand-below-services` (.importlinter) forbids the strand
# package to import the services or the operator, and runpy looks them up by name at
# run time, so strand stays below them (the image installs them all).
MODULES: dict[str, str] = {
    "controller": "services.controller",
    "gateway": "services.gateway",
    "storage": "services.storage",
    "groups": "services.groups",
    "transactions": "services.transactions",
    "operator": "strand_operator",
    "rack-from-node": "strand.service.rack_from_node",
}

USAGE_EXIT = 2  # what argparse (and so every service) exits with on a usage error


def usage() -> str:
    return (f"usage: strand-service NAME [ARGS...]\n"
            f"NAME is one of: {', '.join(MODULES)}\n"
            f"`strand-service NAME --help` shows NAME's own options.\n")


def main(argv: Sequence[str] | None = None) -> NoReturn:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"]):
        sys.stdout.write(usage())
        raise SystemExit(0)
    if not args or args[0] not in MODULES:
        given = f"unknown service {args[0]!r}" if args else "no service named"
        sys.stderr.write(f"strand-service: {given}\n{usage()}")
        raise SystemExit(USAGE_EXIT)
    name, module = args[0], MODULES[args[0]]
    if not _installed(module):
        # Only when the image lacks a part (e.g. the operator's package not installed).
        sys.stderr.write(f"strand-service: {name!r} runs `python -m {module}`, which is not "
                         f"installed here: install Strand from its repository with the "
                         f"`operator` extra (pip install '.[operator]')\n")
        raise SystemExit(1)
    # The module sees the argv `python -m` would give it (runpy sets argv[0] to its file).
    sys.argv = [module, *args[1:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    raise SystemExit(0)


def _installed(module: str) -> bool:
    """Whether ``python -m module`` finds something to run (a package: its __main__)."""
    try:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.submodule_search_locations is not None:
            spec = importlib.util.find_spec(f"{module}.__main__")
    except ModuleNotFoundError:  # a parent package is missing
        return False
    return spec is not None


if __name__ == "__main__":
    main()
