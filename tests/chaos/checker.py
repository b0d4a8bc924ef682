"""The checks of a chaos run: pure functions over a :class:`History` (no I/O).

The properties, after Jepsen's queue/Kafka workloads:

- **lost**: every acknowledged record is read back by the final read, at the offset
  its acknowledgement gave.
- **divergence**: no (partition, offset) ever yields two different values, to any
  observer: the producer's acknowledgement counts as an observation of the value it
  claims is at that offset, as do every consumer's reads.
- **order**: within one consumer session, the offsets of a partition strictly
  increase (a consumer thrown back by a truncated log shows here).
- **phantom**: no value is read that was never sent, or whose send was definitely
  refused. Sends that ended ambiguously (timeouts, lost answers, never completed)
  may or may not be there: they are counted apart (``ambiguous``), never as errors.
- **replicas**: every replica's log is byte-identical to the leader's up to the
  high watermark (:func:`compare_replicas`; the harness reads the files).
- **reread** / **skipped**: the consumer group's owners of a partition start exactly
  at its committed offset and read on without gaps (:mod:`.group_checker`).

Each anomaly is charged to a fault, to build the per-fault table (:func:`summarize`):
to the fault in progress when it happened or, failing that, the one injected last
before it (its after-effects) — except lost records, charged to the fault in progress
when they were acknowledged or else to the *next* fault injected, the first that
could have destroyed them. ``none`` is before any fault (or, for a lost record,
after the last one).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from strand.errors import CorruptRecordError
from strand.records.batch import batch_size_at, validate_batch

from .group_checker import GROUP_CHECKS, check_group
from .history import (
    AMBIGUOUS,
    FAILED,
    FINAL_SESSION,
    OK,
    PENDING,
    Anomaly,
    FaultEvent,
    History,
    ReplicaResult,
)

NO_FAULT = "none"
FINAL_ROW = "final"
CHECKS = ("lost", "divergence", "order", "phantom", *GROUP_CHECKS)
EXAMPLES = 5  # anomalies of each check kept in the report


# ------------------------------------------------------------------------------ checks

def final_reads(history: History) -> dict[tuple[int, int], str]:
    return {(r.partition, r.offset): r.value for r in history.reads
            if r.session == FINAL_SESSION}


def check_lost(history: History) -> list[Anomaly]:
    final = final_reads(history)
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for (partition, offset), value in final.items():
        where[value].append((partition, offset))
    lost = []
    for send in history.sends:
        if send.outcome != OK:
            continue
        here = final.get((send.partition, send.offset))
        if here == send.value:
            continue
        if send.partition not in history.final_complete:
            why = "its partition could not be read back"
        elif where.get(send.value):
            why = f"found at {sorted(where[send.value])} instead"
        elif here is not None:
            why = f"the offset holds {here!r}"
        elif send.offset >= history.final_hw.get(send.partition, 0):
            why = f"beyond the final high watermark {history.final_hw.get(send.partition)}"
        else:
            why = "missing"
        lost.append(Anomaly("lost", send.t_done, send.partition, send.offset,
                            f"{send.value!r} acknowledged at {send.partition}/{send.offset}: "
                            f"{why}"))
    return lost


def check_divergence(history: History) -> list[Anomaly]:
    # (partition, offset) -> value -> (first time seen, observers)
    seen: dict[tuple[int, int], dict[str, tuple[float, set[str]]]] = defaultdict(dict)

    def observe(key: tuple[int, int], value: str, t: float, who: str) -> None:
        values = seen[key]
        first, observers = values.get(value, (t, set()))
        observers.add(who)
        values[value] = (min(first, t), observers)

    for send in history.sends:
        if send.outcome == OK:
            observe((send.partition, send.offset), send.value, send.t_done, "ack")
    for read in history.reads:
        observe((read.partition, read.offset), read.value, read.t, read.session)
    anomalies = []
    for (partition, offset), values in seen.items():
        if len(values) < 2:
            continue
        # When the offset started to diverge: the first sighting of its second value.
        t = sorted(first for first, _ in values.values())[1]
        detail = "; ".join(f"{v!r} seen by {', '.join(sorted(who)[:4])}"
                           for v, (_, who) in sorted(values.items()))
        anomalies.append(Anomaly("divergence", t, partition, offset,
                                 f"{partition}/{offset} yielded {len(values)} values: {detail}"))
    return anomalies


def check_order(history: History) -> list[Anomaly]:
    last: dict[tuple[str, int], int] = {}
    anomalies = []
    for read in history.reads:  # each session appends in the order it read
        key = (read.session, read.partition)
        previous = last.get(key)
        if previous is not None and read.offset <= previous:
            anomalies.append(Anomaly(
                "order", read.t, read.partition, read.offset,
                f"session {read.session} read offset {read.offset} of partition "
                f"{read.partition} after offset {previous}"))
        last[key] = read.offset
    return anomalies


def check_phantom(history: History) -> list[Anomaly]:
    sent = {send.value: send for send in history.sends}
    reported: set[str] = set()
    anomalies = []
    for read in history.reads:
        if read.value in reported:
            continue
        send = sent.get(read.value)
        if send is None:
            why = "was never sent"
        elif send.outcome == FAILED:
            why = f"was refused ({send.error})"
        else:
            continue
        reported.add(read.value)
        anomalies.append(Anomaly("phantom", read.t, read.partition, read.offset,
                                 f"{read.value!r} read at {read.partition}/{read.offset} "
                                 f"by {read.session} {why}"))
    return anomalies


# ---------------------------------------------------------------------------- replicas

@dataclass(frozen=True, slots=True)
class _Prefix:
    batches: list[tuple[int, bytes]]  # (base offset, raw bytes) below the watermark
    end: int  # the offset after the last whole batch read
    problem: str = ""


def log_prefix(data: bytes, hw: int) -> _Prefix:
    """The batches of a log (concatenated segment files) that start below ``hw``. A
    cut-off last batch (a write in progress) ends the scan; a corrupt one is a problem."""
    batches: list[tuple[int, bytes]] = []
    pos, end = 0, 0
    while pos < len(data):
        size = batch_size_at(data, pos)
        if size is None or pos + size > len(data):
            break
        try:
            header = validate_batch(data, pos, pos + size)
        except CorruptRecordError as exc:
            return _Prefix(batches, end, f"corrupt batch at byte {pos}: {exc}")
        if header.base_offset >= hw:
            break
        batches.append((header.base_offset, data[pos:pos + size]))
        end = header.next_offset
        pos += size
    return _Prefix(batches, end)


def compare_replicas(partition: int, hw: int, leader: int,
                     logs: Mapping[int, bytes | None], t: float = 0.0,
                     final: bool = False) -> ReplicaResult:
    """Compare every replica's log with the leader's, byte for byte, below ``hw``
    (replicas copy batches as the leader wrote them: epochs and CRCs included)."""
    prefixes = {node: log_prefix(data, hw) for node, data in logs.items() if data is not None}
    reference = prefixes.get(leader)
    usable = reference is not None and not reference.problem and reference.end >= hw
    verdicts = []
    for node in sorted(set(logs) | {leader}):
        prefix = prefixes.get(node)
        if prefix is None:
            verdict = "missing"
        elif prefix.problem:
            verdict = prefix.problem
        elif prefix.end < hw:
            verdict = f"short: ends at {prefix.end} < hw {hw}"
        elif node == leader:
            verdict = "reference"
        elif reference is None or not usable:
            verdict = "not compared (the leader's log is unusable)"
        elif prefix.batches != reference.batches:
            at = _first_difference(prefix, reference)
            verdict = f"differs from the leader at offset {at}"
        else:
            verdict = "identical"
        verdicts.append((node, verdict))
    identical = all(v in ("identical", "reference") for _, v in verdicts)
    detail = ", ".join(f"node {n}{' (leader)' if n == leader else ''}: {v}"
                       for n, v in verdicts)
    return ReplicaResult(partition, hw, leader, identical, detail, t, final)


def _first_difference(a: _Prefix, b: _Prefix) -> int:
    for (offset, x), (_, y) in zip(a.batches, b.batches, strict=False):
        if x != y:
            return offset
    shorter = min(len(a.batches), len(b.batches))
    longer = a.batches if len(a.batches) > shorter else b.batches
    return longer[shorter][0] if len(longer) > shorter else -1


# ----------------------------------------------------------------------------- summary

@dataclass
class Row:
    fault: str
    injections: int = 0
    acked: int = 0
    lost: int = 0
    divergence: int = 0
    order: int = 0
    phantom: int = 0
    ambiguous: int = 0
    replica_checks: int = 0
    replicas_identical: int = 0
    # Injections after which the cluster was healthy again within the recovery
    # timeout with no process exiting on its own (liveness, not a safety property).
    recovered: int = 0
    # The consumer group: records its members read, partitions moving to another
    # member, and the two group checks (group_checker.py).
    group_reads: int = 0
    owner_changes: int = 0
    reread: int = 0
    skipped: int = 0

    @property
    def replica_mismatches(self) -> int:
        return self.replica_checks - self.replicas_identical

    def add(self, other: Row) -> None:
        for name in ("injections", "acked", "lost", "divergence", "order", "phantom",
                     "ambiguous", "replica_checks", "replicas_identical", "recovered",
                     "group_reads", "owner_changes", "reread", "skipped"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class Report:
    rows: list[Row]
    total: Row
    examples: dict[str, list[str]] = field(default_factory=dict)
    replica_failures: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    unrecovered: list[str] = field(default_factory=list)  # liveness findings

    @property
    def failed(self) -> bool:
        """A safety property was violated."""
        t = self.total
        return bool(t.lost or t.divergence or t.order or t.phantom or t.replica_mismatches
                    or t.reread or t.skipped)

    @property
    def unavailable(self) -> bool:
        """The cluster did not come back by itself after some fault."""
        return bool(self.unrecovered)

    def to_json(self) -> dict[str, Any]:
        rows = [{**asdict(r), "replica_mismatches": r.replica_mismatches}
                for r in [*self.rows, self.total]]
        return {"rows": rows, "failed": self.failed, "unavailable": self.unavailable,
                "unrecovered": self.unrecovered, "examples": self.examples,
                "replica_failures": self.replica_failures, "info": self.info}


class _Charger:
    def __init__(self, faults: Iterable[FaultEvent]) -> None:
        self.faults = sorted(faults, key=lambda f: f.t_inject)
        self.injected = [f.t_inject for f in self.faults]

    def __call__(self, t: float, forward: bool = False) -> str:
        i = bisect.bisect_right(self.injected, t) - 1
        if i >= 0:
            fault = self.faults[i]
            end = fault.t_recovered if fault.t_recovered >= 0 else math.inf
            if not forward or t < end:
                return fault.kind
        if forward and i + 1 < len(self.faults):
            return self.faults[i + 1].kind
        return NO_FAULT


def check(history: History) -> Report:
    charge = _Charger(history.faults)
    rows: dict[str, Row] = {}

    def row(name: str) -> Row:
        return rows.setdefault(name, Row(name))

    unrecovered = []
    for fault in sorted(history.faults, key=lambda f: f.t_inject):
        row(fault.kind).injections += 1
        row(fault.kind).recovered += int(fault.recovered)
        if not fault.recovered:
            unrecovered.append(f"{fault.kind} on {fault.target} at "
                               f"{fault.t_inject - history.t_start:.1f}s: "
                               f"{_why_unrecovered(fault.crashed)}")
    if not history.final_recovered:
        unrecovered.append(f"after the run: {_why_unrecovered(history.final_crashed)}")
    for send in history.sends:
        if send.outcome == OK:
            row(charge(send.t_done)).acked += 1
        elif send.outcome in (AMBIGUOUS, PENDING):
            row(charge(send.t_done if send.t_done >= 0 else send.t_send)).ambiguous += 1
    group = check_group(history)
    for t in group.read_times:
        row(charge(t)).group_reads += 1
    for t in group.owner_change_times:
        row(charge(t)).owner_changes += 1
    anomalies = {"lost": check_lost(history), "divergence": check_divergence(history),
                 "order": check_order(history), "phantom": check_phantom(history),
                 **group.anomalies}
    for name, found in anomalies.items():
        for anomaly in found:
            target = row(charge(anomaly.t, forward=name == "lost"))
            setattr(target, name, getattr(target, name) + 1)
    for result in history.replicas:
        target = row(FINAL_ROW if result.final else charge(result.t))
        target.replica_checks += 1
        target.replicas_identical += int(result.identical)
    order = [f.kind for f in sorted(history.faults, key=lambda f: f.t_inject)]
    names = sorted(rows, key=lambda n: (n == FINAL_ROW, n == NO_FAULT,
                                        order.index(n) if n in order else 0))
    total = Row("total")
    for name in names:
        total.add(rows[name])
    report = Report([rows[n] for n in names], total, unrecovered=unrecovered)
    report.examples = {name: [a.detail for a in sorted(found, key=lambda a: a.t)[:EXAMPLES]]
                       for name, found in anomalies.items() if found}
    report.replica_failures = [f"{'final' if r.final else 'after heal'}: partition "
                               f"{r.partition} hw {r.hw}: {r.detail}"
                               for r in history.replicas if not r.identical][:3 * EXAMPLES]
    report.info = _info(history)
    report.info["group"] = group.info
    return report


def _why_unrecovered(crashed: list[str]) -> str:
    if crashed:
        return f"exited on their own (restarted by the harness): {', '.join(crashed)}"
    return "not healthy again within the recovery timeout"


def _info(history: History) -> dict[str, Any]:
    outcomes: dict[str, int] = defaultdict(int)
    for send in history.sends:
        outcomes[send.outcome] += 1
    final = final_reads(history)
    final_values = defaultdict(list)
    for (partition, offset), value in final.items():
        final_values[value].append((partition, offset))
    by_value = {send.value: send for send in history.sends}
    recovered = sum(1 for v in final_values if v in by_value
                    and by_value[v].outcome in (AMBIGUOUS, PENDING))
    return {
        "elapsed_s": round(max(history.t_end - history.t_start, 0.0), 1),
        "sends": len(history.sends),
        "outcomes": dict(outcomes),
        "reads": len(history.reads),
        "sessions": len({r.session for r in history.reads}),
        "final_records": len(final),
        "final_hw": {str(p): hw for p, hw in sorted(history.final_hw.items())},
        "final_unreadable_partitions": sorted(set(range(history.partitions))
                                              - history.final_complete),
        # Written twice by a producer retry (no idempotence yet): expected, not an error.
        "duplicated_in_final": sum(1 for places in final_values.values() if len(places) > 1),
        "ambiguous_found_in_final": recovered,
        # Times from the start of the run; "acked_while_injected": availability.
        "faults": [asdict(f) | {
            "t_inject": round(f.t_inject - history.t_start, 1),
            "t_healed": round(f.t_healed - history.t_start, 1),
            "t_recovered": round(f.t_recovered - history.t_start, 1),
            "acked_while_injected": sum(1 for s in history.sends if s.outcome == OK
                                        and f.t_inject <= s.t_done < f.t_healed)}
            for f in history.faults],
        "reader_errors": history.reader_errors[:10],
    }
