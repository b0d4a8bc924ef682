"""Strand: a partitioned, replicated, durable commit log (the Kafka model).

The SDK::

    from strand import Admin, Consumer, NewTopic, Producer, TopicPartition

``Producer``, ``Consumer`` and ``Admin`` talk to a gateway: pass its ``host:port``,
or set ``STRAND_BOOTSTRAP``, or run a local dev cluster (see strand.client.bootstrap).
Errors are typed: every class is in ``strand.errors`` (``error_for(code)`` maps a
response's error code to its class).

The names are imported when first used (see strand.lazy): ``import strand`` alone
loads neither gRPC nor the clients, so the ``strand`` command starts quickly.
"""

from typing import TYPE_CHECKING

from strand.lazy import lazy_exports

if TYPE_CHECKING:
    from strand.admin import (
        Admin,
        ClusterDescription,
        ConfigValue,
        NewTopic,
        PartitionDescription,
        TopicDescription,
    )
    from strand.client import (
        BootstrapError,
        OffsetAndMetadata,
        PreparedTransaction,
        TopicPartition,
        TransportError,
    )
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

__getattr__, __dir__ = lazy_exports(__name__, {
    "Admin": "strand.admin",
    "ClusterDescription": "strand.admin",
    "ConfigValue": "strand.admin",
    "NewTopic": "strand.admin",
    "PartitionDescription": "strand.admin",
    "TopicDescription": "strand.admin",
    "BootstrapError": "strand.client.bootstrap",
    "OffsetAndMetadata": "strand.client.structs",
    "PreparedTransaction": "strand.client.structs",
    "TopicPartition": "strand.client.structs",
    "TransportError": "strand.client.channel",
    "Consumer": "strand.consumer.consumer",
    "ConsumerGroupMetadata": "strand.consumer.coordinator",
    "ConsumerRecord": "strand.consumer.records",
    "NoOffsetForPartitionError": "strand.consumer.errors",
    "WakeupError": "strand.consumer.errors",
    "StrandError": "strand.errors",
    "error_for": "strand.errors",
    "BufferExhaustedError": "strand.producer.errors",
    "Producer": "strand.producer.producer",
    "ProducerClosedError": "strand.producer.errors",
    "RecordMetadata": "strand.producer.future",
    "__version__": "strand.version:VERSION",
})

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
    "OffsetAndMetadata",
    "PartitionDescription",
    "PreparedTransaction",
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
