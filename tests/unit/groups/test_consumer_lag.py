"""Consumer lag as the group coordinator exports it (services/groups/lag.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from services.groups.lag import ConsumerLag, PartitionLag, lags
from tests.unit.storage.test_broker_telemetry import points, value


def test_lag_is_the_end_minus_the_committed_offset_never_negative() -> None:
    committed = {"g1": {("t", 0): 10, ("t", 1): 7, ("gone", 0): 3}, "g2": {("t", 0): 12}}
    ends = {("t", 0): 12, ("t", 1): 5}  # t-1's end was read before the commit passed it
    assert lags(committed, ends) == [PartitionLag("g1", "t", 0, 2), PartitionLag("g1", "t", 1, 0),
                                     PartitionLag("g2", "t", 0, 0)]


def test_the_gauge_reads_the_last_measurement_and_keeps_it_when_the_gateway_fails() -> None:
    reader = InMemoryMetricReader()
    committed = {"g": {("t", 0): 4, ("t", 1): 0}}
    ends: dict[tuple[str, int], int] = {("t", 0): 10, ("t", 1): 3}
    asked: list[set[tuple[str, int]]] = []

    async def latest(partitions: Iterable[tuple[str, int]]) -> Mapping[tuple[str, int], int]:
        asked.append(set(partitions))
        if not ends:
            raise ConnectionError("gateway away")
        return dict(ends)

    lag = ConsumerLag(MeterProvider(metric_readers=[reader]).get_meter("test"),
                      lambda: committed, latest, interval_s=0.01)
    asyncio.run(lag.refresh())
    assert asked == [{("t", 0), ("t", 1)}]
    found = points(reader)
    assert value(found, "strand.consumergroup.lag", group="g", topic="t", partition=0) == 6
    assert value(found, "strand.consumergroup.lag", group="g") == 9
    ends.clear()
    with pytest.raises(ConnectionError):
        asyncio.run(lag.refresh())
    assert value(points(reader), "strand.consumergroup.lag", group="g") == 9

    async def run_briefly() -> None:  # run() survives the failure and goes on
        task = asyncio.create_task(lag.run())
        await asyncio.sleep(0.05)
        task.cancel()

    asyncio.run(run_briefly())
    assert len(asked) > 3
