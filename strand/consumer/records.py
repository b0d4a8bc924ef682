"""What a consumer hands out: one record of a partition, decoded."""

from __future__ import annotations

from dataclasses import dataclass, field

from strand.client.structs import TopicPartition
from strand.records import TimestampType
from strand.records.record import Header

__all__ = ["ConsumerRecord"]


@dataclass(slots=True)
class ConsumerRecord:
    """A record as consumed (Kafka's ConsumerRecord).

    ``timestamp`` is milliseconds since the epoch: the producer's create time, or the
    broker's append time when ``timestamp_type`` is LOG_APPEND_TIME. ``key``,
    ``value`` and header values are ``bytes`` or None.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)
