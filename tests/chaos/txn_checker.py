"""The checks of the transactional workloads: pure functions over a :class:`History`.

Every transaction (``txn_workload.py``, and the pipeline's in ``pipeline_workload.py``)
is recorded with its intended content and how it ended; the read_committed readers
(``txn_reader.py``) record what they saw, with the last stable offset (LSO) of the
fetch answer that carried each record. The properties (KIP-98's guarantees):

- **aborted read**: no reader sees a record of a transaction that was aborted, or
  whose producer was fenced mid-transaction (the new instance aborts it).
- **torn**: a reader sees all of a transaction or none of it. In the final read-back:
  some but not all of its records. Live: a session that saw one of its records read a
  partition of it across the offset of another record without seeing that one.
- **past LSO**: no record at or above the LSO the same fetch answer reported.
- **txn lost**: every record of a committed transaction is in the final read-back.
- **divergence** (the chaos topic's check, shared): a (topic, partition, offset)
  never yields two values — to any reader, the final read-back, or a producer's
  acknowledgement.

A transaction whose commit or abort ended ambiguously (a timeout, a failure after
EndTxn may have been written) may be visible or not, but never in part.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from .history import (
    ABORTED,
    COMMITTED,
    FENCED,
    FINAL_SESSION,
    Anomaly,
    History,
    Txn,
    TxnRead,
    TxnRecord,
)

TXN_CHECKS = ("aborted_read", "torn", "past_lso", "txn_lost")

Place = tuple[str, int, int]  # (topic, partition, offset)


def txn_of_value(history: History) -> dict[str, tuple[Txn, TxnRecord]]:
    return {record.value: (txn, record) for txn in history.txns for record in txn.records}


def final_txn_reads(history: History) -> dict[Place, str]:
    return {(r.topic, r.partition, r.offset): r.value for r in history.txn_reads
            if r.session == FINAL_SESSION}


def _label(txn: Txn) -> str:
    return f"{txn.txn_id}#{txn.instance}/{txn.number} ({txn.intent}, {txn.outcome})"


def _when(txn: Txn) -> float:
    return txn.t_end if txn.t_end >= 0 else txn.t_begin


def check_aborted_reads(history: History) -> list[Anomaly]:
    owners = txn_of_value(history)
    anomalies = []
    for read in history.txn_reads:
        txn = owners[read.value][0] if read.value in owners else None
        if txn is not None and txn.outcome in (ABORTED, FENCED):
            anomalies.append(Anomaly(
                "aborted_read", read.t, read.partition, read.offset,
                f"{read.session} read {read.value!r} at {read.topic}-{read.partition}/"
                f"{read.offset}, a record of {_label(txn)}"))
    return anomalies


def check_past_lso(history: History) -> list[Anomaly]:
    return [Anomaly("past_lso", read.t, read.partition, read.offset,
                    f"{read.session} was handed {read.value!r} at {read.topic}-"
                    f"{read.partition}/{read.offset} by a fetch answer whose LSO was "
                    f"{read.lso}")
            for read in history.txn_reads if 0 <= read.lso <= read.offset]


def _places(history: History) -> dict[str, Place]:
    """Where each transactional value is: its acknowledged offset, else where the
    final read-back found it."""
    found = {value: place for place, value in final_txn_reads(history).items()}
    places = {}
    for txn in history.txns:
        for record in txn.records:
            if record.offset >= 0:
                places[record.value] = (record.topic, record.partition, record.offset)
            elif record.value in found:
                places[record.value] = found[record.value]
    return places


def _sessions(history: History) -> Iterator[tuple[str, list[TxnRead]]]:
    by_session: dict[str, list[TxnRead]] = defaultdict(list)
    for read in history.txn_reads:
        by_session[read.session].append(read)
    yield from by_session.items()


def check_torn(history: History) -> list[Anomaly]:
    owners = txn_of_value(history)
    places = _places(history)
    anomalies = []
    final_values = set(final_txn_reads(history).values())
    for txn in history.txns:
        complete = all((r.topic, r.partition) in history.txn_final_complete
                       for r in txn.records)
        seen = [r for r in txn.records if r.value in final_values]
        if complete and 0 < len(seen) < len(txn.records):
            missing = [f"{r.topic}-{r.partition}" for r in txn.records
                       if r.value not in final_values]
            anomalies.append(Anomaly(
                "torn", _when(txn), txn.records[0].partition, -1,
                f"the final read-back has {len(seen)} of the {len(txn.records)} records of "
                f"{_label(txn)}: none on {missing}"))
    for session, reads in _sessions(history):
        if session == FINAL_SESSION:
            continue
        values = {r.value for r in reads}
        span: dict[tuple[str, int], tuple[int, int]] = {}
        for r in reads:
            low, high = span.get((r.topic, r.partition), (r.offset, r.offset))
            span[(r.topic, r.partition)] = (min(low, r.offset), max(high, r.offset))
        reported: set[int] = set()
        for read in reads:
            if read.value not in owners or id(owners[read.value][0]) in reported:
                continue
            txn = owners[read.value][0]
            for record in txn.records:
                place = places.get(record.value)
                if record.value in values or place is None:
                    continue
                low, high = span.get(place[:2], (0, -1))
                if low < place[2] < high:
                    reported.add(id(txn))
                    anomalies.append(Anomaly(
                        "torn", read.t, place[1], place[2],
                        f"{session} saw {read.value!r} of {_label(txn)} and read "
                        f"{place[0]}-{place[1]} from {low} to {high} without its record "
                        f"{record.value!r} at offset {place[2]}"))
                    break
    return anomalies


def check_txn_lost(history: History) -> list[Anomaly]:
    final = final_txn_reads(history)
    where = {value: place for place, value in final.items()}
    anomalies = []
    for txn in history.txns:
        if txn.outcome != COMMITTED:
            continue
        for record in txn.records:
            if record.value in where:
                continue
            tp = (record.topic, record.partition)
            why = ("its partition could not be read back" if tp not in history.txn_final_complete
                   else "missing from the final read-back")
            anomalies.append(Anomaly(
                "txn_lost", _when(txn), record.partition, record.offset,
                f"{record.value!r} of {_label(txn)} at {record.topic}-{record.partition}: "
                f"{why}"))
    return anomalies


def txn_observations(history: History) -> Iterator[tuple[Place, str, float, str]]:
    """What the divergence check compares on the transactional topics: each
    acknowledged record's offset, and each read."""
    for txn in history.txns:
        for record in txn.records:
            if record.offset >= 0:
                yield ((record.topic, record.partition, record.offset), record.value,
                       _when(txn), "ack")
    for read in history.txn_reads:
        yield (read.topic, read.partition, read.offset), read.value, read.t, read.session


def check_txns(history: History) -> dict[str, list[Anomaly]]:
    return {"aborted_read": check_aborted_reads(history), "torn": check_torn(history),
            "past_lso": check_past_lso(history), "txn_lost": check_txn_lost(history)}


def txn_info(history: History) -> dict[str, object]:
    outcomes: dict[str, int] = defaultdict(int)
    for txn in history.txns:
        outcomes[f"{txn.intent}->{txn.outcome}"] += 1
    final = final_txn_reads(history)
    return {"transactions": len(history.txns), "outcomes": dict(outcomes),
            "reads": len(history.txn_reads),
            "with_lso": sum(1 for r in history.txn_reads if r.lso >= 0),
            "final_records": len(final), "errors": history.txn_errors[:10]}
