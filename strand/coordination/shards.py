"""Which shard (partition of a coordinator's internal topic) holds a key, and which
coordinator instance should own each shard.

* A key's shard is Kafka's: ``abs(java_string_hash(key)) % shards``, so a group id
  (``__consumer_offsets``) or a transactional id (``__transaction_state``) maps to
  the same partition number as in a Kafka cluster with the same
  ``offsets.topic.num.partitions`` / ``transaction.state.log.num.partitions``.
* Ownership: every live coordinator instance ranks every shard by rendezvous
  (highest-random-weight) hashing; the top instance should own it. When an instance
  joins or leaves only the shards it wins or loses move, and every instance agrees
  without talking to the others. The etcd lease on ``shards/groups/<k>`` is what
  actually grants a shard: an instance takes a shard only when the key is free, so
  two never serve one shard.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

__all__ = [
    "DEFAULT_SHARDS",
    "GROUP_TOPIC",
    "TRANSACTION_TOPIC",
    "java_string_hash",
    "preferred_owner",
    "shard_for",
    "shards_of",
]

GROUP_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
DEFAULT_SHARDS = 12  # Kafka's default is 50; a dev cluster does not need that many


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    encoded = text.encode("utf-16-be")
    for i in range(0, len(encoded), 2):
        h = (31 * h + ((encoded[i] << 8) | encoded[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def shard_for(key: str, shards: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode) % partitions`` (``abs`` of MIN_VALUE is 0):
    its ``partitionFor`` of a group id and of a transactional id alike."""
    if shards < 1:
        raise ValueError(f"shards must be >= 1, got {shards}")
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % shards


def _weight(instance: str, shard: int) -> int:
    digest = hashlib.blake2b(f"{instance}/{shard}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def preferred_owner(shard: int, instances: Iterable[str]) -> str | None:
    """The instance that should own ``shard`` (None without instances)."""
    return max(instances, key=lambda i: (_weight(i, shard), i), default=None)


def shards_of(instance: str, instances: Sequence[str], shards: int) -> list[int]:
    """The shards ``instance`` should own among ``instances``."""
    return [k for k in range(shards) if preferred_owner(k, instances) == instance]
