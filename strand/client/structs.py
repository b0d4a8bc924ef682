"""Small value types shared by the SDK's clients."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["OffsetAndMetadata", "TopicPartition"]


class TopicPartition(NamedTuple):
    """A partition of a topic. A tuple: ``TopicPartition("t", 0) == ("t", 0)``, with the
    same hash, so it mixes freely with the plain ``(topic, partition)`` tuples of the
    producer internals."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class OffsetAndMetadata(NamedTuple):
    """An offset to commit (the NEXT offset to read, as ``Consumer.commit()`` takes) and
    the metadata string stored with it (Kafka's ``OffsetAndMetadata``)."""

    offset: int
    metadata: str = ""
