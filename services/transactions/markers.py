"""How the transaction coordinator gets COMMIT / ABORT control batches written to
the partitions of a transaction (Kafka's TransactionMarkerChannelManager).

:class:`MarkerWriter` is the interface the coordinator depends on; the storage
side implements it: :class:`services.transactions.leader_markers.LeaderMarkerWriter`
over storage's ``WriteTxnMarkers`` RPC on every partition leader, retried across
leader changes. Kept apart so this module (and the coordinator) stay pure.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from services.transactions.txn_metadata import TopicPartition
from strand.coordination.txn_verifier import OpenedNext

__all__ = ["MarkerWriter", "OpenedNext"]


class MarkerWriter(Protocol):
    async def write_markers(self, producer_id: int, producer_epoch: int,
                            coordinator_epoch: int, commit: bool,
                            partitions: Collection[TopicPartition],
                            opened: OpenedNext | None = None) -> None:
        """Write a COMMIT (``commit``) or ABORT control batch of the producer to every
        partition, on its leader; return once every partition has it. Raise a
        StrandError when some partition does not (the coordinator retries all:
        a marker written twice is harmless, the second one is a no-op). ``opened``:
        the producer's next transaction, open already; each of its partitions here
        learns so with the marker."""
