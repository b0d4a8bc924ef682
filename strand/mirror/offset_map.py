"""The mirror's offset map: which target offset each mirrored source offset landed at.

Each task of the mirror copies one offset range of one source partition into one
target partition, in one transaction. In that same transaction it writes one entry
here, so the map holds exactly what was committed, nothing more and nothing less:
the source range (``source_start`` to ``source_end``, exclusive) and the runs of
records it wrote, each run ``length`` records whose source and target offsets both
advance by one (a run breaks where the source skips offsets: transaction markers,
aborted or compacted records, records refused because they would loop back). Copies
of a batch from Spark's replays are aborted together with their entries.

Entries live in the target cluster's topic ``strand-mirror.<source cluster>.offsets``
(one partition, key ``<topic>/<partition>`` of the source, JSON value).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MAP_PREFIX = "strand-mirror."
MAP_SUFFIX = ".offsets"


def offset_map_topic(source_cluster: str) -> str:
    return f"{MAP_PREFIX}{source_cluster}{MAP_SUFFIX}"


@dataclass(frozen=True, slots=True)
class OffsetRun:
    source: int
    target: int
    length: int


@dataclass(frozen=True)
class OffsetMapEntry:
    source_topic: str
    source_partition: int
    source_start: int
    source_end: int
    target_topic: str
    target_partition: int
    runs: tuple[OffsetRun, ...]

    @property
    def key(self) -> bytes:
        return f"{self.source_topic}/{self.source_partition}".encode()

    def encode(self) -> bytes:
        return json.dumps({
            "source": [self.source_topic, self.source_partition, self.source_start,
                       self.source_end],
            "target": [self.target_topic, self.target_partition],
            "runs": [[r.source, r.target, r.length] for r in self.runs]}).encode()

    @classmethod
    def decode(cls, raw: bytes) -> OffsetMapEntry:
        """ValueError when ``raw`` is not an entry."""
        try:
            value = json.loads(raw)
            topic, partition, start, end = value["source"]
            target_topic, target_partition = value["target"]
            runs = tuple(OffsetRun(int(s), int(t), int(n)) for s, t, n in value["runs"])
            return cls(str(topic), int(partition), int(start), int(end), str(target_topic),
                       int(target_partition), runs)
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not an offset map entry ({exc}): {raw[:200]!r}") from None


def runs_of(pairs: Iterable[tuple[int, int]]) -> tuple[OffsetRun, ...]:
    """(source offset, target offset) pairs, in order, as runs."""
    runs: list[OffsetRun] = []
    for source, target in pairs:
        if runs:
            last = runs[-1]
            if source == last.source + last.length and target == last.target + last.length:
                runs[-1] = OffsetRun(last.source, last.target, last.length + 1)
                continue
        runs.append(OffsetRun(source, target, 1))
    return tuple(runs)


def translate(entries: Sequence[OffsetMapEntry], source_offset: int) -> int | None:
    """The target offset to resume from for a consumer whose next source offset is
    ``source_offset``: where the first copy of a source record at or after it is,
    or just after the last copy when every mirrored record before it was read.
    ``entries``: one source partition's, in source order. None when the mirror has
    not copied past ``source_offset`` yet (or began after it: nothing maps there)."""
    if not entries or source_offset < entries[0].source_start:
        return None
    after_last: int | None = None
    starts = [e.source_start for e in entries]
    first = max(0, bisect.bisect_right(starts, source_offset) - 1)
    for entry in entries[:first]:
        if entry.runs:
            last = entry.runs[-1]
            after_last = last.target + last.length
    for entry in entries[first:]:
        for run in entry.runs:
            if run.source + run.length > source_offset:
                if run.source <= source_offset:
                    return run.target + (source_offset - run.source)
                return run.target
            after_last = run.target + run.length
    # No copy at or after the offset: the position after the last copy, if the mirror
    # has read that far.
    if entries[-1].source_end >= source_offset and after_last is not None:
        return after_last
    return None
