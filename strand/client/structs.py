"""Small value types shared by the SDK's clients."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TopicPartition"]


class TopicPartition(NamedTuple):
    """A partition of a topic. A tuple: ``TopicPartition("t", 0) == ("t", 0)``, with the
    same hash, so it mixes freely with the plain ``(topic, partition)`` tuples of the
    producer internals."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
