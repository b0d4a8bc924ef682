"""The SDK's producer and its internals: partitioning, the record accumulator and its
batches (domain code, no network), and the sender thread that ships batches.
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
from strand.producer.producer import Producer

__all__ = [
    "BufferExhaustedError",
    "Callback",
    "LeaderOf",
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
