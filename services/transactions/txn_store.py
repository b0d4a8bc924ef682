"""The transactional ids of one shard (a partition of ``__transaction_state``), in
memory: Kafka's TransactionStateManager without its I/O.

* :meth:`TransactionStore.load` rebuilds the shard from its records (replayed in
  order: the last value of an id wins, a tombstone deletes it) and names the
  transactions found in PrepareCommit / PrepareAbort: their outcome is decided, so
  the new owner must write their markers and complete them.
* :meth:`TransactionStore.timed_out` finds the transactions open past their
  ``transaction.timeout.ms``; the coordinator aborts them with an epoch bump
  (:func:`~services.transactions.txn_requests.abort_timed_out`).
* :meth:`TransactionStore.expire` prepares the ids unused for
  ``transactional.id.expiration.ms`` (7 days) for removal: their tombstones.
* :meth:`TransactionStore.list_transactions` and :meth:`TransactionStore.describe` answer
  ListTransactions (filters: states, producer ids, running longer than) and
  DescribeTransactions.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass

from services.transactions.txn_metadata import (
    NO_PRODUCER_EPOCH,
    TopicPartition,
    TransactionMetadata,
    TxnTransit,
)
from services.transactions.txn_records import decode_key, decode_value, record
from services.transactions.txn_state import TxnState
from strand.coordination.shard_log import Record
from strand.errors import CorruptRecordError, TransactionalIdNotFoundError

__all__ = ["DEFAULT_ID_EXPIRATION_MS", "Expiring", "ListedTransaction", "TimedOut",
           "TransactionDescription", "TransactionListing", "TransactionStore"]

DEFAULT_ID_EXPIRATION_MS = 7 * 24 * 60 * 60 * 1000  # Kafka's transactional.id.expiration.ms


@dataclass(frozen=True, slots=True)
class TimedOut:
    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class Expiring:
    """An id to remove: write ``tombstone``, then :meth:`TransactionStore.remove`."""

    transactional_id: str
    tombstone: Record
    transit: TxnTransit


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: TxnState


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactions: tuple[ListedTransaction, ...]
    unknown_state_filters: tuple[str, ...]  # state names asked for that do not exist


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    state: TxnState
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int
    partitions: tuple[TopicPartition, ...]


class TransactionStore:
    def __init__(self) -> None:
        self._ids: dict[str, TransactionMetadata] = {}

    # -- loading --------------------------------------------------------------------------

    def apply(self, transactional_id: str, transit: TxnTransit | None) -> None:
        """A record of the shard read back: the id's state is now ``transit``."""
        if transit is None:
            self._ids.pop(transactional_id, None)
        else:
            self._ids[transactional_id] = TransactionMetadata.loaded(transactional_id, transit)

    def load(self, records: Iterable[tuple[bytes, bytes | None]]) -> list[TransactionMetadata]:
        """Replay the shard's records in log order; return the transactions in
        Prepare* (to finish). An unreadable record stops the load: skipping it could
        bring an older state of its id back."""
        for index, (key, value) in enumerate(records):
            try:
                transactional_id = decode_key(key)
                transit = decode_value(value)
            except CorruptRecordError as exc:
                raise CorruptRecordError(
                    f"record {index} of the shard: {exc}; the shard cannot be loaded until "
                    "the record is removed or this Strand is upgraded") from exc
            self.apply(transactional_id, transit)
        return self.completing()

    # -- lookups --------------------------------------------------------------------------

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self._ids.get(transactional_id)

    def put_if_absent(self, metadata: TransactionMetadata) -> TransactionMetadata:
        """The id's metadata: ``metadata`` for an id not yet known (InitProducerId of a
        new id; nothing is written until its first transition)."""
        return self._ids.setdefault(metadata.transactional_id, metadata)

    def abort_pending(self, metadata: TransactionMetadata) -> None:
        """The pending transit of ``metadata`` was not written: forget it, and forget
        an id whose first record this was, so memory holds only what the log holds
        (the retried InitProducerId starts the id afresh)."""
        metadata.abort_pending()
        if metadata.producer_epoch == NO_PRODUCER_EPOCH \
                and self._ids.get(metadata.transactional_id) is metadata:
            del self._ids[metadata.transactional_id]

    def remove(self, transactional_id: str, transit: TxnTransit) -> bool:
        """The tombstone of an expiring id is written: forget the id, unless it moved
        since (then its Dead transition is dropped and it stays)."""
        metadata = self._ids.get(transactional_id)
        if metadata is None:
            return False
        if metadata.pending_state is TxnState.DEAD \
                and metadata.producer_epoch == transit.producer_epoch:
            del self._ids[transactional_id]
            return True
        return False

    def __iter__(self) -> Iterator[TransactionMetadata]:
        return iter(list(self._ids.values()))

    def __len__(self) -> int:
        return len(self._ids)

    def completing(self) -> list[TransactionMetadata]:
        return [m for m in self._ids.values()
                if m.completion_due() is not None and not m.pending]

    # -- timers ---------------------------------------------------------------------------

    def timed_out(self, now_ms: int) -> list[TimedOut]:
        """Transactions open longer than their timeout and not already moving."""
        return [TimedOut(m.transactional_id, m.producer_id, m.producer_epoch)
                for m in self._ids.values()
                if m.state is TxnState.ONGOING and not m.pending
                and m.start_ms + m.timeout_ms < now_ms]

    def expire(self, now_ms: int, expiration_ms: int = DEFAULT_ID_EXPIRATION_MS
               ) -> list[Expiring]:
        """Ids with no transaction open, unchanged for ``expiration_ms``: each is
        prepared to die (pending Dead, which blocks other changes) and its tombstone
        returned. On a failed write, call ``abort_pending`` on the metadata."""
        out = []
        for metadata in self._ids.values():
            if (metadata.state.expiration_allowed and not metadata.pending
                    and metadata.last_update_ms <= now_ms - expiration_ms):
                transit = metadata.prepare_dead()
                out.append(Expiring(metadata.transactional_id,
                                    record(metadata.transactional_id, None), transit))
        return out

    # -- ListTransactions / DescribeTransactions ------------------------------------------

    def list_transactions(self, states: Collection[str] = (), producer_ids: Collection[int] = (),
             min_duration_ms: int = -1, now_ms: int = 0) -> TransactionListing:
        """Filters as Kafka's: empty means all; state names as DescribeTransactions
        shows them (unknown ones are reported back, and match nothing);
        ``min_duration_ms`` >= 0 keeps transactions open at least that long (KIP-994)."""
        wanted = {name: TxnState.from_name(name) for name in states}
        unknown = tuple(sorted(name for name, state in wanted.items() if state is None))
        known = {state for state in wanted.values() if state is not None}
        if states and not known:
            return TransactionListing((), unknown)
        found = tuple(
            ListedTransaction(m.transactional_id, m.producer_id, m.state)
            for m in sorted(self._ids.values(), key=lambda m: m.transactional_id)
            if m.pending_state is not TxnState.DEAD
            and (not known or m.state in known)
            and (not producer_ids or m.producer_id in producer_ids)
            and (min_duration_ms < 0 or (m.start_ms >= 0
                                         and now_ms - m.start_ms >= min_duration_ms)))
        return TransactionListing(found, unknown)

    def describe(self, transactional_id: str) -> TransactionDescription:
        metadata = self._ids.get(transactional_id)
        if metadata is None or metadata.pending_state is TxnState.DEAD:
            raise TransactionalIdNotFoundError(
                f"no transactional id {transactional_id!r} on this coordinator (never "
                "initialised, or expired)")
        return TransactionDescription(
            transactional_id, metadata.state, metadata.producer_id, metadata.producer_epoch,
            metadata.timeout_ms, metadata.start_ms, tuple(sorted(metadata.partitions)))
