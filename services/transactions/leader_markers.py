"""The coordinator's :class:`~services.transactions.markers.MarkerWriter` over the
storage nodes: :class:`strand.cluster.storage_calls.StorageMarkerWriter` sends each
partition's COMMIT / ABORT marker to its leader (retried across leader changes for a
while); this adapter turns partitions still without a marker into one typed error
naming them, so the shard coordinator retries the whole set (a marker written twice
is a no-op on the partition).

Not part of the pure transaction domain (it reaches the cluster's metadata cache).
"""

from __future__ import annotations

from collections.abc import Collection

from services.transactions.txn_metadata import TopicPartition
from strand.cluster.storage_calls import StorageMarkerWriter
from strand.errors import ErrorCode, error_for

__all__ = ["LeaderMarkerWriter"]


class LeaderMarkerWriter:
    def __init__(self, writer: StorageMarkerWriter) -> None:
        self.writer = writer

    async def write_markers(self, producer_id: int, producer_epoch: int,
                            coordinator_epoch: int, commit: bool,
                            partitions: Collection[TopicPartition]) -> None:
        answers = await self.writer.write_markers(producer_id, producer_epoch,
                                                  coordinator_epoch, commit, partitions)
        failed = {tp: e for tp, e in sorted(answers.items()) if e.code is not ErrorCode.NONE}
        if not failed:
            return
        first = next(iter(failed.values()))
        raise error_for(first.code, (
            f"the {'COMMIT' if commit else 'ABORT'} markers of producer {producer_id} "
            f"(epoch {producer_epoch}, coordinator epoch {coordinator_epoch}) are not "
            f"written to {len(failed)} of {len(answers)} partitions: "
            + "; ".join(f"{t}-{p}: {e.code.name} ({e.message})"
                        for (t, p), e in failed.items())
            + "; the coordinator retries them"))

