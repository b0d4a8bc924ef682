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
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from strand.errors import CorruptRecordError
from strand.records.batch import batch_size_at, validate_batch

from .group_checker import GROUP_CHECKS, check_group
from .history import (
    AMBIGUOUS,
    COMMITTED,
    FAILED,
    FINAL_SESSION,
    OK,
    PENDING,
    Anomaly,
    FaultEvent,
    History,
    ReplicaResult,
)
from .kafka_checker import kafka_info, merge, read_back_view
from .pipeline_checker import PIPELINE_CHECKS, check_pipeline, pipeline_info
from .txn_checker import TXN_CHECKS, check_txns, txn_info, txn_observations

NO_FAULT = "none"
FINAL_ROW = "final"
CHECKS = ("lost", "divergence", "order", "phantom", *GROUP_CHECKS, "duplicate", *TXN_CHECKS,
          *PIPELINE_CHECKS)
# Charged to the fault in progress when the record was acknowledged (or the next one).
FORWARD = ("lost", "txn_lost", "pipeline_missing")
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
        if send.offset < 0 and where.get(send.value):  # acknowledged without an offset
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
    """Over the chaos topic and the transactional workloads' topics."""
    # (topic, partition, offset) -> value -> (first time seen, observers)
    seen: dict[tuple[str, int, int], dict[str, tuple[float, set[str]]]] = defaultdict(dict)

    def observe(key: tuple[str, int, int], value: str, t: float, who: str) -> None:
        values = seen[key]
        first, observers = values.get(value, (t, set()))
        observers.add(who)
        values[value] = (min(first, t), observers)

    topic = history.topic
    for send in history.sends:
        if send.outcome == OK and send.offset >= 0:
            observe((topic, send.partition, send.offset), send.value, send.t_done, "ack")
    for read in history.reads:
        observe((topic, read.partition, read.offset), read.value, read.t, read.session)
    for key, value, t, who in txn_observations(history):
        observe(key, value, t, who)
    anomalies = []
    for (name, partition, offset), values in seen.items():
        if len(values) < 2:
            continue
        # When the offset started to diverge: the first sighting of its second value.
        t = sorted(first for first, _ in values.values())[1]
        detail = "; ".join(f"{v!r} seen by {', '.join(sorted(who)[:4])}"
                           for v, (_, who) in sorted(values.items()))
        where = f"{partition}/{offset}" if name == topic else f"{name}-{partition}/{offset}"
        anomalies.append(Anomaly("divergence", t, partition, offset,
                                 f"{where} yielded {len(values)} values: {detail}"))
    return anomalies


def check_duplicates(history: History) -> list[Anomaly]:
    """With idempotent writers, a value the final read finds at two offsets was
    written twice by a producer retry: an error (without idempotence it is expected,
    and only counted in the info line)."""
    if not history.idempotent:
        return []
    places: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for (partition, offset), value in final_reads(history).items():
        places[value].append((partition, offset))
    by_value = {send.value: send for send in history.sends}
    anomalies = []
    for value, where in places.items():
        if len(where) > 1:
            send = by_value.get(value)
            t = send.t_done if send is not None and send.t_done >= 0 else history.t_end
            partition, offset = sorted(where)[1]
            anomalies.append(Anomaly("duplicate", t, partition, offset,
                                     f"{value!r} written {len(where)} times, at "
                                     f"{sorted(where)}, by an idempotent producer"))
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
    # Exactly once: a value of an idempotent writer written twice; the transactional
    # workloads' transactions committed and their checks (txn_checker.py,
    # pipeline_checker.py).
    duplicate: int = 0
    txns_committed: int = 0
    aborted_read: int = 0
    torn: int = 0
    past_lso: int = 0
    txn_lost: int = 0
    pipeline_dup: int = 0
    pipeline_missing: int = 0
    # Of ``acked``: the confluent-kafka writers' (through the gateway's Kafka listener).
    kafka_acked: int = 0

    @property
    def replica_mismatches(self) -> int:
        return self.replica_checks - self.replicas_identical

    def add(self, other: Row) -> None:
        for f in fields(self):
            if f.name != "fault":
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


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
        return bool(t.replica_mismatches or any(getattr(t, name) for name in CHECKS))

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
    kafka_writers = tuple(f"{name}:" for name in history.kafka_writers)
    for send in history.sends:
        if send.outcome == OK:
            row(charge(send.t_done)).acked += 1
            if kafka_writers and send.value.startswith(kafka_writers):
                row(charge(send.t_done)).kafka_acked += 1
        elif send.outcome in (AMBIGUOUS, PENDING):
            row(charge(send.t_done if send.t_done >= 0 else send.t_send)).ambiguous += 1
    group = check_group(history)
    for t in group.read_times:
        row(charge(t)).group_reads += 1
    for t in group.owner_change_times:
        row(charge(t)).owner_changes += 1
    for txn in history.txns:
        if txn.outcome == COMMITTED:
            row(charge(txn.t_end)).txns_committed += 1
    anomalies = {"lost": check_lost(history), "divergence": check_divergence(history),
                 "order": check_order(history), "phantom": check_phantom(history),
                 **group.anomalies, "duplicate": check_duplicates(history),
                 **check_txns(history), **check_pipeline(history)}
    view = read_back_view(history)
    if view is not None:  # the same checks on the confluent-kafka read-back
        anomalies["lost"] = merge(anomalies["lost"], check_lost(view))
        anomalies["duplicate"] = merge(anomalies["duplicate"], check_duplicates(view))
    for name, found in anomalies.items():
        for anomaly in found:
            target = row(charge(anomaly.t, forward=name in FORWARD))
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
    report.info["transactions"] = txn_info(history)
    report.info["pipeline"] = pipeline_info(history)
    report.info["kafka"] = kafka_info(history)
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
        # Written twice by a producer retry: expected without idempotence (with it, the
        # duplicate check fails).
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
