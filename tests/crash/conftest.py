"""Fixtures of the crash-recovery tests; the helpers live in ``crash_helpers.py``."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:  # the test modules and the child scripts import crash_helpers
    sys.path.insert(0, _HERE)


@pytest.fixture(autouse=True)
def _quiet_recovery_warnings(caplog: pytest.LogCaptureFixture) -> None:
    """Recovery logs a warning per torn segment: expected here, keep the output short."""
    caplog.set_level(logging.ERROR, logger="strand")
