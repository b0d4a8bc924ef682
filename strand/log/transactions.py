"""Transactions in a partition log: the last stable offset (LSO) and the
aborted-transaction indexes of its segments (Kafka's ``ProducerStateManager``
LSO tracking with ``LogSegment.updateTxnIndex`` and ``collectAbortedTxns``).

* LSO = min(high watermark, first offset of any transaction still undecided), where
  undecided means open (no marker yet) or decided by a marker not yet below the
  high watermark (Kafka's "unreplicated" transactions: a new leader without the
  marker would reopen it, so its records may not be shown as decided yet).
* Each ABORT marker appended (leader, follower, recovery) adds its transaction to the
  index of the segment the marker is in, with the LSO right after the abort.
* After an unclean shutdown the indexes of recovered segments are rebuilt by a
  header-only scan of the log's transactional and control batches.

Not thread-safe: the partition log calls it with its lock held.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from strand.log.producer_state import CompletedTxn
from strand.log.segment import LogSegment
from strand.log.txn_index import AbortedTxn
from strand.records.batch import NO_PRODUCER_ID
from strand.records.control import ControlType, parse_end_txn_marker
from strand.records.reader import RecordBatch


@dataclass(slots=True)
class TxnTracker:
    # Decided transactions whose marker is at or above the high watermark.
    unreplicated: list[CompletedTxn] = field(default_factory=list)

    def complete(self, completed: Iterable[CompletedTxn], segment: LogSegment,
                 ongoing: dict[int, int], high_watermark: int) -> None:
        """Record the transactions ``completed`` by markers just appended to
        ``segment``; ``ongoing`` are the transactions still open after them."""
        for txn in completed:
            if txn.is_aborted:
                # As Kafka: the first other open transaction (unreplicated ones aside).
                lso = min((first for pid, first in ongoing.items()
                           if pid != txn.producer_id), default=txn.last_offset + 1)
                segment.txn_index.append(AbortedTxn(
                    txn.producer_id, txn.first_offset, txn.last_offset, lso))
            if txn.last_offset >= high_watermark:
                self.unreplicated.append(txn)

    def last_stable_offset(self, high_watermark: int, first_open: int | None) -> int:
        """The LSO for this high watermark and first open transaction offset."""
        if self.unreplicated:
            self.unreplicated = [t for t in self.unreplicated
                                 if t.last_offset >= high_watermark]
        lso = high_watermark
        if first_open is not None:
            lso = min(lso, first_open)
        for txn in self.unreplicated:
            lso = min(lso, txn.first_offset)
        return lso

    def truncate(self, end_offset: int) -> None:
        """Markers at or after ``end_offset`` are gone: their transactions reopen (the
        producer state rebuild says so)."""
        self.unreplicated = [t for t in self.unreplicated if t.last_offset < end_offset]


def collect_aborted(segments: Sequence[LogSegment], bases: Sequence[int], start: int,
                    upper: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping [start, upper), in marker order: a marker
    at or after ``start`` lies in the segment holding ``start`` or a later one."""
    found: list[AbortedTxn] = []
    first = max(0, bisect_right(bases, start) - 1)
    for segment in segments[first:]:
        found.extend(segment.txn_index.collect(start, upper))
    return found


def rebuild_txn_indexes(segments: Sequence[LogSegment]) -> int:
    """Rebuild the aborted-transaction index of every segment marked stale, from a
    scan of the whole log (the first offset of an aborted transaction may lie in an
    earlier segment). Returns the number of segments rebuilt."""
    stale = [segment for segment in segments if segment.txn_index_stale]
    if not stale:
        return 0
    ongoing: dict[int, int] = {}
    rebuilt: dict[int, list[AbortedTxn]] = {segment.base_offset: [] for segment in stale}
    for segment in segments:
        entries = rebuilt.get(segment.base_offset)
        for position, header in segment.headers_from(0):
            pid = header.producer_id
            if pid == NO_PRODUCER_ID or not header.is_transactional:
                continue
            if not header.is_control:
                ongoing.setdefault(pid, header.base_offset)
                continue
            records = RecordBatch(segment.read_at(position, header.size_in_bytes),
                                  validate=False).records()
            if not records:
                continue
            marker = parse_end_txn_marker(records[0])
            first = ongoing.pop(pid, None)
            if first is None or marker.control_type != ControlType.ABORT or entries is None:
                continue
            lso = min(ongoing.values(), default=header.base_offset + 1)
            entries.append(AbortedTxn(pid, first, header.base_offset, lso))
    for segment in stale:
        segment.txn_index.replace(rebuilt[segment.base_offset])
        segment.txn_index_stale = False
    return len(stale)
