"""The SDK's producer and its internals: partitioning, the record accumulator, its
batches and its buffer memory (domain code, no network), and the sender thread that
ships batches.
"""

from strand.producer.buffer_pool import BufferPool
from strand.producer.errors import BufferExhaustedError, ProducerClosedError
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

__all__ = [
    "BufferExhaustedError",
    "BufferPool",
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
