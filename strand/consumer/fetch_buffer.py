"""Fetched data waiting to be consumed: one partition's answer, decoded on demand.

A fetch returns whole batches, so the first one may start before the position the
consumer asked for (those records were consumed already and are skipped), and the
data may end in a cut-off batch (ignored: the next fetch starts at the end of the
last complete one). Batches are decoded (and their CRC checked) one at a time as
``poll()`` needs records, so a large answer costs nothing until it is read and
``max_records`` does not force decoding everything at once.

Transaction markers (control batches) never reach users. With ``read_committed`` the
answer stops at the last stable offset and lists the aborted transactions overlapping
it (producer id, first offset): as in Kafka's ``CompletedFetch``, a producer's
transactional batches are dropped from the first offset of an aborted transaction of
its up to the ABORT marker that ends it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

from strand.client.structs import TopicPartition
from strand.consumer.records import ConsumerRecord
from strand.records import RecordBatch, iter_record_batches
from strand.records.batch import HEADER_SIZE, LOG_OVERHEAD, NO_PRODUCER_ID, SPAN, BatchHeader
from strand.records.control import ControlType, parse_control_type

__all__ = ["CompletedFetch", "end_offset"]


def end_offset(data: bytes, default: int) -> int:
    """The offset after the last complete batch of ``data`` (``default`` if none is
    complete). Reads the batches' headers only."""
    view = memoryview(data)
    total = len(view)
    pos = 0
    end = default
    unpack = SPAN.unpack_from
    while total - pos >= HEADER_SIZE:
        base_offset, length, last_delta = unpack(view, pos)
        size = length + LOG_OVERHEAD
        if size < HEADER_SIZE or pos + size > total:
            break
        end = base_offset + last_delta + 1
        pos += size
    return end


class CompletedFetch:
    """One partition's records from one fetch answer; see the module docstring."""

    __slots__ = ("_aborted", "_aborting", "_batch_next", "_batches", "_index", "_records",
                 "done", "fetch_offset", "next_fetch_offset", "size", "tp")

    def __init__(self, tp: TopicPartition, data: bytes, fetch_offset: int,
                 check_crcs: bool = True,
                 aborted_transactions: Iterable[tuple[int, int]] | None = None) -> None:
        """``aborted_transactions``: (producer id, first offset) of a read_committed
        answer; None for read_uncommitted (every data record is shown)."""
        self.tp = tp
        self.fetch_offset = fetch_offset
        self.size = len(data)
        self.next_fetch_offset = end_offset(data, fetch_offset)
        self._batches: Iterator[RecordBatch] = iter_record_batches(data, validate=check_crcs)
        self._records: list[ConsumerRecord] = []
        self._index = 0
        self._batch_next = fetch_offset
        self.done = False
        # (first offset, producer id) not reached yet, and producers being dropped.
        self._aborted = ([(first, pid) for pid, first in aborted_transactions]
                         if aborted_transactions is not None else None)
        if self._aborted:
            heapq.heapify(self._aborted)
        self._aborting: set[int] = set()

    def take(self, position: int, max_records: int) -> tuple[list[ConsumerRecord], int]:
        """Up to ``max_records`` records at or after ``position``, and the position after
        them (past the end of a batch once all its records are taken)."""
        out: list[ConsumerRecord] = []
        topic, partition = self.tp
        while True:
            records = self._records
            count = len(records)
            i = self._index
            if i < count:
                while i < count and records[i].offset < position:
                    i += 1
                if i < count:
                    j = min(count, i + max_records - len(out))
                    out.extend(records[i:j])
                    position = records[j - 1].offset + 1
                    i = j
                self._index = i
                if i < count:
                    return out, position  # max_records reached inside the batch
            if self._batch_next > position:
                position = self._batch_next  # the batch is done: past its (compacted) tail
            if len(out) >= max_records:
                return out, position
            batch = next(self._batches, None)
            if batch is None:
                self.done = True
                self._records = []
                self._index = 0
                return out, position
            header = batch.header
            next_offset = header.base_offset + header.last_offset_delta + 1
            self._batch_next = next_offset
            self._index = 0
            aborted = self._is_aborted(header, batch) if self._aborted is not None else False
            if next_offset <= position or header.is_control or aborted:
                self._records = []  # consumed before, a marker, or an aborted transaction
                continue
            timestamp_type = header.timestamp_type
            self._records = [
                ConsumerRecord(topic, partition, r.offset, r.timestamp, timestamp_type,
                               r.key, r.value, r.headers)
                for r in batch.records()
            ]

    def _is_aborted(self, header: BatchHeader, batch: RecordBatch) -> bool:
        """read_committed: whether ``batch`` belongs to an aborted transaction (a
        control batch is never shown anyway; an ABORT marker ends the dropping)."""
        pid = header.producer_id
        if pid == NO_PRODUCER_ID:
            return False
        pending = self._aborted
        last_offset = header.base_offset + header.last_offset_delta
        while pending and pending[0][0] <= last_offset:
            self._aborting.add(heapq.heappop(pending)[1])
        if header.is_control:
            records = batch.records()
            if records and parse_control_type(records[0]) == ControlType.ABORT:
                self._aborting.discard(pid)
            return False
        return header.is_transactional and pid in self._aborting
