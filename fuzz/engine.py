"""Run one harness under libFuzzer (atheris): ``python -m fuzz.engine NAME [libFuzzer
options] [corpus directories]``.

``NAME`` is a harness of :data:`fuzz.harnesses.HARNESSES`, or a module path holding a
``test_one_input`` (the runner's own tests use one). The code under test is imported
with atheris' instrumentation on, so its branch coverage guides the mutations; that
is why nothing of it may be imported here before :func:`main` runs.

``atheris.Fuzz()`` never returns: libFuzzer exits the process when the runs are done
or at the first finding, so each harness runs in its own process (``fuzz.run``).
"""

from __future__ import annotations

import importlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from types import ModuleType

import atheris

from fuzz.harnesses import HARNESSES, SCRATCH_ENV

__all__ = ["load_harness", "main"]

# Generated message code: instrumenting it adds nothing but start-up time.
_NOT_INSTRUMENTED = ("strand.v1.common_pb2", "strand.v1.groups_pb2",
                     "strand.v1.security_pb2", "strand.v1.storage_pb2",
                     "strand.v1.transactions_pb2", "strand.v1.controller_pb2",
                     "strand.v1.gateway_pb2")


def load_harness(name: str, *, instrumented: bool) -> ModuleType:
    """The harness module ``name`` (a registered name or a module path)."""
    spec = HARNESSES.get(name)
    module = spec.module if spec is not None else name
    if not instrumented:
        return importlib.import_module(module)
    packages = spec.instrument if spec is not None else (module.split(".")[0],)
    with atheris.instrument_imports(include=list(packages), exclude=list(_NOT_INSTRUMENTED)):
        return importlib.import_module(module)


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1].startswith("-"):
        raise SystemExit(f"usage: {argv[0]} HARNESS [libFuzzer options] [corpus dirs]; "
                         f"harnesses: {', '.join(HARNESSES)}")
    if SCRATCH_ENV not in os.environ:
        raise SystemExit(_supervised(argv))
    # What the code under test logs about the damage it meets is expected, and would
    # drown libFuzzer's own output.
    logging.disable(logging.CRITICAL)
    harness = load_harness(argv[1], instrumented=True)
    test_one_input: Callable[[bytes], None] = harness.test_one_input
    atheris.Setup([argv[0], *argv[2:]], test_one_input)
    atheris.Fuzz()


def _supervised(argv: list[str]) -> int:
    """Run the harness in a child process with a scratch directory of its own, and
    remove that directory once libFuzzer has ended the child (it exits without
    Python's clean-up). The runner (fuzz.run) does the same for its harnesses."""
    root = "/dev/shm" if os.path.isdir("/dev/shm") else None
    scratch = tempfile.mkdtemp(prefix="strand-fuzz-engine-", dir=root)
    try:
        return subprocess.call([sys.executable, "-m", "fuzz.engine", *argv[1:]],
                               env={**os.environ, SCRATCH_ENV: scratch})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv)
