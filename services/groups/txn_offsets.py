"""Transactional offsets pending in one shard (KIP-98, KIP-447): what
TxnOffsetCommit stored per (group, producer id) and partition, until the producer's
transaction ends.

Pure, like :mod:`services.groups.offset_store` (which holds one of these and applies
its records): :meth:`PendingOffsets.stage` turns a TxnOffsetCommit into the
``txn_offset`` records to write; :meth:`PendingOffsets.complete` turns the end of a
transaction into one write: with a commit, each pending offset as a regular
``offset`` record (so compaction keeps it as the group's committed offset), then a
tombstone of each pending record; with an abort, the tombstones alone. Offsets come
before tombstones, so a write cut short leaves the pending records in place and the
transaction coordinator's retry completes them again (a repeat rewrites the same
values).

Where Kafka writes pending offsets as transactional records of the producer in
``__consumer_offsets`` and ends them with the COMMIT/ABORT control batch the
transaction coordinator writes to that partition, here the group coordinator is the
only writer of its shard: the transaction coordinator asks it to complete
(CompleteTxnOffsets) instead, and the outcome is stored as plain records.

Fencing: a TxnOffsetCommit under an older epoch than pending offsets of the same
producer is PRODUCER_FENCED; under a newer one it is CONCURRENT_TRANSACTIONS (retried
by the producer): every transaction has an epoch of its own, so those offsets are the
previous transaction's, still to be completed, and must not be replaced; a
completion older than the producer's pending offsets (a stale repeat from an earlier
transaction) leaves them alone; a completion from a transaction coordinator epoch
older than one already seen for the producer in this shard is
TRANSACTION_COORDINATOR_FENCED; a TxnOffsetCommit under an older epoch than a
completion already seen for the producer is PRODUCER_FENCED (it arrived late: its
transaction has ended). The coordinator and producer epochs seen are kept in
memory only (a new owner of the shard starts without them): the transaction
coordinator's own shard ownership is what normally keeps a deposed owner quiet;
this only catches its late retries while this owner lives.
"""

from __future__ import annotations

from collections.abc import Mapping

from services.groups.records import (
    OffsetKey,
    OffsetValue,
    TxnOffsetKey,
    TxnOffsetValue,
    encode_key,
    encode_value,
)
from strand.coordination.shard_log import Record
from strand.errors import (
    ConcurrentTransactionsError,
    ProducerFencedError,
    TransactionCoordinatorFencedError,
)

__all__ = ["PendingOffsets"]

TopicPartition = tuple[str, int]


class PendingOffsets:
    def __init__(self) -> None:
        # group -> producer id -> partition -> pending offset
        self._pending: dict[str, dict[int, dict[TopicPartition, TxnOffsetValue]]] = {}
        self._coordinator_epochs: dict[int, int] = {}  # producer id -> highest seen
        self._ended_epochs: dict[int, int] = {}  # producer id -> highest completed

    def apply(self, key: TxnOffsetKey, value: TxnOffsetValue | None) -> None:
        """A ``txn_offset`` record was written (or read back)."""
        tp = (key.topic, key.partition)
        if value is not None:
            self._pending.setdefault(key.group, {}).setdefault(key.producer_id, {})[tp] = value
            return
        producers = self._pending.get(key.group, {})
        offsets = producers.get(key.producer_id, {})
        offsets.pop(tp, None)
        if not offsets:
            producers.pop(key.producer_id, None)
        if not producers:
            self._pending.pop(key.group, None)

    def stage(self, group: str, producer_id: int, producer_epoch: int,
              offsets: Mapping[TopicPartition, OffsetValue]) -> list[Record]:
        """The records storing ``offsets`` (validated by the caller) pending for the
        producer's transaction; raises PRODUCER_FENCED for an epoch older than that of
        offsets it already has pending in the group or of a transaction ended here."""
        held = self._pending.get(group, {}).get(producer_id, {})
        # The newest epoch seen: of offsets pending, or of a transaction ended here (a
        # late TxnOffsetCommit of an ended transaction, stored, would never complete).
        newest = max((self._ended_epochs.get(producer_id, -1),
                      *(v.producer_epoch for v in held.values())))
        if producer_epoch < newest:
            raise ProducerFencedError(
                f"producer {producer_id} of group {group!r} has transactional offsets "
                f"pending or ended under epoch {newest}; epoch {producer_epoch} is fenced "
                "(a newer instance of the transactional producer, or the coordinator's "
                "abort, took over): close this one")
        oldest = min((v.producer_epoch for v in held.values()), default=producer_epoch)
        if oldest < producer_epoch:
            # Each transaction has its own epoch: these belong to an ended transaction
            # whose completion has not come yet, and replacing them would lose them.
            raise ConcurrentTransactionsError(
                f"producer {producer_id} of group {group!r} still has offsets of its "
                f"previous transaction pending (epoch {oldest}); retry once it completes")
        return [Record(encode_key(TxnOffsetKey(group, producer_id, topic, partition)),
                       encode_value(TxnOffsetValue(producer_epoch, value)))
                for (topic, partition), value in sorted(offsets.items())]

    def complete(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                 commit: bool) -> list[Record]:
        """The one write ending the producer's transaction in every group of the shard
        (empty: nothing pending, nothing to write). Pending offsets of a newer epoch
        than ``producer_epoch`` belong to a later transaction and are left alone."""
        seen = self._coordinator_epochs.get(producer_id, -1)
        if coordinator_epoch < seen:
            raise TransactionCoordinatorFencedError(
                f"transaction coordinator epoch {coordinator_epoch} is older than "
                f"{seen}, already seen for producer {producer_id}: a newer owner of its "
                "transaction shard has taken over; nothing changed")
        self._coordinator_epochs[producer_id] = coordinator_epoch
        self._ended_epochs[producer_id] = max(producer_epoch,
                                              self._ended_epochs.get(producer_id, -1))
        committed: list[Record] = []
        tombstones: list[Record] = []
        for group, producers in sorted(self._pending.items()):
            for (topic, partition), pending in sorted(producers.get(producer_id, {}).items()):
                if pending.producer_epoch > producer_epoch:
                    continue
                if commit:
                    committed.append(Record(encode_key(OffsetKey(group, topic, partition)),
                                            encode_value(pending.offset)))
                tombstones.append(Record(
                    encode_key(TxnOffsetKey(group, producer_id, topic, partition)), None))
        return committed + tombstones

    def partitions(self, group: str) -> set[TopicPartition]:
        """The partitions of ``group`` with offsets pending, of any producer."""
        return {tp for offsets in self._pending.get(group, {}).values() for tp in offsets}

    def producers(self, group: str) -> list[int]:
        return sorted(self._pending.get(group, {}))

    def groups(self) -> set[str]:
        return set(self._pending)
