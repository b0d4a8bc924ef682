"""The SDK's producer and its internals: partitioning, the record accumulator, its
batches and its buffer memory (domain code, no network), and the sender thread that
ships batches.

Names are imported when first used (strand.lazy), so that importing one module of
the package does not load the others.
"""

from typing import TYPE_CHECKING

from strand.lazy import lazy_exports

if TYPE_CHECKING:
    from strand.producer.buffer_pool import BufferPool
    from strand.producer.errors import (
        BufferExhaustedError,
        OutcomeUnknownError,
        ProducerClosedError,
    )
    from strand.producer.future import RecordFuture, RecordMetadata
    from strand.producer.partitioner import (
        StickyPartitioner,
        default_partition,
        murmur2,
        to_positive,
    )
    from strand.producer.producer import Producer
    from strand.producer.producer_batch import Callback, ProducerBatch, TopicPartition
    from strand.producer.record_accumulator import (
        LeaderOf,
        ReadyCheckResult,
        RecordAccumulator,
        RecordAppendResult,
    )
    from strand.records.sizes import record_size

__getattr__, __dir__ = lazy_exports(__name__, {
    "BufferPool": "strand.producer.buffer_pool",
    "BufferExhaustedError": "strand.producer.errors",
    "OutcomeUnknownError": "strand.producer.errors",
    "ProducerClosedError": "strand.producer.errors",
    "RecordFuture": "strand.producer.future",
    "RecordMetadata": "strand.producer.future",
    "StickyPartitioner": "strand.producer.partitioner",
    "default_partition": "strand.producer.partitioner",
    "murmur2": "strand.producer.partitioner",
    "to_positive": "strand.producer.partitioner",
    "Producer": "strand.producer.producer",
    "Callback": "strand.producer.producer_batch",
    "ProducerBatch": "strand.producer.producer_batch",
    "TopicPartition": "strand.producer.producer_batch",
    "LeaderOf": "strand.producer.record_accumulator",
    "ReadyCheckResult": "strand.producer.record_accumulator",
    "RecordAccumulator": "strand.producer.record_accumulator",
    "RecordAppendResult": "strand.producer.record_accumulator",
    "record_size": "strand.records.sizes",
})

__all__ = [
    "BufferExhaustedError",
    "BufferPool",
    "Callback",
    "LeaderOf",
    "OutcomeUnknownError",
    "Producer",
    "ProducerBatch",
    "ProducerClosedError",
    "ReadyCheckResult",
    "RecordAccumulator",
    "RecordAppendResult",
    "RecordFuture",
    "RecordMetadata",
    "StickyPartitioner",
    "TopicPartition",
    "default_partition",
    "murmur2",
    "record_size",
    "to_positive",
]
