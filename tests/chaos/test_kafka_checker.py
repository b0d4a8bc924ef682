"""The checks on the confluent-kafka workloads' history, on hand-made histories: a
clean one passes; a record missing or written twice in the confluent-kafka read-back
only, a partition it could not read, an offset two read-backs disagree on, a Kafka
tail reader going backwards, a Kafka acknowledgement without an offset whose record
is nowhere: each fails its check. The delivery reports' classification too, and the
confluent-kafka transactions and read_committed reads (the SDK's history format, with
no LSO per read) under the transaction checks."""

from __future__ import annotations

from confluent_kafka import KafkaError, Message

from .checker import check
from .history import (
    ABORTED,
    AMBIGUOUS,
    COMMITTED,
    FAILED,
    FINAL_SESSION,
    KAFKA_FINAL_SESSION,
    OK,
    PENDING,
    History,
    Read,
    Send,
    Txn,
    TxnRead,
    TxnRecord,
)
from .kafka_workload import _delivered, classify


def acked(value: str, partition: int, offset: int, t: float = 1.0) -> Send:
    return Send(value, partition, t - 0.1, OK, offset, t)


def both_finals(partition: int, offset: int, value: str) -> list[Read]:
    return [Read(FINAL_SESSION, partition, offset, value, 100.0),
            Read(KAFKA_FINAL_SESSION, partition, offset, value, 101.0)]


def kafka_history() -> History:
    """An SDK writer and a confluent-kafka writer on two partitions, a Kafka tail
    reader, and both read-backs complete."""
    h = History("t", 2, 0.0, idempotent=True, final_complete={0, 1}, final_hw={0: 2, 1: 2},
                kafka_writers=["k0"], kafka_read_back=True, kafka_final_complete={0, 1},
                kafka_final_hw={0: 2, 1: 2})
    h.sends = [acked("w0:0", 0, 0), acked("k0:0", 0, 1), acked("w0:1", 1, 0),
               acked("k0:1", 1, 1)]
    h.reads = [Read("ktail0#0", 0, 0, "w0:0", 2.0), Read("ktail0#0", 0, 1, "k0:0", 2.1),
               Read("ktail0#0", 1, 0, "w0:1", 2.0)]
    for send in h.sends:
        h.reads += both_finals(send.partition, send.offset, send.value)
    return h


def counts(h: History) -> dict[str, int]:
    total = check(h).total
    return {name: getattr(total, name) for name in
            ("lost", "divergence", "order", "phantom", "duplicate", "acked", "kafka_acked")}


def test_a_clean_kafka_history_passes() -> None:
    report = check(kafka_history())
    assert not report.failed
    assert (report.total.acked, report.total.kafka_acked) == (4, 2)
    info = report.info["kafka"]
    assert info["acked"] == 2 and info["final_records"] == 4 and info["live_reads"] == 3
    assert info["final_unreadable_partitions"] == []


def test_a_record_missing_from_the_kafka_read_back_is_lost() -> None:
    h = kafka_history()
    h.reads = [r for r in h.reads if not (r.session == KAFKA_FINAL_SESSION
                                          and r.value == "k0:1")]
    report = check(h)
    assert report.total.lost == 1
    assert report.examples["lost"][0].startswith("in the confluent-kafka read-back: 'k0:1'")


def test_a_loss_both_read_backs_see_counts_once() -> None:
    h = kafka_history()
    h.reads = [r for r in h.reads if r.value != "w0:1" or r.session.startswith("ktail")]
    assert counts(h)["lost"] == 1


def test_a_partition_the_kafka_read_back_could_not_read_loses_its_records() -> None:
    h = kafka_history()
    h.kafka_final_complete = {0}
    h.reads = [r for r in h.reads if not (r.session == KAFKA_FINAL_SESSION
                                          and r.partition == 1)]
    report = check(h)
    assert report.total.lost == 2
    assert report.info["kafka"]["final_unreadable_partitions"] == [1]


def test_a_kafka_read_back_that_never_ran_is_not_checked_but_one_that_failed_is() -> None:
    h = kafka_history()
    h.reads = [r for r in h.reads if r.session != KAFKA_FINAL_SESSION]
    h.kafka_read_back, h.kafka_final_complete, h.kafka_final_hw = False, set(), {}
    assert counts(h)["lost"] == 0
    h.kafka_read_back = True  # it ran and got nothing: every acknowledged record is lost
    assert counts(h)["lost"] == 4


def test_a_duplicate_in_the_kafka_read_back_fails() -> None:
    h = kafka_history()
    h.reads.append(Read(KAFKA_FINAL_SESSION, 1, 2, "k0:1", 101.0))
    h.kafka_final_hw = {0: 2, 1: 3}
    report = check(h)
    assert report.total.duplicate == 1
    assert "confluent-kafka read-back" in report.examples["duplicate"][0]


def test_the_two_read_backs_disagreeing_is_divergence() -> None:
    h = kafka_history()
    h.reads = [r if not (r.session == KAFKA_FINAL_SESSION and r.value == "w0:0")
               else Read(KAFKA_FINAL_SESSION, 0, 0, "k0:1", 101.0) for r in h.reads]
    found = counts(h)
    assert found["divergence"] == 1
    assert found["lost"] == 1  # w0:0 is not in the Kafka read-back at all


