"""Fixtures of the crash-recovery tests; the helpers live in ``crash_helpers.py``."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(autouse=True)
def _quiet_recovery_warnings(caplog: pytest.LogCaptureFixture) -> None:
    """Recovery logs a warning per torn segment: expected here, keep the output short."""
    caplog.set_level(logging.ERROR, logger="strand")
