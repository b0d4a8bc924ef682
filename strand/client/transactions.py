"""What the admin client reports about transactions (KIP-664): the transactions of the
coordinators, the producers of a partition's leader, and which open transactions
hang (Kafka's ``kafka-transactions.sh find-hanging``).

A transaction *hangs* on a partition when the partition's leader holds it open (its
records wait for a COMMIT or ABORT marker, so the last stable offset and every
``read_committed`` reader stop at its first offset) while the transaction
coordinator does not count the partition in an ongoing transaction of that
producer: no marker will ever come. :func:`hanging` decides it from the three views,
as Kafka's tool does: an open transaction idle longer than the longest transaction
timeout, whose producer id no transactional id has, or whose transactional id is
unknown, or whose coordinator does not list the partition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from strand.client.structs import TopicPartition

__all__ = ["OpenTransaction", "ProducerState", "TransactionDescription",
           "TransactionListing", "hanging"]


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str  # Kafka's state names: Empty, Ongoing, PrepareCommit, CompleteAbort, ...


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    state: str
    timeout_ms: int
    start_time_ms: int | None  # None: no transaction open
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]  # those in the open transaction


@dataclass(frozen=True, slots=True)
class ProducerState:
    """A producer id as a partition's leader knows it (Kafka's ``ProducerState``)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int  # -1: none
    last_timestamp: int  # ms; -1: none
    coordinator_epoch: int | None  # of its last marker on the partition
    current_txn_start_offset: int | None  # first offset of its open transaction


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """An open transaction on one partition."""

    partition: TopicPartition
    producer: ProducerState


def open_transactions(producers: Mapping[TopicPartition, Sequence[ProducerState]],
                      now_ms: int, max_timeout_ms: float) -> list[OpenTransaction]:
    """The open transactions whose producer wrote nothing for longer than
    ``max_timeout_ms`` (as Kafka: by the producer's last timestamp), in partition
    and producer id order: the candidates to check with the coordinators."""
    return [OpenTransaction(tp, p) for tp in sorted(producers)
            for p in sorted(producers[tp], key=lambda p: p.producer_id)
            if p.current_txn_start_offset is not None
            and now_ms - p.last_timestamp > max_timeout_ms]


def hanging(candidates: Sequence[OpenTransaction], transactional_ids: Mapping[int, str],
            descriptions: Mapping[str, TransactionDescription | None]
            ) -> list[OpenTransaction]:
    """The candidates no coordinator will end: ``transactional_ids`` maps the producer
    ids the coordinators know to their transactional ids, ``descriptions`` those ids
    to their transactions (None: TRANSACTIONAL_ID_NOT_FOUND)."""
    found = []
    for txn in candidates:
        tid = transactional_ids.get(txn.producer.producer_id)
        description = None if tid is None else descriptions.get(tid)
        # DescribeTransactions lists the partitions of the ongoing transaction, and
        # those still waiting for their marker in PrepareCommit/PrepareAbort: the
        # coordinator will end those itself.
        if description is None or txn.partition not in description.partitions:
            found.append(txn)
    return found
