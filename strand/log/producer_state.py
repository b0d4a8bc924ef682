"""Producer state of one partition: what makes a producer's retries idempotent.

Per producer id the partition keeps its epoch, the metadata of its last
:data:`NUM_BATCHES_TO_RETAIN` batches, the coordinator epoch of its last transaction
marker, its last timestamp and the first offset of its open transaction (Kafka's
``ProducerStateEntry``). A leader checks each producer batch against it before
writing (Kafka's ``ProducerAppendInfo`` with ``AppendOrigin.CLIENT``):

* a batch repeating one of the last 5 (same epoch, same first and last sequence) is a
  retry: the caller answers with the original offsets and writes nothing;
* an older epoch is fenced (``INVALID_PRODUCER_EPOCH``);
* a newer epoch must start at sequence 0 (KIP-360's epoch bump), unless the
  partition knows nothing of the producer;
* within an epoch the first sequence must follow the last one (wrapping at 2^31 - 1),
  or the batch is ``OUT_OF_ORDER_SEQUENCE_NUMBER``;
* a producer the partition does not know (never seen, or expired) may start at any
  sequence: Kafka >= 2.5 no longer answers ``UNKNOWN_PRODUCER_ID`` there (KIP-360),
  because the producer could not tell an expired id from a lost batch anyway.

Followers and recovery apply batches without these checks (``REPLICATION``): the
leader has checked them, and a follower must end in the leader's state whatever it
holds. Everything here is pure: no file, no clock (callers pass the time).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from strand.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from strand.records.batch import NO_PRODUCER_EPOCH, NO_SEQUENCE
from strand.records.control import ControlType

NUM_BATCHES_TO_RETAIN = 5
NO_TIMESTAMP = -1
NO_COORDINATOR_EPOCH = -1
_SEQUENCE_WRAP = 1 << 31  # sequences are int32 >= 0 and wrap to 0 after 2^31 - 1


class AppendOrigin(enum.Enum):
    CLIENT = "client"  # a producer's request on the leader: fully checked
    COORDINATOR = "coordinator"  # a transaction marker: epochs checked, no sequences
    REPLICATION = "replication"  # a follower's copy or recovery: applied as it is


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One retained batch of a producer (Kafka's ``BatchMetadata``)."""

    last_seq: int
    last_offset: int
    offset_delta: int  # last offset - first offset (= last seq - first seq)
    timestamp: int  # the batch's max timestamp

    @property
    def first_seq(self) -> int:
        return (self.last_seq - self.offset_delta) % _SEQUENCE_WRAP

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(frozen=True, slots=True)
class ProducerStateEntry:
    """What the partition knows of one producer id. Immutable: an append works on a
    copy, committed only once its batches are on disk."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: tuple[BatchMetadata, ...] = ()  # oldest first, at most NUM_BATCHES_TO_RETAIN
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The retained batch with exactly this epoch and sequence range, if any."""
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.last_seq == last_seq and batch.first_seq == first_seq:
                return batch
        return None

    def with_epoch(self, epoch: int) -> ProducerStateEntry:
        """A new epoch forgets the old epoch's batches (their sequences start again)."""
        if epoch == self.producer_epoch:
            return self
        return replace(self, producer_epoch=epoch, batches=())

    def with_batch(self, epoch: int, batch: BatchMetadata) -> ProducerStateEntry:
        # The constructor, not replace(): this runs for every producer batch appended.
        kept = self.batches[1 - NUM_BATCHES_TO_RETAIN:] if epoch == self.producer_epoch else ()
        return ProducerStateEntry(self.producer_id, epoch, (*kept, batch),
                                  self.coordinator_epoch, batch.timestamp,
                                  self.current_txn_first_offset)


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a COMMIT or ABORT marker ended (for the LSO and the aborted index)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _SEQUENCE_WRAP - 1)


