"""The confluent-kafka workloads' part of the checks (pure, no I/O).

Their sends and live reads are in the history's ``sends`` and ``reads``: the lost,
divergence, order, phantom and duplicate checks judge them with the SDK's. What is
theirs alone is the second read-back (``KAFKA_FINAL_SESSION``): :func:`read_back_view`
presents it as *the* final read of a history, so that the very same lost and
duplicate checks run on it (:func:`checker.check` merges what they find).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from .history import (
    FINAL_SESSION,
    KAFKA_FINAL_SESSION,
    KAFKA_TAIL,
    KAFKA_TXN_PREFIX,
    KAFKA_TXN_READER,
    OK,
    Anomaly,
    History,
)


def read_back_view(history: History) -> History | None:
    """The history with the confluent-kafka read-back as its final read (and no
    other reads); None when there was none."""
    if not history.kafka_read_back:
        return None
    return replace(history, reads=[replace(r, session=FINAL_SESSION) for r in history.reads
                                   if r.session == KAFKA_FINAL_SESSION],
                   final_complete=set(history.kafka_final_complete),
                   final_hw=dict(history.kafka_final_hw))


def merge(found: list[Anomaly], through_kafka: list[Anomaly]) -> list[Anomaly]:
    """The SDK read-back's anomalies, and those only the Kafka read-back shows (one
    record lost or duplicated in both read-backs counts once)."""
    known = {(a.partition, a.offset) for a in found}
    return found + [replace(a, detail=f"in the confluent-kafka read-back: {a.detail}")
                    for a in through_kafka if (a.partition, a.offset) not in known]


def kafka_info(history: History) -> dict[str, Any]:
    writers = tuple(f"{name}:" for name in history.kafka_writers)
    sends = [s for s in history.sends if s.value.startswith(writers)] if writers else []
    sessions = {r.session for r in history.reads if r.session.startswith(KAFKA_TAIL)}
    return {
        "writers": list(history.kafka_writers),
        "sends": len(sends),
        "acked": sum(1 for s in sends if s.outcome == OK),
        "outcomes": dict(Counter(s.outcome for s in sends)),
        # Acknowledged with no offset in the broker's answer (Kafka's -1): checked by
        # value (found anywhere in the read-back), not by offset.
        "acked_without_offset": sum(1 for s in sends if s.outcome == OK and s.offset < 0),
        "live_reads": sum(1 for r in history.reads if r.session in sessions),
        "live_sessions": len(sessions),
        "final_records": sum(1 for r in history.reads if r.session == KAFKA_FINAL_SESSION),
        "final_hw": {str(p): hw for p, hw in sorted(history.kafka_final_hw.items())},
        "final_unreadable_partitions": sorted(set(range(history.partitions))
                                              - history.kafka_final_complete)
        if history.kafka_read_back else [],
        "transactions": dict(Counter(f"{t.intent}->{t.outcome}" for t in history.txns
                                     if t.txn_id.startswith(KAFKA_TXN_PREFIX))),
        "committed_reads": sum(1 for r in history.txn_reads
                               if r.session.startswith(KAFKA_TXN_READER)),
        "fatal": history.kafka_fatal[:10],
        "errors": history.kafka_errors[:10],
    }
