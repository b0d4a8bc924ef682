"""The KIP-890 part 1 question a service asks before it takes a transactional write:
is this partition part of the producer's open transaction? Storage nodes ask it of
their partitions, the group coordinator of a group's ``__consumer_offsets``
partition before a TxnOffsetCommit. The answer comes from the transaction
coordinator: :class:`strand.cluster.transaction_calls.CoordinatorTxnVerifier`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["OpenedNext", "TxnVerifier"]


@dataclass(frozen=True, slots=True)
class OpenedNext:
    """A producer's next transaction, already open (written by the coordinator) under
    the same producer id: its epoch and partitions. The marker ending the producer's
    previous transaction on one of those partitions carries it, and the next
    transaction's first write there needs no question to the coordinator: the
    marker brought its answer."""

    producer_epoch: int
    partitions: frozenset[tuple[str, int]]


class TxnVerifier(Protocol):
    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     topic: str, partition: int) -> None:
        """Return if ``topic``-``partition`` is part of the producer's ongoing
        transaction; raise the coordinator's typed error otherwise
        (INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH, NOT_COORDINATOR...)."""
