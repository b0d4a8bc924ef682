"""Small value types shared by the SDK's clients."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["OffsetAndMetadata", "PreparedTransaction", "TopicPartition"]


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


class PreparedTransaction(NamedTuple):
    """A transaction whose records are all written and acknowledged but not yet
    committed (``Producer.prepare_transaction()``, the first phase of a two-phase
    commit, as Kafka's KIP-939 ``prepareTransaction``). Whoever holds it decides the
    outcome, from any process: ``Admin.complete_transaction(prepared, commit=...)``.
    Until then its records are invisible to ``read_committed`` readers and hold their
    partitions' last stable offset; the coordinator aborts it once the producer's
    ``transaction_timeout_ms`` has passed since it began."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
