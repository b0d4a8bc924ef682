"""How the transaction coordinator gets COMMIT / ABORT control batches written to
the partitions of a transaction (Kafka's TransactionMarkerChannelManager).

:class:`MarkerWriter` is the interface the coordinator depends on; the storage
side (a ``WriteTxnMarkers`` RPC on every partition leader, retried across leader
changes) implements it. Until that RPC exists, :class:`StorageMarkerWriter` is the
adapter the service runs with: it refuses with :class:`MarkerRpcMissingError`, so
a transaction ends in PrepareCommit / PrepareAbort and the coordinator keeps
retrying its markers (as it would while a leader is unreachable) instead of
claiming an outcome that no partition shows.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from services.transactions.txn_metadata import TopicPartition
from strand.errors import UnknownServerError

__all__ = ["MarkerRpcMissingError", "MarkerWriter", "StorageMarkerWriter"]


class MarkerWriter(Protocol):
    async def write_markers(self, producer_id: int, producer_epoch: int,
                            coordinator_epoch: int, commit: bool,
                            partitions: Collection[TopicPartition]) -> None:
        """Write a COMMIT (``commit``) or ABORT control batch of the producer to every
        partition, on its leader; return once every partition has it. Raise a
        StrandError when some partition does not (the coordinator retries all:
        a marker written twice is harmless, the second one is a no-op)."""


class MarkerRpcMissingError(UnknownServerError):
    """The storage nodes have no WriteTxnMarkers RPC yet: no marker can be written."""


class StorageMarkerWriter:
    """The storage-side marker writer; to be wired to storage's ``WriteTxnMarkers``."""

    async def write_markers(self, producer_id: int, producer_epoch: int,
                            coordinator_epoch: int, commit: bool,
                            partitions: Collection[TopicPartition]) -> None:
        raise MarkerRpcMissingError(
            f"cannot write the {'COMMIT' if commit else 'ABORT'} markers of producer "
            f"{producer_id} (epoch {producer_epoch}) to {len(partitions)} partitions: the "
            "storage nodes have no WriteTxnMarkers RPC yet; the transaction stays "
            "Prepare* until they do")
