from __future__ import annotations

import pytest
from producer_helpers import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
