"""Producer internals: partitioning, the record accumulator and its batches.

Domain code only (no network): the SDK's ``Producer`` and its sender drive these.
"""

from strand.producer.accumulator import (
    Callback,
    LeaderOf,
    ProducerBatch,
    ReadyCheckResult,
    RecordAccumulator,
    RecordAppendResult,
    RecordFuture,
    RecordMetadata,
    TopicPartition,
    record_size,
)
from strand.producer.errors import BufferExhaustedError, ProducerClosedError
from strand.producer.partitioner import (
    StickyPartitioner,
    default_partition,
    murmur2,
    to_positive,
)

__all__ = [
    "BufferExhaustedError",
    "Callback",
    "LeaderOf",
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
