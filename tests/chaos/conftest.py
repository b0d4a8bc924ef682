"""The chaos tests' marker (registered here: pyproject.toml is not this folder's)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "chaos: the fault-injection harness against a real cluster "
                   "(tests/chaos; select with -m chaos)")
