"""Offsets as the ``strand`` data source takes them and as Spark checkpoints them.

- Option values (Spark's Kafka source's forms): ``earliest``, ``latest``, or JSON
  ``{"topic": {"0": 23, "1": -2}}`` (-2: earliest, -1: latest); timestamps as JSON
  ``{"topic": {"0": 1700000000000}}`` (ms).
- Streaming offsets in the checkpoint: ``{"topic": {"0": 23}}``, the next offset to
  read per partition.
- Planning: one :class:`OffsetRange` per partition with records between a start and
  an end (split further for ``minPartitions``, as Spark's KafkaOffsetRangeCalculator
  does), and ``maxOffsetsPerTrigger`` shared between partitions in proportion to what
  each has waiting (Spark's KafkaMicroBatchStream.rateLimit).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, cast

EARLIEST, LATEST = -2, -1
Named = Literal["earliest", "latest"]
PartitionOffsets = dict[tuple[str, int], int]
OffsetSpec = Named | dict[str, dict[int, int]]


@dataclass(frozen=True)
class TimestampSpec:
    """``startingOffsetsByTimestamp``: per partition, the first offset whose timestamp
    is at least this (ms)."""

    timestamps: Mapping[str, Mapping[int, int]]


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Records ``start`` (inclusive) to ``end`` (exclusive) of one partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def _error(option: str, value: str, why: str) -> ValueError:
    from strand_spark.options import OptionError

    return OptionError(f"option {option}={value!r}: {why}")


def _json_partitions(value: str, option: str) -> dict[str, dict[int, int]]:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise _error(option, value, f"not JSON ({exc.msg})") from None
    if not isinstance(parsed, dict) or not parsed:
        raise _error(option, value, 'expected {"topic": {"partition": offset, ...}}')
    out: dict[str, dict[int, int]] = {}
    for topic, partitions in parsed.items():
        if not topic or not isinstance(partitions, dict) or not partitions:
            raise _error(option, value, f"topic {topic!r}: expected a non-empty object of "
                                        "partition to number")
        out[topic] = {}
        for partition, number in partitions.items():
            try:
                index = int(partition)
            except ValueError:
                index = -1
            if index < 0 or type(number) is not int:
                raise _error(option, value, f"{topic} partition {partition!r}: expected a "
                                            "partition number and an integer")
            out[topic][index] = number
    return out


def parse_assign(value: str, option: str) -> dict[str, list[int]]:
    """The ``assign`` form: ``{"topic": [0, 1], ...}``."""
    try:
        parsed = json.loads(value.strip())
    except json.JSONDecodeError as exc:
        raise _error(option, value, f"not JSON ({exc.msg})") from None
    if not isinstance(parsed, dict) or not parsed or not all(
            isinstance(t, str) and t and isinstance(ps, list) and ps
            and all(type(p) is int and p >= 0 for p in ps) for t, ps in parsed.items()):
        raise _error(option, value, 'expected {"topic": [0, 1, ...], ...}')
    return cast(dict[str, list[int]], parsed)


def parse_offsets(value: str, option: str, ending: bool = False) -> OffsetSpec:
    """``earliest``/``latest`` or per-partition JSON (checked: -2/-1 or offsets >= 0;
    an ending offset cannot be earliest)."""
    text = value.strip()
    if text in ("earliest", "latest"):
        if ending and text == "earliest":
            raise _error(option, value, "an ending offset cannot be earliest")
        return cast(Named, text)
    offsets = _json_partitions(text, option)
    for topic, partitions in offsets.items():
        for partition, offset in partitions.items():
            if offset < EARLIEST or (ending and offset == EARLIEST):
                raise _error(option, value, f"{topic}-{partition}: {offset} is not an "
                             "offset" + (" (-1 is latest)" if ending else
                                         " (-2 is earliest, -1 latest)"))
    return offsets


def parse_timestamps(value: str, option: str) -> TimestampSpec:
    timestamps = _json_partitions(value.strip(), option)
    for topic, partitions in timestamps.items():
        for partition, ms in partitions.items():
            if ms < 0:
                raise _error(option, value, f"{topic}-{partition}: a timestamp is ms "
                                            "since the epoch, >= 0")
    return TimestampSpec(timestamps)


# -- checkpointed streaming offsets ---------------------------------------------------------

def to_checkpoint(offsets: PartitionOffsets) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def from_checkpoint(value: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    return {(topic, int(partition)): int(offset)
            for topic, partitions in value.items() for partition, offset in partitions.items()}


# -- planning -------------------------------------------------------------------------------

def ranges_between(start: PartitionOffsets, end: PartitionOffsets) -> list[OffsetRange]:
    """One range per partition of ``end`` with records after its start (a partition
    missing from ``start`` starts at 0: it is new)."""
    return sorted(OffsetRange(topic, partition, start.get((topic, partition), 0), stop)
                  for (topic, partition), stop in end.items()
                  if stop > start.get((topic, partition), 0))


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """At least ``min_partitions`` ranges when there are that many records: each range
    is cut into parts in proportion to its share of all the records, then the ranges
    with the most records per part get one more part each until there are enough."""
    total = sum(r.size for r in ranges)
    if not min_partitions or min_partitions <= len(ranges) or total == 0:
        return ranges
    parts = [max(1, min(r.size, math.floor(r.size / total * min_partitions))) for r in ranges]
    while sum(parts) < min(min_partitions, total):
        widest = max((i for i, r in enumerate(ranges) if r.size > parts[i]),
                     key=lambda i: ranges[i].size / parts[i])
        parts[widest] += 1
    out: list[OffsetRange] = []
    for r, count in zip(ranges, parts, strict=True):
        step = r.size / count
        bounds = [r.start + round(step * i) for i in range(count)] + [r.end]
        out.extend(OffsetRange(r.topic, r.partition, a, b)
                   for a, b in itertools.pairwise(bounds) if b > a)
    return sorted(out)


def limit_offsets(start: PartitionOffsets, latest: PartitionOffsets,
                  max_records: int) -> PartitionOffsets:
    """The end offsets of a micro-batch of at most about ``max_records``: each partition
    gets a share in proportion to what it has waiting (at least one record when it
    has any), never past its latest offset."""
    waiting = {tp: latest[tp] - start.get(tp, 0) for tp in latest}
    total = sum(max(0, n) for n in waiting.values())
    if total <= max_records:
        return dict(latest)
    out: PartitionOffsets = {}
    for tp, stop in latest.items():
        begin = start.get(tp, 0)
        if waiting[tp] <= 0:
            out[tp] = begin  # nothing waiting (a partition behind its start is data loss,
            continue         # which the caller decides before limiting)
        share = max_records * waiting[tp] / total
        out[tp] = min(stop, begin + (math.ceil(share) if share < 1 else math.floor(share)))
    return out