def test_a_kafka_tail_reader_going_backwards_fails_order() -> None:
    h = kafka_history()
    h.reads.append(Read("ktail0#0", 0, 0, "w0:0", 3.0))
    assert counts(h)["order"] == 1


def test_a_refused_kafka_send_read_back_is_a_phantom() -> None:
    h = kafka_history()
    h.sends.append(Send("k0:2", 0, 3.0, FAILED, t_done=3.1, error="KafkaError MSG_SIZE"))
    h.reads += both_finals(0, 2, "k0:2")
    h.final_hw = h.kafka_final_hw = {0: 3, 1: 2}
    assert counts(h)["phantom"] == 1


def test_an_ack_without_offset_is_checked_by_value() -> None:
    h = kafka_history()
    h.sends.append(acked("k0:2", 0, -1))  # librdkafka: offset() None
    h.reads += both_finals(0, 2, "k0:2")
    h.final_hw = h.kafka_final_hw = {0: 3, 1: 2}
    assert counts(h) | {"acked": 0, "kafka_acked": 0} == dict.fromkeys(
        ("lost", "divergence", "order", "phantom", "duplicate", "acked", "kafka_acked"), 0)
    assert check(h).info["kafka"]["acked_without_offset"] == 1
    h.reads = [r for r in h.reads if r.value != "k0:2"]
    h.final_hw = h.kafka_final_hw = {0: 2, 1: 2}
    assert counts(h)["lost"] == 1


def test_delivery_reports_become_outcomes() -> None:
    assert classify(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)) == FAILED
    assert classify(KafkaError(KafkaError._MSG_TIMED_OUT)) == AMBIGUOUS
    assert classify(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)) == AMBIGUOUS
    ok = Send("k0:0", 1, 0.0)
    _delivered(ok, None, Message(topic="t", partition=1, offset=7, value=b"k0:0"))
    assert (ok.outcome, ok.offset) == (OK, 7) and ok.t_done > 0
    unknown = Send("k0:1", 1, 0.0)
    _delivered(unknown, None, Message(topic="t", partition=1, offset=-1, value=b"k0:1"))
    assert (unknown.outcome, unknown.offset) == (OK, -1)
    timed_out = Send("k0:2", 1, 0.0)
    _delivered(timed_out, KafkaError(KafkaError._MSG_TIMED_OUT),
               Message(topic="t", partition=1, offset=-1))
    assert timed_out.outcome == AMBIGUOUS and "MSG_TIMED_OUT" in timed_out.error
    # A second report for the same send (a purge after a flush) changes nothing.
    _delivered(ok, KafkaError(KafkaError._PURGE_QUEUE), Message())
    assert ok.outcome == OK
    assert Send("k0:3", 0, 0.0).outcome == PENDING  # never reported: ambiguous


def kafka_txn(number: int, outcome: str, offset: int, intent: str = "commit") -> Txn:
    records = [TxnRecord(topic, partition, f"chaos-ktx-0.0.{number}:{topic}-{partition}:0",
                         offset) for topic, partition in (("chaos-txa", 0), ("chaos-txb", 0))]
    return Txn("chaos-ktx-0", 0, number, intent, records, float(number), outcome, number + 0.5)


def ktxn_reads(t: Txn, session: str = "ktxn#0") -> list[TxnRead]:
    """What librdkafka's read_committed consumer hands out: no LSO per record (-1)."""
    return [TxnRead(session, r.topic, r.partition, r.offset, r.value, 9.0) for r in t.records]


def kafka_txn_history() -> History:
    """A confluent-kafka transaction committed at offsets 0, one aborted at 1 (its
    markers at 2), one committed at 3; read live by the Kafka reader and read back."""
    h = History("t", 1, 0.0, final_complete={0}, final_hw={0: 0})
    first, aborted, last = (kafka_txn(0, COMMITTED, 0),
                            kafka_txn(1, ABORTED, 1, intent="abort"), kafka_txn(2, COMMITTED, 3))
    h.txns = [first, aborted, last]
    h.txn_reads = [*ktxn_reads(first), *ktxn_reads(last), *ktxn_reads(first, FINAL_SESSION),
                   *ktxn_reads(last, FINAL_SESSION)]
    h.txn_final_complete = {("chaos-txa", 0), ("chaos-txb", 0)}
    return h


def test_the_kafka_transactions_are_checked_like_the_sdks() -> None:
    report = check(kafka_txn_history())
    assert not report.failed and report.total.txns_committed == 2
    assert report.info["kafka"]["transactions"] == {"commit->committed": 2,
                                                    "abort->aborted": 1}
    assert report.info["kafka"]["committed_reads"] == 4
    aborted_read = kafka_txn_history()
    aborted_read.txn_reads += ktxn_reads(aborted_read.txns[1], "ktxn#1")
    assert check(aborted_read).total.aborted_read == 2
    torn = kafka_txn_history()  # the reader saw half of the last transaction
    torn.txn_reads = [r for r in torn.txn_reads
                      if not (r.session == FINAL_SESSION and r.topic == "chaos-txb"
                              and r.offset == 3)]
    assert check(torn).total.torn == 1
    lost = kafka_txn_history()
    lost.txn_reads = [r for r in lost.txn_reads
                      if not (r.session == FINAL_SESSION and r.offset == 0)]
    assert check(lost).total.txn_lost == 2
