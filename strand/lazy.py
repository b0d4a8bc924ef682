"""Packages that name their public API without importing it (PEP 562).

``from strand import Admin`` is the SDK's front door, but importing every client
(gRPC, protobuf stubs, the consumer and producer machinery) for it made every
``strand`` command pay ~0.3 s before it parsed its arguments. A package lists its
public names and the module each lives in; a name is imported the first time it
is asked for, then kept in the package like a normal attribute::

    __getattr__, __dir__ = lazy_exports(__name__, {"Admin": "strand.admin", ...})

Type checkers read the same names from an ``if TYPE_CHECKING:`` import block next
to the table (tests/unit/test_lazy_imports.py checks that the two agree).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str]
                 ) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: ``exports`` maps each public
    name to ``"module"`` (the same name there) or ``"module:attribute"``."""

    def __getattr__(name: str) -> object:
        target = exports.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = target.partition(":")
        value = getattr(importlib.import_module(module), attribute or name)
        setattr(sys.modules[package], name, value)  # asked once: later lookups are plain
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
