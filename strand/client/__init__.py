"""What every SDK client shares: finding the gateway, the gRPC channel, cluster metadata.

``Producer``, ``Consumer`` and ``Admin`` each open one channel to one gateway (any
gateway serves any request) and keep their own metadata cache.
"""

from strand.client.bootstrap import (
    DEFAULT_DEV_DIR,
    ENV_BOOTSTRAP,
    ENV_DEV_DIR,
    BootstrapError,
    resolve_bootstrap,
)
from strand.client.channel import MAX_MESSAGE_BYTES, TransportError, open_aio_channel, open_channel
from strand.client.metadata import BrokerInfo, MetadataCache, PartitionInfo, TopicInfo
from strand.client.structs import TopicPartition

__all__ = [
    "DEFAULT_DEV_DIR",
    "ENV_BOOTSTRAP",
    "ENV_DEV_DIR",
    "MAX_MESSAGE_BYTES",
    "BootstrapError",
    "BrokerInfo",
    "MetadataCache",
    "PartitionInfo",
    "TopicInfo",
    "TopicPartition",
    "TransportError",
    "open_aio_channel",
    "open_channel",
    "resolve_bootstrap",
]
