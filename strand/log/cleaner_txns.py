"""What compaction does with transactions (Kafka's ``CleanedTransactionMetadata``).

Walking the cleaned range in offset order:

* the batches of aborted transactions are dropped (and never enter the key map, so
  an aborted value cannot make a committed one of its key look superseded);
* a COMMIT/ABORT marker stays while its transaction still has data in the log; once
  none is left it stays until ``delete.retention.ms`` after its segment's newest
  timestamp (so a consumer that is behind still sees the transaction end), then goes;
* each producer's last batch in the log stays whole whatever its records, so the
  producer state (epoch, sequence) can be rebuilt from the log after the cleaning.

The aborted transactions are those of the log's ``.txnindex`` files overlapping the
range; a marker that stays keeps its index entry.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from strand.log.segment import LogSegment
from strand.log.txn_index import AbortedTxn
from strand.records.batch import NO_PRODUCER_ID, BatchHeader
from strand.records.control import ControlType, parse_control_type
from strand.records.reader import RecordBatch


def last_batches(segments: Iterable[LogSegment]) -> dict[int, int]:
    """Per producer id, the base offset of its last batch in ``segments`` (headers only)."""
    last: dict[int, int] = {}
    for segment in segments:
        for _, header in segment.headers_from(0):
            if header.producer_id != NO_PRODUCER_ID:
                last[header.producer_id] = header.base_offset
    return last


@dataclass(slots=True)
class TxnCleaning:
    """The transactional state of one walk over the cleaned range."""

    aborted: list[tuple[int, int]]  # heap of (first offset, producer id) not reached yet
    last_batch: dict[int, int]  # producer id -> base offset of its last batch in the log
    aborting: set[int] = field(default_factory=set)
    # Producers whose current transaction has data retained in the log.
    has_data: set[int] = field(default_factory=set)
    kept_markers: set[int] = field(default_factory=set)
    removed_markers: int = 0

    @classmethod
    def start(cls, aborted: Sequence[AbortedTxn], last_batch: dict[int, int]) -> TxnCleaning:
        heap = [(txn.first_offset, txn.producer_id) for txn in aborted]
        heapq.heapify(heap)
        return cls(heap, last_batch)

    def _reach(self, header: BatchHeader) -> None:
        last_offset = header.base_offset + header.last_offset_delta
        while self.aborted and self.aborted[0][0] <= last_offset:
            self.aborting.add(heapq.heappop(self.aborted)[1])

    def is_producers_last(self, header: BatchHeader) -> bool:
        return self.last_batch.get(header.producer_id) == header.base_offset

    def aborted_data(self, header: BatchHeader) -> bool:
        """A data batch: whether it belongs to an aborted transaction (dropped, unless
        it is its producer's last batch)."""
        if header.producer_id == NO_PRODUCER_ID or not header.is_transactional:
            return False
        self._reach(header)
        return header.producer_id in self.aborting

    def data_retained(self, header: BatchHeader) -> None:
        if header.is_transactional and header.producer_id != NO_PRODUCER_ID:
            self.has_data.add(header.producer_id)

    def keep_marker(self, header: BatchHeader, data: bytes, expired: bool) -> bool:
        """A control batch: whether it stays (see the module docstring)."""
        pid = header.producer_id
        self._reach(header)
        records = RecordBatch(data, validate=False).records()
        if records and parse_control_type(records[0]) == ControlType.ABORT:
            self.aborting.discard(pid)
        had_data = pid in self.has_data
        self.has_data.discard(pid)
        if had_data or not expired or self.is_producers_last(header):
            self.kept_markers.add(header.base_offset)
            return True
        self.removed_markers += 1
        return False

    def index_entries(self, entries: Iterable[AbortedTxn]) -> list[AbortedTxn]:
        """The index entries of the cleaned segments: those whose marker stayed."""
        return [e for e in entries if e.last_offset in self.kept_markers]
