"""The import contracts (.importlinter) cover every part of the code.

import-linter checks what a contract names; a package added later and not named
would escape the "gRPC only in server, peer and transport modules" rule silently.
"""

from __future__ import annotations

import configparser
import pkgutil
from pathlib import Path

import services
import strand

ROOT = Path(__file__).resolve().parents[2]


def _contract(name: str) -> configparser.SectionProxy:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    return config[f"importlinter:contract:{name}"]


def _listed(section: configparser.SectionProxy, key: str) -> set[str]:
    return {line.strip() for line in section[key].splitlines()
            if line.strip() and not line.strip().startswith(";")}


def test_every_strand_package_is_under_the_wire_contract() -> None:
    sources = _listed(_contract("wire-confined"), "source_modules")
    packages = {f"strand.{m.name}" for m in pkgutil.iter_modules(strand.__path__)}
    assert packages - {"strand.v1"} <= sources, "name new packages in .importlinter"
    assert "services" in sources


def test_every_service_is_independent_of_the_others() -> None:
    modules = _listed(_contract("services-independent"), "modules")
    found = {f"services.{m.name}" for m in pkgutil.iter_modules(services.__path__) if m.ispkg}
    assert found == modules, "name new services in .importlinter"


def test_every_pure_transaction_module_is_under_the_purity_contract() -> None:
    """The transaction coordinator's modules are pure unless they are its I/O: the
    server (gRPC), the shard coordinator (asyncio, the shard log), the marker writer
    over the storage nodes (strand.cluster) and the entry."""
    import services.transactions

    listed = _listed(_contract("transactions-domain-pure"), "source_modules")
    io = {"server", "coordinator", "leader_markers", "__main__"}
    pure = {f"services.transactions.{m.name}"
            for m in pkgutil.iter_modules(services.transactions.__path__) if m.name not in io}
    assert pure == listed, "name new pure transaction modules in .importlinter"
