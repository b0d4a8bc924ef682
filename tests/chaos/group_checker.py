"""The checks of the consumer-group workload: pure functions over a :class:`History`.

The members commit after processing, so the group is at-least-once: a partition's
next owner must start exactly at the group's committed offset — not below it (the
records before it were processed and their commit acknowledged: **reread**) and not
above it (records nobody processed: **skipped**) — and must then read on without gaps.

**What was committed at an assignment.** The new owner's SDK fetched the committed
offset at some instant between ``t_poll`` and ``t_assigned`` of its ownership period.
The possible values then are those of every commit that could be the last one to have
taken effect by that instant:

- an acknowledged commit took effect between its start and its answer;
- any other commit (an error answer, a timeout, a member SIGKILLed while waiting) may
  have taken effect at any time after it started, or never: its value stays possible,
  as does the one before it;
- a commit stops being possible once an acknowledged commit that *started after it
  ended* had been answered before the fetch (it certainly came later);
- nothing committed (possible until the first acknowledged commit certainly before the
  fetch): the log start, the first offset of the final read.

Offsets are compared through the final read: a possible committed offset ``c`` means
"start at the first offset >= c in the final log", and a jump between two offsets read
is a gap only if the final log has records in between (offsets that do not exist, e.g.
transaction markers, may be jumped). A member given back a partition it read before
starts anew like any other owner (as Kafka's consumer does): at the committed offset,
or at the log start when nothing is committed — not where it had got to.

**Allowed re-reads.** A crashed member's processed but uncommitted records, and those
of an unanswered commit, are read again by the next owner: at-least-once, counted in
``info["group"]["read_again"]``, never an error. Within one ownership period offsets
must strictly increase: the ``order`` check (each period is one reader session).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .history import FINAL_SESSION, OK, Anomaly, Commit, History, Ownership, Read

GROUP_CHECKS = ("reread", "skipped")


@dataclass
class GroupResult:
    anomalies: dict[str, list[Anomaly]]  # per check in GROUP_CHECKS
    read_times: list[float]  # each group read, to charge the "group reads" column
    owner_change_times: list[float]  # each partition moving to another member
    info: dict[str, Any] = field(default_factory=dict)


class FinalLog:
    """A partition's offsets in the final read (every offset exists when it could not
    be read back completely: then gaps are judged by offsets alone)."""

    def __init__(self, offsets: Iterable[int], complete: bool) -> None:
        self.offsets = sorted(set(offsets))
        self.complete = complete

    def at_or_after(self, offset: int) -> int:
        """Where a consumer positioned at ``offset`` reads its next record."""
        if not self.complete:
            return offset
        i = bisect.bisect_left(self.offsets, offset)
        return self.offsets[i] if i < len(self.offsets) else offset

    def between(self, low: int, high: int) -> list[int]:
        """Offsets of the final log in [low, high)."""
        if not self.complete:
            return list(range(low, high))
        return self.offsets[bisect.bisect_left(self.offsets, low):
                            bisect.bisect_left(self.offsets, high)]


class CommitHistory:
    """One partition's commits, to answer: what may have been committed at an instant
    between ``lo`` and ``hi``? (None stands for "nothing committed")."""

    def __init__(self, commits: Iterable[Commit]) -> None:
        self.commits = sorted(commits, key=lambda c: c.t_start)
        self.starts = [c.t_start for c in self.commits]
        acked = sorted((c for c in self.commits if c.outcome == OK), key=lambda c: c.t_end)
        self.acked_ends = [c.t_end for c in acked]
        self.latest_start: list[float] = []  # running max of acked starts, by end
        latest = -math.inf
        for c in acked:
            latest = max(latest, c.t_start)
            self.latest_start.append(latest)

    def possible(self, lo: float, hi: float) -> set[int | None]:
        # The latest start of an acknowledged commit answered before lo: every commit
        # that ended before it is certainly overwritten.
        i = bisect.bisect_left(self.acked_ends, lo)
        horizon = self.latest_start[i - 1] if i else -math.inf
        out: set[int | None] = set() if i else {None}
        for c in self.commits[:bisect.bisect_left(self.starts, hi)]:
            end = c.t_end if c.t_end >= 0 else math.inf
            if end >= horizon:
                out.add(c.offset)
        return out

    def describe(self, lo: float) -> str:
        """The last acknowledged commit answered before ``lo``."""
        i = bisect.bisect_left(self.acked_ends, lo)
        if not i:
            return "no commit acknowledged before"
        end = self.acked_ends[i - 1]
        last = next(c for c in self.commits if c.outcome == OK and c.t_end == end)
        return f"last acknowledged commit {last.offset} by {last.member} (gen {last.generation})"


def check_group(history: History) -> GroupResult:
    final: dict[int, list[int]] = defaultdict(list)
    for read in history.reads:
        if read.session == FINAL_SESSION:
            final[read.partition].append(read.offset)
    logs = {p: FinalLog(final.get(p, []), p in history.final_complete)
            for p in range(history.partitions)}
    periods = {(o.session, o.partition): o for o in history.ownerships}
    reads: dict[tuple[str, int], list[Read]] = defaultdict(list)
    unowned = 0
    for read in history.reads:
        if (read.session, read.partition) in periods:
            reads[(read.session, read.partition)].append(read)
        elif read.session.endswith("/unowned"):
            unowned += 1
    commits: dict[int, list[Commit]] = defaultdict(list)
    for commit in history.commits:
        commits[commit.partition].append(commit)

    result = GroupResult({name: [] for name in GROUP_CHECKS}, [], [])
    read_before: set[tuple[int, int]] = set()
    read_again = checked = 0
    by_partition: dict[int, list[Ownership]] = defaultdict(list)
    for period in history.ownerships:
        by_partition[period.partition].append(period)
    for partition, owned in sorted(by_partition.items()):
        log = logs.get(partition) or FinalLog([], False)
        committed = CommitHistory(commits[partition])
        previous: Ownership | None = None
        for period in sorted(owned, key=lambda o: o.t_assigned):
            if previous is not None and previous.member != period.member:
                result.owner_change_times.append(period.t_assigned)
            previous = period
            got = reads.get((period.session, partition), [])
            result.read_times.extend(r.t for r in got)
            for r in got:
                read_again += (partition, r.offset) in read_before
                read_before.add((partition, r.offset))
            if not got:
                continue
            checked += 1
            possible = committed.possible(period.t_poll, period.t_assigned)
            starts = {log.at_or_after(0 if c is None else c) for c in possible}
            anomaly = _judge_start(period, got[0], starts, committed, log)
            if anomaly is not None:
                result.anomalies[anomaly.check].append(anomaly)
            for before, after in itertools.pairwise(got):
                missing = log.between(before.offset + 1, after.offset)
                if after.offset > before.offset and missing:
                    result.anomalies["skipped"].append(Anomaly(
                        "skipped", after.t, partition, missing[0],
                        f"{_who(period)} read {partition}/{after.offset} right after "
                        f"{before.offset}: skipped {_span(missing)}"))
    result.info = {
        "members": len(history.members),
        "members_ended": _count(history.members.values()),
        "ownerships": len(history.ownerships),
        "ownerships_checked": checked,
        "ownerships_without_assignment": sum(1 for o in history.ownerships if not o.announced),
        "reads_without_ownership": unowned,
        "commits": _count(c.outcome for c in history.commits),
        "commit_errors": _count(c.error.split(":", 1)[0] for c in history.commits
                                if c.outcome != OK),
        # At-least-once: read again after a crash or an unanswered commit (allowed).
        "read_again": read_again,
        "final_records_read_by_group": len(read_before & {
            (p, o) for p, offsets in final.items() for o in offsets}),
        "errors": history.group_errors[:10],
    }
    return result


def _judge_start(period: Ownership, first: Read, starts: set[int], committed: CommitHistory,
                 log: FinalLog) -> Anomaly | None:
    """The first read of an ownership period against the possible committed offsets."""
    if first.offset in starts:
        return None
    low = min(starts)
    seen = ("" if period.seen_committed is None or period.seen_committed >= 0
            else "; committed() failed in the listener")
    context = (f"(possible committed offsets {sorted(starts)[:6]}; "
               f"{committed.describe(period.t_poll)}; the member's committed() said "
               f"{period.seen_committed}{seen}"
               f"{'' if period.announced else '; records came without on_partitions_assigned'})")
    if first.offset < low:
        return Anomaly("reread", period.t_assigned, period.partition, first.offset,
                       f"{_who(period)} started {period.partition} at offset {first.offset}, "
                       f"below the committed offset: re-read "
                       f"{_span(list(range(first.offset, low)))} {context}")
    below = max(s for s in starts if s < first.offset)
    missing = log.between(below, first.offset)
    return Anomaly("skipped", period.t_assigned, period.partition, below,
                   f"{_who(period)} started {period.partition} at offset {first.offset}: "
                   f"skipped {_span(missing) if missing else 'nothing in the final log, yet'} "
                   f"{context}")


def _who(period: Ownership) -> str:
    return f"member {period.member} (gen {period.generation}, {period.session})"


def _span(offsets: list[int]) -> str:
    if not offsets:
        return "no offset"
    if len(offsets) == 1:
        return f"offset {offsets[0]}"
    return f"{len(offsets)} offsets {offsets[0]}..{offsets[-1]}"


def _count(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for value in values:
        out[value] += 1
    return dict(out)
