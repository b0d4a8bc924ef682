"""The SDK's consumer: assign partitions, poll records, seek, pause and resume.

Names are imported when first used (strand.lazy), so that importing one module of
the package does not load the others.
"""

from typing import TYPE_CHECKING

from strand.lazy import lazy_exports

if TYPE_CHECKING:
    from strand.consumer.consumer import Consumer
    from strand.consumer.coordinator import ConsumerGroupMetadata
    from strand.consumer.errors import NoOffsetForPartitionError, WakeupError
    from strand.consumer.records import ConsumerRecord

__getattr__, __dir__ = lazy_exports(__name__, {
    "Consumer": "strand.consumer.consumer",
    "ConsumerGroupMetadata": "strand.consumer.coordinator",
    "NoOffsetForPartitionError": "strand.consumer.errors",
    "WakeupError": "strand.consumer.errors",
    "ConsumerRecord": "strand.consumer.records",
})

__all__ = [
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "NoOffsetForPartitionError",
    "WakeupError",
]
