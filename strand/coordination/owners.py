"""Which coordinator instance owns a shard, as the watched metadata cache knows it:
the one lookup behind every call routed to a coordinator (the gateway's routing, a
storage node's and a group coordinator's KIP-890 verification, the transaction
coordinator's completion of transactional offsets)."""

from __future__ import annotations

from collections.abc import Mapping

from strand.cluster.cache import MetadataCache
from strand.cluster.model import CoordinatorRecord
from strand.coordination.shards import GROUP_TOPIC, TRANSACTION_TOPIC, shard_for

__all__ = ["key_shard", "shard_owner", "shard_owners"]


def shard_owners(cache: MetadataCache, topic: str) -> Mapping[int, CoordinatorRecord]:
    """The owners of the shards of ``topic`` (an internal coordinator topic)."""
    if topic == GROUP_TOPIC:
        return cache.group_shard_owners
    if topic == TRANSACTION_TOPIC:
        return cache.txn_shard_owners
    raise ValueError(f"{topic!r} is not a coordinator's internal topic")


def key_shard(cache: MetadataCache, topic: str, key: str) -> int | None:
    """The shard of ``key``; None while ``topic`` does not exist yet."""
    record = cache.topics.get(topic)
    return shard_for(key, record.partitions) if record is not None else None


def shard_owner(cache: MetadataCache, topic: str, shard: int | None
                ) -> CoordinatorRecord | None:
    """The instance owning ``shard`` of ``topic`` right now (None: nobody, or no shard)."""
    return None if shard is None else shard_owners(cache, topic).get(shard)
