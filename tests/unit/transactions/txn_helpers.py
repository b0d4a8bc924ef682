"""A transaction coordinator's shard driven through the pure domain code, with an
in-memory log: what the tests of the state machine share."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from services.transactions.txn_metadata import TopicPartition, TransactionMetadata, TxnTransit
from services.transactions.txn_records import record
from services.transactions.txn_requests import (
    ProducerIdAndEpoch,
    add_partitions,
    complete_txn,
    end_txn,
    init_producer_id,
)
from services.transactions.txn_state import TxnState
from services.transactions.txn_store import TransactionStore
from strand.coordination.shard_log import Record


@dataclass
class Shard:
    store: TransactionStore = field(default_factory=TransactionStore)
    log: list[Record] = field(default_factory=list)
    now_ms: int = 1_000
    producer_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))
    transitions: list[tuple[TxnState, TxnState]] = field(default_factory=list)

    def write(self, metadata: TransactionMetadata, transit: TxnTransit,
              fail: bool = False) -> None:
        """Write ``transit``'s record and complete it, or fail the write."""
        if fail:
            self.store.abort_pending(metadata)
            return
        self.log.append(record(metadata.transactional_id, transit))
        before = metadata.state
        metadata.complete_transition(transit)
        self.transitions.append((before, metadata.state))

    def apply(self, metadata: TransactionMetadata, transit: TxnTransit) -> None:
        """Complete ``transit`` without a record (the coordinator drops a finished
        Completion that way: the next record carries the whole state)."""
        before = metadata.state
        metadata.complete_transition(transit)
        self.transitions.append((before, metadata.state))

    def metadata(self, transactional_id: str, timeout_ms: int = 60_000) -> TransactionMetadata:
        found = self.store.get(transactional_id)
        if found is not None:
            return found
        return self.store.put_if_absent(TransactionMetadata(
            transactional_id, next(self.producer_ids), timeout_ms, self.now_ms))

    def init(self, transactional_id: str, timeout_ms: int = 60_000,
             expected: ProducerIdAndEpoch | None = None) -> TxnTransit:
        """InitProducerId, fencing an open transaction as the coordinator does (the
        fence's abort is written; its markers are left to :meth:`finish`)."""
        metadata = self.metadata(transactional_id, timeout_ms)
        transit = init_producer_id(metadata, timeout_ms, expected, self.now_ms,
                                   lambda: next(self.producer_ids))
        if transit.state is TxnState.PREPARE_EPOCH_FENCE:
            abort = end_txn(metadata, transactional_id, transit.producer_id,
                            transit.producer_epoch, False, self.now_ms, from_client=False)
            assert abort is not None
            self.write(metadata, abort)
        else:
            self.write(metadata, transit)
        return transit

    def open(self, transactional_id: str, *partitions: TopicPartition) -> TransactionMetadata:
        """``transactional_id`` (initialised first if new) with a transaction open over
        ``partitions`` (``orders-0`` by default), started now."""
        if self.store.get(transactional_id) is None:
            self.init(transactional_id)
        metadata = self.metadata(transactional_id)
        transit = add_partitions(metadata, transactional_id, metadata.producer_id,
                                 metadata.producer_epoch, partitions or [("orders", 0)],
                                 self.now_ms)
        assert transit is not None
        self.write(metadata, transit)
        return metadata

    def finish(self, transactional_id: str) -> None:
        """The markers of the transaction due (Prepare*, or the previous one of an
        Ongoing) are written: complete it."""
        metadata = self.store.get(transactional_id)
        assert metadata is not None
        ended = metadata.completion_due()
        assert ended is not None
        transit = complete_txn(metadata, ended, self.now_ms)
        if transit.state is TxnState.ONGOING:
            self.apply(metadata, transit)  # as the coordinator: not written
        else:
            self.write(metadata, transit)

    def reloaded(self) -> TransactionStore:
        """A new owner's store, loaded from the log written so far."""
        store = TransactionStore()
        store.load([(r.key, r.value) for r in self.log])
        return store
