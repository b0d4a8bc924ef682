"""Which topics exist, by id: what the group coordinator checks committed offsets
against (Kafka's coordinator does the same with topic ids, OffsetCommit v10, and
drops the offsets of deleted topics: ``onPartitionsDeleted``).

An offset belongs to the topic *id* it was committed for. Once that topic is
deleted its offsets are dead, even if a topic of the same name exists again: they
are never answered to a fetch, and the coordinator removes them with tombstones.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

from services.groups.records import OffsetValue
from strand.cluster.cache import MetadataCache

__all__ = ["CacheTopics", "TopicDirectory", "TopicIdentity", "belongs"]

# How long a commit waits for this coordinator's metadata to show the topic (or the
# topic id) the client names: the gateway that answered the client may be ahead.
RESOLVE_WAIT_S = 3.0


@dataclass(frozen=True, slots=True)
class TopicIdentity:
    topic_id: str
    partitions: int


class TopicDirectory(Protocol):
    def current(self, topic: str) -> TopicIdentity | None:
        """The topic as the cluster metadata shows it now; None: it does not exist."""

    async def resolve(self, topic: str, topic_id: str) -> TopicIdentity | None:
        """:meth:`current`, after waiting a little for the metadata to show the topic
        (with ``topic_id``, when one is given) if it does not yet."""


def belongs(partition: int, value: OffsetValue, topic: TopicIdentity | None) -> bool:
    """Does a committed offset belong to the topic of its name as it exists now? An
    offset without an id (written before ids were kept) belongs while its topic and
    partition exist."""
    if topic is None or partition >= topic.partitions:
        return False
    return value.topic_id in ("", topic.topic_id)


class CacheTopics:
    """The directory of a process that watches the cluster metadata (etcd)."""

    def __init__(self, cache: MetadataCache, wait_s: float = RESOLVE_WAIT_S) -> None:
        self.cache = cache
        self.wait_s = wait_s

    def current(self, topic: str) -> TopicIdentity | None:
        record = self.cache.topics.get(topic)
        return None if record is None else TopicIdentity(record.topic_id, record.partitions)

    def snapshot(self) -> dict[str, TopicIdentity]:
        return {name: TopicIdentity(r.topic_id, r.partitions)
                for name, r in self.cache.topics.items()}

    async def resolve(self, topic: str, topic_id: str) -> TopicIdentity | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_s
        while True:
            found = self.current(topic)
            if found is not None and topic_id in ("", found.topic_id):
                return found
            remaining = deadline - loop.time()
            if remaining <= 0:
                return found
            await self.cache.wait_changed(remaining)
