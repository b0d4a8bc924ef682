"""The KIP-890 part 1 question a service asks before it takes a transactional write:
is this partition part of the producer's open transaction? Storage nodes ask it of
their partitions, the group coordinator of a group's ``__consumer_offsets``
partition before a TxnOffsetCommit. The answer comes from the transaction
coordinator: :class:`strand.cluster.transaction_calls.CoordinatorTxnVerifier`."""

from __future__ import annotations

from typing import Protocol

__all__ = ["TxnVerifier"]


class TxnVerifier(Protocol):
    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     topic: str, partition: int) -> None:
        """Return if ``topic``-``partition`` is part of the producer's ongoing
        transaction; raise the coordinator's typed error otherwise
        (INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH, NOT_COORDINATOR...)."""
