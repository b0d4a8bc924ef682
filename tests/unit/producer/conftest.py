from __future__ import annotations

import pytest

from tests.support.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_000)  # milliseconds of a monotonic clock
