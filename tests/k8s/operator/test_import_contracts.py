"""Every module of the operator is named in its import contracts (.importlinter), so
a module added later cannot escape the layering or the confinement of kopf."""

from __future__ import annotations

import configparser
import pkgutil
from pathlib import Path

import strand_operator

ROOT = Path(__file__).resolve().parents[3]
KOPF_SIDE = {"strand_operator.handlers", "strand_operator.user_handlers",
             "strand_operator.kube_secrets", "strand_operator.cli", "strand_operator.__main__"}


def _listed(contract: str, key: str) -> set[str]:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    text = config[f"importlinter:contract:{contract}"][key]
    return {name.strip() for line in text.splitlines() if not line.strip().startswith(";")
            for name in line.split("|") if name.strip()}


def _modules() -> set[str]:
    return {f"strand_operator.{m.name}" for m in pkgutil.iter_modules(strand_operator.__path__)}


def test_every_operator_module_is_in_a_layer() -> None:
    assert _listed("operator-layers", "layers") == _modules()


def test_kopf_is_confined_to_the_handlers_and_the_entry() -> None:
    assert _listed("operator-kopf-confined", "source_modules") == _modules() - KOPF_SIDE
