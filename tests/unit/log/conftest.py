from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from strand.log import LogConfig, PartitionLog
from tests.support.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def open_log(tmp_path: Path, clock: FakeClock) -> Iterator[Callable[..., PartitionLog]]:
    opened: list[PartitionLog] = []

    def _open(config: LogConfig | None = None, name: str = "topic-0") -> PartitionLog:
        log = PartitionLog.open(tmp_path / name, config or LogConfig(), clock=clock)
        opened.append(log)
        return log

    yield _open
    for log in opened:
        if not log._closed:
            log.close()
