"""The coordinator's :class:`~services.transactions.markers.MarkerWriter` over the
storage nodes and the group coordinators: :class:`strand.cluster.storage_calls.StorageMarkerWriter`
sends each partition's COMMIT / ABORT marker to its leader (retried across leader
changes for a while); a partition of ``__consumer_offsets`` (offsets sent in the
transaction) gets no control batch but a CompleteTxnOffsets call to the group
coordinator owning that shard (:class:`strand.cluster.group_calls.GroupOffsetsCompleter`,
retried while the shard moves). This adapter turns partitions still not done into
one typed error naming them, so the shard coordinator retries the whole set (a
marker written twice is a no-op on the partition, a completion repeated finds
nothing pending).

Not part of the pure transaction domain (it reaches the cluster's metadata cache).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection

from services.transactions.txn_metadata import TopicPartition
from strand.cluster.group_calls import GroupOffsetsCompleter
from strand.cluster.storage_calls import MarkerError, StorageMarkerWriter
from strand.coordination.shards import GROUP_TOPIC
from strand.coordination.txn_verifier import OpenedNext
from strand.errors import ErrorCode, error_for

__all__ = ["LeaderMarkerWriter"]


class LeaderMarkerWriter:
    def __init__(self, writer: StorageMarkerWriter, groups: GroupOffsetsCompleter) -> None:
        self.writer = writer
        self.groups = groups

    async def write_markers(self, producer_id: int, producer_epoch: int,
                            coordinator_epoch: int, commit: bool,
                            partitions: Collection[TopicPartition],
                            opened: OpenedNext | None = None) -> None:
        offsets = [tp for tp in partitions if tp[0] == GROUP_TOPIC]
        data = [tp for tp in partitions if tp[0] != GROUP_TOPIC]
        answers: dict[TopicPartition, MarkerError] = {}
        for part in await asyncio.gather(
                self.writer.write_markers(producer_id, producer_epoch, coordinator_epoch,
                                          commit, data, opened) if data else _nothing(),
                self.groups.complete(producer_id, producer_epoch, coordinator_epoch,
                                     commit, offsets) if offsets else _nothing()):
            answers.update(part)
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



async def _nothing() -> dict[TopicPartition, MarkerError]:
    return {}
