"""Metadata caches for the controller's pure planning tests: what etcd would hold."""

from __future__ import annotations

from strand.cluster.cache import MetadataCache
from strand.cluster.keys import KeySpace
from strand.cluster.model import BrokerRegistration


def cache_with_brokers(*nodes: int) -> MetadataCache:
    """A cache of cluster ``test`` where ``nodes`` are registered (on 127.0.0.1:9000+id)."""
    keys = KeySpace("test")
    metadata = MetadataCache(keys)
    for node in nodes:
        metadata.apply(keys.broker(node),
                       BrokerRegistration(node, "127.0.0.1", 9000 + node).to_json())
    return metadata
