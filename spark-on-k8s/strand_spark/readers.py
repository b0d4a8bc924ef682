"""The ``strand`` data source's readers: batch (``spark.read``) and streaming
(``spark.readStream``, micro-batches with admission control).

Both plan on the driver (strand_spark.cluster_view) and read on executors, one Spark
partition per partition offset range (strand_spark.range_reader), as Arrow batches.
Streaming offsets are Spark's to keep: they live in the query's checkpoint as
``{"topic": {"partition": next offset}}``; the stream reader keeps no state of its own
between calls, so a restarted query resumes exactly where its checkpoint says.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from strand import TopicPartition
from strand_spark.cluster_view import ClusterView
from strand_spark.offsets import (
    OffsetRange,
    PartitionOffsets,
    from_checkpoint,
    limit_offsets,
    ranges_between,
    split_ranges,
    to_checkpoint,
)
from strand_spark.options import ReadOptions
from strand_spark.range_reader import lost, read_range
from strand_spark.schema import range_row

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)


class RangePartition(InputPartition):
    """One Spark partition: one offset range (pickled to the executor)."""

    def __init__(self, index: int, part: OffsetRange) -> None:
        super().__init__(index)
        self.part = part


def _read(options: ReadOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    # Spark reads one InputPartition(None) when there is no range at all.
    if not isinstance(partition, RangePartition):
        return
    part = partition.part
    if options.ranges_only:
        yield range_row(part.topic, part.partition, part.start, part.end)
    else:
        yield from read_range(options, part)


class StrandBatchReader(DataSourceReader):
    """``spark.read.format("strand")``: the offsets are fixed when the query is planned."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        with ClusterView(self.options) as view:
            partitions = view.partitions(required=True)
            start = view.resolve(self.options.starting, partitions, "startingOffsets")
            end = view.resolve(self.options.ending, partitions, "endingOffsets")
        for tp, offset in start.items():
            if end[tp] < offset:
                raise ValueError(f"{tp[0]}-{tp[1]}: startingOffsets {offset} is after "
                                 f"endingOffsets {end[tp]}")
        ranges = [OffsetRange(t, p, max(start[(t, p)], 0), end[(t, p)])
                  for (t, p) in sorted(end) if end[(t, p)] > start[(t, p)]]
        return [RangePartition(i, r)
                for i, r in enumerate(split_ranges(ranges, self.options.min_partitions))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read(self.options, partition)


class StrandStreamReader(DataSourceStreamReader,
                         SupportsTriggerAvailableNow):
    """``spark.readStream.format("strand")``. With ``Trigger.AvailableNow`` it reads up
    to the offsets that were latest when the query started, in micro-batches of
    ``maxOffsetsPerTrigger``."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.target: PartitionOffsets | None = None  # Trigger.AvailableNow's end

    def prepareForTriggerAvailableNow(self) -> None:
        with ClusterView(self.options) as view:
            self.target = view.latest(view.partitions(required=False))

    def initialOffset(self) -> dict[str, Any]:
        with ClusterView(self.options) as view:
            partitions = view.partitions(required=False)
            return to_checkpoint(view.resolve(self.options.starting, partitions,
                                              "startingOffsets"))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = from_checkpoint(start)
        with ClusterView(self.options) as view:
            partitions = view.partitions(required=False)
            latest = view.latest(partitions)
            earliest = view.earliest(partitions)
        if self.target is not None:  # nothing that came after the query started
            latest = {tp: min(offset, self.target.get(tp, offset)) for tp, offset in
                      latest.items() if tp in self.target or tp in begin}
        begin = self._checked_start(begin, latest, earliest)
        if isinstance(limit, ReadMaxRows):
            latest = limit_offsets(begin, latest, limit.max_rows)
        end = {tp: max(latest[tp], begin.get(tp, latest[tp])) for tp in latest}
        return to_checkpoint(end)

    def _checked_start(self, begin: PartitionOffsets, latest: PartitionOffsets,
                       earliest: PartitionOffsets) -> PartitionOffsets:
        """Partitions that appeared start at their beginning (nothing of them was ever
        read: their first records are not skipped); a partition that vanished, or is
        now behind where the query got to, lost records."""
        out: PartitionOffsets = {}
        for tp, stop in latest.items():
            if tp not in begin:
                out[tp] = earliest[tp]
                log.info("strand source: new partition %s-%s, read from offset %s",
                         tp[0], tp[1], earliest[tp])
                continue
            if stop < begin[tp]:
                lost(self.options, f"{tp[0]}-{tp[1]} now ends at offset {stop}, before "
                                   f"offset {begin[tp]} this query had reached (it was "
                                   "truncated, or deleted and created again)")
                out[tp] = stop
                continue
            out[tp] = begin[tp]
        for tp in sorted(set(begin) - set(latest)):
            lost(self.options, f"{tp[0]}-{tp[1]} is gone (its topic was deleted), with "
                               f"whatever it held after offset {begin[tp]}")
        return out

    def reportLatestOffset(self) -> dict[str, Any] | None:
        with ClusterView(self.options) as view:
            return to_checkpoint(view.latest(view.partitions(required=False)))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]
                   ) -> Sequence[InputPartition]:
        begin, stop = from_checkpoint(start), from_checkpoint(end)
        new = [TopicPartition(*tp) for tp in stop if tp not in begin]
        if new:  # partitions that appeared in this batch: from their first record
            with ClusterView(self.options) as view:
                begin.update(view.earliest(new))
        ranges = ranges_between(begin, stop)
        return [RangePartition(i, r)
                for i, r in enumerate(split_ranges(ranges, self.options.min_partitions))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the offsets are in Spark's checkpoint, not in a group."""
