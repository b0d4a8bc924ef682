"""What ``strand group reset-offsets`` sets, decided before anything is written
(Kafka's ``kafka-consumer-groups.sh --reset-offsets``).

One reset spec (earliest, latest, an offset, a date-time, a shift of the committed
offset) gives each partition a target; a target outside the partition's
``[log start, log end]`` is clamped to it, as Kafka's tool does
(``checkOffsetsRange``), and the plan says so, so a reset never leaves a group past
the end of a partition (a negative lag) or before its first record.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from strand.client.structs import TopicPartition

__all__ = ["PartitionReset", "ResetError", "ResetSpec", "parse_datetime", "parse_topic_scope",
           "plan"]

SpecKind = Literal["earliest", "latest", "offset", "datetime", "shift"]


@dataclass(frozen=True, slots=True)
class ResetSpec:
    kind: SpecKind
    value: int = 0  # the offset, the shift, or the time (ms since the epoch)


@dataclass(frozen=True, slots=True)
class PartitionReset:
    tp: TopicPartition
    current: int | None  # committed now (None: nothing)
    new: int
    note: str = ""  # why ``new`` is not what the spec asked for


class ResetError(ValueError):
    """A spec that cannot be applied to a partition (shift without a commit)."""


def parse_datetime(text: str) -> int:
    """``YYYY-MM-DDTHH:MM:SS[.sss][Z|±HH:MM]`` (Kafka's format; without a zone: local
    time, as Kafka's tool reads it) as ms since the epoch."""
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a date-time like 2024-05-01T12:00:00, "
                         "2024-05-01T12:00:00.000+02:00 or 2024-05-01T10:00:00Z") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time
    millis = int(moment.timestamp() * 1000)
    if millis < 0:
        raise ValueError(f"{text!r} is before 1970")
    return millis


def parse_topic_scope(text: str) -> tuple[str, tuple[int, ...] | None]:
    """``TOPIC`` (every partition) or ``TOPIC:0,2`` (those partitions)."""
    topic, sep, partitions = text.partition(":")
    if not topic:
        raise ValueError(f"{text!r}: expected TOPIC or TOPIC:P1,P2,...")
    if not sep:
        return topic, None
    try:
        chosen = tuple(sorted({int(p) for p in partitions.split(",")}))
    except ValueError:
        raise ValueError(f"{text!r}: partitions are numbers, as in {topic}:0,1") from None
    if not chosen or chosen[0] < 0:
        raise ValueError(f"{text!r}: partitions are numbers >= 0, as in {topic}:0,1")
    return topic, chosen


def _clamp(requested: int, start: int, end: int) -> tuple[int, str]:
    if requested > end:
        return end, f"{requested} is past the end: set to the log end offset {end}"
    if requested < start:
        return start, f"{requested} is before the log start: set to {start}"
    return requested, ""


def plan(spec: ResetSpec, partitions: Sequence[TopicPartition],
         committed: Mapping[TopicPartition, int], starts: Mapping[TopicPartition, int],
         ends: Mapping[TopicPartition, int],
         by_time: Mapping[TopicPartition, int | None] | None = None) -> list[PartitionReset]:
    """The new offset of every partition. ``by_time``: the first offset at or after
    the spec's time per partition (None: no such record), for a datetime spec."""
    resets = []
    for tp in sorted(partitions):
        start, end, current = starts[tp], ends[tp], committed.get(tp)
        note = ""
        if spec.kind == "earliest":
            new = start
        elif spec.kind == "latest":
            new = end
        elif spec.kind == "offset":
            new, note = _clamp(spec.value, start, end)
        elif spec.kind == "shift":
            if current is None:
                raise ResetError(
                    f"cannot shift {tp.topic}-{tp.partition} by {spec.value}: the group has "
                    "no committed offset there (reset it with --to-earliest, --to-latest, "
                    "--to-offset or --to-datetime)")
            new, note = _clamp(current + spec.value, start, end)
        else:
            found = (by_time or {}).get(tp)
            if found is None:
                new, note = end, "no record at or after that time: set to the log end offset"
            else:
                new, note = _clamp(found, start, end)
        resets.append(PartitionReset(tp, current, new, note))
    return resets
