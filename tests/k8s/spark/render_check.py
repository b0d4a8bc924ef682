"""The plain manifests of spark-on-k8s/manifests/ and how to render them again
(spark-on-k8s/manifests/render.py, imported from its file: manifests/ is no package)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from tests.k8s.spark.tools import MANIFESTS_DIR

RENDER_SCRIPT = MANIFESTS_DIR / "render.py"


def render_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("strand_spark_manifests_render", RENDER_SCRIPT)
    assert spec is not None and spec.loader is not None, RENDER_SCRIPT
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _files() -> tuple[Path, ...]:
    names: dict[str, str] = render_module().MANIFESTS
    return tuple(MANIFESTS_DIR / name for name in names)


RENDERED_FILES = _files()
