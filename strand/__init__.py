"""Strand: a partitioned, replicated, durable commit log (the Kafka model).

The SDK::

    from strand import Admin, Consumer, NewTopic, Producer, TopicPartition

``Producer``, ``Consumer`` and ``Admin`` talk to a gateway: pass its ``host:port``,
or set ``STRAND_BOOTSTRAP``, or run a local dev cluster (see strand.client.bootstrap).
Errors are typed: every class is in ``strand.errors`` (``error_for(code)`` maps a
response's error code to its class).
"""

from strand.admin import (
    Admin,
    ClusterDescription,
    ConfigValue,
    NewTopic,
    PartitionDescription,
    TopicDescription,
)
from strand.client import BootstrapError, TopicPartition, TransportError
from strand.consumer import (
    Consumer,
    ConsumerGroupMetadata,
    ConsumerRecord,
    NoOffsetForPartitionError,
    WakeupError,
)
from strand.errors import StrandError, error_for
from strand.producer import (
    BufferExhaustedError,
    Producer,
    ProducerClosedError,
    RecordMetadata,
)
from strand.version import VERSION as __version__

__all__ = [
    "Admin",
    "BootstrapError",
    "BufferExhaustedError",
    "ClusterDescription",
    "ConfigValue",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "NewTopic",
    "NoOffsetForPartitionError",
    "PartitionDescription",
    "Producer",
    "ProducerClosedError",
    "RecordMetadata",
    "StrandError",
    "TopicDescription",
    "TopicPartition",
    "TransportError",
    "WakeupError",
    "__version__",
    "error_for",
]
