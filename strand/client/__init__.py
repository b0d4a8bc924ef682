"""What every SDK client shares: finding the gateway, the gRPC channel, cluster metadata.

``Producer``, ``Consumer`` and ``Admin`` each open one channel to one gateway (any
gateway serves any request) and keep their own metadata cache.

Names are imported when first used (strand.lazy), so that importing one module of
the package does not load the others.
"""

from typing import TYPE_CHECKING

from strand.lazy import lazy_exports

if TYPE_CHECKING:
    from strand.client.bootstrap import (
        DEFAULT_DEV_DIR,
        ENV_BOOTSTRAP,
        ENV_DEV_DIR,
        BootstrapError,
        resolve_bootstrap,
    )
    from strand.client.channel import (
        MAX_MESSAGE_BYTES,
        TransportError,
        open_aio_channel,
        open_channel,
    )
    from strand.client.metadata import BrokerInfo, MetadataCache, PartitionInfo, TopicInfo
    from strand.client.structs import OffsetAndMetadata, PreparedTransaction, TopicPartition

__getattr__, __dir__ = lazy_exports(__name__, {
    "DEFAULT_DEV_DIR": "strand.client.bootstrap",
    "ENV_BOOTSTRAP": "strand.client.bootstrap",
    "ENV_DEV_DIR": "strand.client.bootstrap",
    "BootstrapError": "strand.client.bootstrap",
    "resolve_bootstrap": "strand.client.bootstrap",
    "MAX_MESSAGE_BYTES": "strand.client.channel",
    "TransportError": "strand.client.channel",
    "open_aio_channel": "strand.client.channel",
    "open_channel": "strand.client.channel",
    "BrokerInfo": "strand.client.metadata",
    "MetadataCache": "strand.client.metadata",
    "PartitionInfo": "strand.client.metadata",
    "TopicInfo": "strand.client.metadata",
    "OffsetAndMetadata": "strand.client.structs",
    "PreparedTransaction": "strand.client.structs",
    "TopicPartition": "strand.client.structs",
})

__all__ = [
    "DEFAULT_DEV_DIR",
    "ENV_BOOTSTRAP",
    "ENV_DEV_DIR",
    "MAX_MESSAGE_BYTES",
    "BootstrapError",
    "BrokerInfo",
    "MetadataCache",
    "OffsetAndMetadata",
    "PartitionInfo",
    "PreparedTransaction",
    "TopicInfo",
    "TopicPartition",
    "TransportError",
    "open_aio_channel",
    "open_channel",
    "resolve_bootstrap",
]
