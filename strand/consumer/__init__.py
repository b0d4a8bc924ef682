"""The SDK's consumer: assign partitions, poll records, seek, pause and resume."""

from strand.consumer.consumer import Consumer
from strand.consumer.coordinator import ConsumerGroupMetadata
from strand.consumer.errors import NoOffsetForPartitionError, WakeupError
from strand.consumer.records import ConsumerRecord

__all__ = [
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "NoOffsetForPartitionError",
    "WakeupError",
]