class ProducerAppendInfo:
    """The batches of one producer in one append, checked (unless replicated) and
    accumulated on a copy of its entry (Kafka's ``ProducerAppendInfo``)."""

    def __init__(self, current: ProducerStateEntry, origin: AppendOrigin,
                 partition: str = "") -> None:
        self.producer_id = current.producer_id
        self.current = current
        self.origin = origin
        self.entry = current
        self.started_transactions: list[int] = []  # first offsets of transactions begun
        self._partition = partition

    @property
    def _where(self) -> str:
        return f" in {self._partition}" if self._partition else ""

    def _check_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.entry.producer_epoch and self.origin is not AppendOrigin.REPLICATION:
            raise InvalidProducerEpochError(
                f"producer {self.producer_id} wrote epoch {epoch} at offset {offset}"
                f"{self._where}, older than its current epoch {self.entry.producer_epoch}: "
                f"a newer instance of this producer has fenced it; close it")

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        current_epoch = self.entry.producer_epoch
        if epoch != current_epoch:
            # A bumped epoch restarts at 0; a producer the partition has no epoch for
            # (new, expired or deleted by retention) may start anywhere.
            if first_seq != 0 and current_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {self.producer_id} began its new epoch {epoch} at sequence "
                    f"{first_seq} (offset {offset}{self._where}); a new epoch starts at 0 "
                    f"(the current epoch is {current_epoch})")
            return
        # An epoch known only from a marker (no batch yet) expects sequence 0.
        last_seq = self.entry.last_seq
        if not _in_sequence(last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"producer {self.producer_id} epoch {epoch} sent sequence {first_seq} at "
                f"offset {offset}{self._where}, but the last sequence written is "
                f"{last_seq}: a batch in between is missing; bump the epoch and resend")

    def append_data_batch(self, *, epoch: int, first_seq: int, last_seq: int,
                          max_timestamp: int, first_offset: int, last_offset: int,
                          transactional: bool) -> None:
        if self.origin is not AppendOrigin.REPLICATION:
            self._check_epoch(epoch, first_offset)
            if self.origin is AppendOrigin.CLIENT:
                self._check_sequence(epoch, first_seq, first_offset)
        entry = self.entry.with_batch(epoch, BatchMetadata(
            last_seq, last_offset, last_offset - first_offset, max_timestamp))
        if entry.current_txn_first_offset is not None and not transactional:
            raise InvalidTxnStateError(
                f"producer {self.producer_id} wrote a non-transactional batch at offset "
                f"{first_offset}{self._where} while its transaction begun at offset "
                f"{entry.current_txn_first_offset} is open: end the transaction first")
        if entry.current_txn_first_offset is None and transactional:
            entry = replace(entry, current_txn_first_offset=first_offset)
            self.started_transactions.append(first_offset)
        self.entry = entry

    def append_end_txn_marker(self, *, control_type: ControlType, coordinator_epoch: int,
                              epoch: int, offset: int, timestamp: int) -> CompletedTxn | None:
        """Apply a COMMIT/ABORT marker; returns the transaction it ends (None: the
        producer wrote nothing in it here)."""
        self._check_epoch(epoch, offset)
        if (coordinator_epoch < self.entry.coordinator_epoch
                and self.origin is not AppendOrigin.REPLICATION):
            raise TransactionCoordinatorFencedError(
                f"transaction marker for producer {self.producer_id} at offset {offset}"
                f"{self._where} comes from coordinator epoch {coordinator_epoch}, older than "
                f"{self.entry.coordinator_epoch}: a newer coordinator owns the transaction")
        first = self.entry.current_txn_first_offset
        completed = (None if first is None else CompletedTxn(
            self.producer_id, first, offset, control_type == ControlType.ABORT))
        # As Kafka: the marker keeps the batches of its epoch (a retried batch of the
        # transaction is still recognised) and closes the transaction.
        self.entry = replace(self.entry.with_epoch(epoch), coordinator_epoch=coordinator_epoch,
                             last_timestamp=timestamp, current_txn_first_offset=None)
        return completed


@dataclass(slots=True)
class ProducerStateTable:
    """The producers of one partition and how far the log has been applied to them
    (``map_end_offset``: every batch below it is reflected). Kafka's in-memory
    ``ProducerStateManager``."""

    producers: dict[int, ProducerStateEntry] = field(default_factory=dict)
    map_end_offset: int = 0
    # producer id -> first offset of its open transaction (kept with ``producers``, so
    # the LSO costs the open transactions, not every producer).
    ongoing: dict[int, int] = field(default_factory=dict)

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def prepare_update(self, producer_id: int, origin: AppendOrigin,
                       partition: str = "") -> ProducerAppendInfo:
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(current, origin, partition)

    def update(self, info: ProducerAppendInfo) -> None:
        entry = info.entry
        self.producers[info.producer_id] = entry
        if entry.current_txn_first_offset is None:
            self.ongoing.pop(info.producer_id, None)
        else:
            self.ongoing[info.producer_id] = entry.current_txn_first_offset

    def load(self, entries: Iterable[ProducerStateEntry], map_end_offset: int) -> None:
        self.producers = {entry.producer_id: entry for entry in entries}
        self.ongoing = {pid: e.current_txn_first_offset for pid, e in self.producers.items()
                        if e.current_txn_first_offset is not None}
        self.map_end_offset = map_end_offset

    def clear(self, map_end_offset: int) -> None:
        self.load((), map_end_offset)

    def first_undecided_offset(self) -> int | None:
        """The first offset of the oldest open transaction (the LSO's bound)."""
        return min(self.ongoing.values(), default=None)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers idle for ``producer.id.expiration.ms`` (never one with an open
        transaction: its records still need their marker). Returns their ids."""
        expired = [pid for pid, entry in self.producers.items()
                   if is_expired(entry, now_ms, expiration_ms)]
        for pid in expired:
            del self.producers[pid]
        return expired

    def __iter__(self) -> Iterator[ProducerStateEntry]:
        return iter(self.producers.values())

    def __len__(self) -> int:
        return len(self.producers)

    def as_mapping(self) -> Mapping[int, ProducerStateEntry]:
        return dict(self.producers)


def is_expired(entry: ProducerStateEntry, now_ms: int, expiration_ms: int) -> bool:
    return (entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= expiration_ms)
