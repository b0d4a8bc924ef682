"""Consumer lag per group, exported by the group coordinator: for each partition a
group has committed an offset for, how far that offset is behind the partition's
end (its high watermark). Kafka's brokers leave this to outside exporters
(kafka_exporter's ``kafka_consumergroup_lag``); here the coordinator that holds the
offsets asks for the ends every ``interval_s`` and the gauge reads the last answer.

Each coordinator reports the groups of the shards it owns, so a sum over the
coordinators counts each group once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

__all__ = ["DEFAULT_LAG_INTERVAL_S", "ConsumerLag", "PartitionLag", "lags"]

log = logging.getLogger(__name__)

DEFAULT_LAG_INTERVAL_S = 15.0
TopicPartition = tuple[str, int]
Committed = Mapping[str, Mapping[TopicPartition, int]]  # group → partition → offset


@dataclass(frozen=True, slots=True)
class PartitionLag:
    group: str
    topic: str
    partition: int
    lag: int


def lags(committed: Committed, ends: Mapping[TopicPartition, int]) -> list[PartitionLag]:
    """The lag of every committed offset whose partition's end is known (never
    negative: an end read before the commit that passed it)."""
    return [PartitionLag(group, topic, partition, max(ends[(topic, partition)] - offset, 0))
            for group, offsets in sorted(committed.items())
            for (topic, partition), offset in sorted(offsets.items())
            if (topic, partition) in ends]


class ConsumerLag:
    def __init__(self, source: metrics.Meter, committed: Callable[[], Committed],
                 latest: Callable[[Iterable[TopicPartition]],
                                  Awaitable[Mapping[TopicPartition, int]]],
                 interval_s: float = DEFAULT_LAG_INTERVAL_S) -> None:
        self.committed = committed
        self.latest = latest
        self.interval_s = interval_s
        self.current: list[PartitionLag] = []
        source.create_observable_gauge(
            "strand.consumergroup.lag", callbacks=[self._observe],
            description="records between a group's committed offset and the partition's "
                        "end, by group, topic and partition")

    def _observe(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(entry.lag, {"group": entry.group, "topic": entry.topic,
                                        "partition": entry.partition})
                for entry in self.current]

    async def refresh(self) -> None:
        committed = self.committed()
        partitions = {tp for offsets in committed.values() for tp in offsets}
        ends = await self.latest(partitions) if partitions else {}
        self.current = lags(committed, ends)

    async def run(self) -> None:
        while True:
            try:
                await self.refresh()
            except Exception as exc:  # the gateway away: the last answer stays
                log.warning("could not measure consumer lag", extra={"error": repr(exc)})
            await asyncio.sleep(self.interval_s)
