"""Reads one offset range of one partition on an executor, as Arrow record batches.

The range ends at an offset the driver saw as readable (the high watermark, or the
last stable offset for ``read_committed``), so the reader stops once its position
reaches the end. Offsets with no record in between are not data loss: transaction
markers, aborted records (read_committed) and compacted-away records leave such gaps,
and the consumer's position moves over them. Data loss is only this, as for Spark's
Kafka source with ``failOnDataLoss``:

- the range starts before the partition's log start offset (retention deleted records
  before they were read), or the log start passes the position while reading;
- the partition ends before the range does (a leader change truncated it, or the topic
  was deleted and created again).

With ``failOnDataLoss=true`` (the default) the task fails with :class:`DataLossError`,
which names the partition and the offsets; with false the lost records are skipped
and a warning is logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from strand import Consumer, ConsumerRecord, TopicPartition
from strand.errors import OffsetOutOfRangeError
from strand_spark.offsets import OffsetRange
from strand_spark.options import ReadOptions
from strand_spark.schema import ArrowRows

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

ROWS_PER_BATCH = 10_000
POLL_MS = 500
# Without records for this long, the reader checks whether the partition still
# reaches the range's end.
STALL_CHECK_S = 5.0


class DataLossError(RuntimeError):
    """Records were deleted (or truncated) before they could be read."""


def lost(options: ReadOptions, what: str) -> None:
    """Fail (``failOnDataLoss=true``) or warn that records are lost."""
    if options.fail_on_data_loss:
        raise DataLossError(f"{what}. Set the option failOnDataLoss=false to skip lost "
                            "records and go on (they are gone either way).")
    log.warning("data loss: %s; skipped (failOnDataLoss=false)", what)


def records_in_range(options: ReadOptions, part: OffsetRange,
                     max_records: int = ROWS_PER_BATCH) -> Iterator[list[ConsumerRecord]]:
    """The range's records, in offset order, a poll's worth at a time."""
    tp = TopicPartition(part.topic, part.partition)
    settings = options.consumer_settings()
    settings.setdefault("max_poll_records", max_records)
    with Consumer(options.bootstrap, **settings) as consumer:
        consumer.assign([tp])
        position = _start(consumer, options, part, tp)
        if position >= part.end:
            return
        consumer.seek(tp, position)
        quiet_since = time.monotonic()
        while position < part.end:
            try:
                records = consumer.poll(timeout_ms=POLL_MS).get(tp, [])
            except OffsetOutOfRangeError:
                position = _start(consumer, options, OffsetRange(
                    part.topic, part.partition, position, part.end), tp)
                consumer.seek(tp, position)
                continue
            wanted = [r for r in records if r.offset < part.end]
            if wanted:
                quiet_since = time.monotonic()
                yield wanted
            position = consumer.position(tp)
            if position < part.end and time.monotonic() - quiet_since > STALL_CHECK_S:
                end = consumer.end_offsets([tp])[tp]
                if end <= position:
                    lost(options, f"{tp} ends at offset {end}, before the planned end "
                                  f"{part.end} of the range read from {part.start} (it was "
                                  "truncated, or deleted and created again)")
                    break
                quiet_since = time.monotonic()


def read_range(options: ReadOptions, part: OffsetRange,
               rows_per_batch: int = ROWS_PER_BATCH) -> Iterator[pa.RecordBatch]:
    """The range as Arrow record batches of about ``rows_per_batch`` rows."""
    rows = ArrowRows(options.include_headers)
    for records in records_in_range(options, part, rows_per_batch):
        rows.add(records)
        if len(rows) >= rows_per_batch:
            yield rows.take(part.topic, part.partition)
    if len(rows):
        yield rows.take(part.topic, part.partition)


def _start(consumer: Consumer, options: ReadOptions, part: OffsetRange,
           tp: TopicPartition) -> int:
    """Where to begin: the range's start, unless retention deleted records from it."""
    earliest = consumer.beginning_offsets([tp])[tp]
    if part.start >= earliest:
        return part.start
    lost(options, f"records {part.start} to {min(earliest, part.end) - 1} of {tp} were "
                  f"deleted before they were read (its log now starts at {earliest})")
    return earliest
