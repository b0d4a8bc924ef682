"""The exactly-once checks on hand-made histories: a clean one passes, and each
check fires on the anomaly it exists for — a duplicate of an idempotent writer, an
aborted read, a torn transaction (in the read-back and live), a read past the LSO,
two values at one offset of a transactional topic, a committed transaction lost, and
a pipeline input with two outputs or none."""

from __future__ import annotations

from .checker import check, check_divergence, check_duplicates
from .history import (
    ABORTED,
    AMBIGUOUS,
    COMMITTED,
    FENCED,
    FINAL_SESSION,
    OK,
    History,
    Read,
    Send,
    Txn,
    TxnRead,
    TxnRecord,
)
from .pipeline_checker import check_pipeline, output_value
from .txn_checker import check_aborted_reads, check_past_lso, check_torn, check_txn_lost

A, B = "chaos-txa", "chaos-txb"
OUT = "chaos-out"


def txn(number: int, outcome: str, places: list[tuple[str, int, int]],
        intent: str = "commit", t: float = 1.0) -> Txn:
    records = [TxnRecord(topic, partition, f"tx.0.{number}:{topic}-{partition}", offset)
               for topic, partition, offset in places]
    return Txn("tx", 0, number, intent, records, t, outcome, t + 0.5)


def reads(session: str, t: Txn, lso: int = 1_000, time: float = 2.0) -> list[TxnRead]:
    return [TxnRead(session, r.topic, r.partition, r.offset, r.value, time, lso)
            for r in t.records]


def txn_history() -> History:
    """Transaction 0 committed over a-0, a-1 and b-0 (offsets 0), transaction 1 aborted
    at offsets 1 (its ABORT markers at 2), transaction 2 committed at 3: read live
    and read back read_committed, every partition complete."""
    h = History("chaos", 1, 0.0, final_complete={0}, final_hw={0: 0})
    committed = txn(0, COMMITTED, [(A, 0, 0), (A, 1, 0), (B, 0, 0)])
    aborted = txn(1, ABORTED, [(A, 0, 1), (A, 1, 1), (B, 0, 1)], intent="abort", t=3.0)
    later = txn(2, COMMITTED, [(A, 0, 3), (A, 1, 3), (B, 0, 3)], t=5.0)
    h.txns = [committed, aborted, later]
    h.txn_reads = [*reads("committed#0", committed), *reads("committed#0", later, time=6.0),
                   *reads(FINAL_SESSION, committed, time=9.0),
                   *reads(FINAL_SESSION, later, time=9.0)]
    h.txn_final_complete = {(A, 0), (A, 1), (B, 0)}
    return h


def test_a_clean_transactional_history_passes() -> None:
    report = check(txn_history())
    assert not report.failed
    assert report.total.txns_committed == 2
    assert report.info["transactions"]["outcomes"] == {"commit->committed": 2,
                                                       "abort->aborted": 1}


# ---------------------------------------------------------------------- idempotence

def test_a_duplicate_of_an_idempotent_writer_fails() -> None:
    h = History("chaos", 1, 0.0, final_complete={0}, final_hw={0: 2}, idempotent=True)
    h.sends = [Send("w0:0", 0, 0.5, OK, 0, 1.0)]
    h.reads = [Read(FINAL_SESSION, 0, 0, "w0:0", 9.0), Read(FINAL_SESSION, 0, 1, "w0:0", 9.0)]
    assert [(a.partition, a.offset) for a in check_duplicates(h)] == [(0, 1)]
    assert check(h).total.duplicate == 1 and check(h).failed
    h.idempotent = False  # plain writers: a retry may write twice, only counted
    assert check_duplicates(h) == [] and not check(h).failed
    assert check(h).info["duplicated_in_final"] == 1


# ---------------------------------------------------------------------- transactions

def test_an_aborted_read() -> None:
    h = txn_history()
    h.txn_reads.append(reads("committed#0", h.txns[1])[0])
    assert [a.offset for a in check_aborted_reads(h)] == [1]
    assert check(h).total.aborted_read == 1 and check(h).failed


def test_a_fenced_transaction_must_stay_invisible() -> None:
    h = txn_history()
    h.txns[1].intent, h.txns[1].outcome = "fence", FENCED
    h.txn_reads.append(reads(FINAL_SESSION, h.txns[1])[2])
    assert len(check_aborted_reads(h)) == 1


def test_a_transaction_torn_in_the_read_back() -> None:
    h = txn_history()
    h.txn_reads = [r for r in h.txn_reads
                   if not (r.session == FINAL_SESSION and r.topic == B and r.offset == 3)]
    torn = check_torn(h)
    assert len(torn) == 1 and "2 of the 3 records" in torn[0].detail
    assert check(h).total.torn == 1
    # The committed transaction's missing record is lost as well.
    assert [a.offset for a in check_txn_lost(h)] == [3]


def test_an_ambiguous_transaction_may_be_all_or_nothing_but_not_part() -> None:
    h = txn_history()
    h.txns[2].outcome = AMBIGUOUS
    h.txn_reads = [r for r in h.txn_reads if r.offset != 3]  # none of it: fine
    assert check_torn(h) == [] and check_txn_lost(h) == []
    h.txn_reads += reads(FINAL_SESSION, h.txns[2])[:1]  # a part of it: torn
    assert len(check_torn(h)) == 1


def test_a_live_reader_that_reads_across_a_record_without_seeing_it() -> None:
    h = txn_history()
    # The session saw a-0 and a-1 of transaction 2 but read b-0 from 0 to 4 without
    # its record at offset 3.
    h.txn_reads = [r for r in h.txn_reads if not (
        r.session == "committed#0" and r.topic == B and r.offset == 3)]
    h.txn_reads.append(TxnRead("committed#0", B, 0, 4, "other", 7.0, 1_000))
    torn = check_torn(h)
    assert len(torn) == 1 and "without its record" in torn[0].detail
    # A session that has not reached that offset yet is not torn.
    h.txn_reads = [r for r in h.txn_reads if r.value != "other"]
    assert check_torn(h) == []


def test_a_read_past_the_lso() -> None:
    h = txn_history()
    h.txn_reads.append(TxnRead("committed#1", A, 0, 3, h.txns[2].records[0].value, 4.0, 3))
    assert [a.offset for a in check_past_lso(h)] == [3]
    assert check(h).total.past_lso == 1 and check(h).failed
    h.txn_reads[-1] = TxnRead("committed#1", A, 0, 3, h.txns[2].records[0].value, 4.0, 4)
    assert check_past_lso(h) == []


def test_two_values_at_one_offset_of_a_transactional_topic() -> None:
    h = txn_history()
    h.txn_reads.append(TxnRead("committed#1", A, 0, 0, "tx.0.9:else", 4.0, 1_000))
    found = check_divergence(h)
    assert len(found) == 1 and "chaos-txa-0/0" in found[0].detail
    assert check(h).total.divergence == 1


def test_a_committed_transaction_lost() -> None:
    h = txn_history()
    h.txn_reads = [r for r in h.txn_reads if not (r.session == FINAL_SESSION and r.offset == 0)]
    assert len(check_txn_lost(h)) == 3
    assert check(h).total.txn_lost == 3 and check(h).failed
    h.txn_final_complete.discard((A, 0))
    assert "could not be read back" in check_txn_lost(h)[0].detail


# -------------------------------------------------------------------------- pipeline

def pipeline_history() -> History:
    """Inputs in:0 and in:1 (acknowledged) and in:2 (ambiguous), each transformed
    once by a committed pipeline transaction."""
    h = History("chaos", 1, 0.0, final_complete={0}, final_hw={0: 0}, pipeline_output=OUT)
    h.pipeline_inputs = [Send("in:0", 0, 0.5, OK, 0, 1.0), Send("in:1", 0, 0.5, OK, 1, 1.0),
                         Send("in:2", 0, 0.6, AMBIGUOUS, -1, 9.0)]
    t = Txn("chaos-pipe-0", 0, 0, "commit",
            [TxnRecord(OUT, 0, output_value(f"in:{i}", "chaos-pipe-0.0.0"), i) for i in range(3)],
            2.0, COMMITTED, 2.5)
    h.txns = [t]
    h.txn_reads = reads(FINAL_SESSION, t)
    h.txn_final_complete = {(OUT, 0)}
    return h


def test_a_clean_pipeline_passes() -> None:
    assert not check(pipeline_history()).failed


def test_a_pipeline_input_with_two_outputs() -> None:
    h = pipeline_history()
    again = Txn("chaos-pipe-1", 0, 0, "commit",
                [TxnRecord(OUT, 0, output_value("in:1", "chaos-pipe-1.0.0"), 3)],
                3.0, COMMITTED, 3.5)
    h.txns.append(again)
    h.txn_reads += reads(FINAL_SESSION, again)
    found = check_pipeline(h)
    assert len(found["pipeline_dup"]) == 1 and "in:1" in found["pipeline_dup"][0].detail
    assert check(h).total.pipeline_dup == 1 and check(h).failed


def test_a_pipeline_input_without_output() -> None:
    h = pipeline_history()
    h.txns[0].outcome = ABORTED  # as if its transaction had been aborted, never redone
    h.txn_reads = [r for r in h.txn_reads if not r.value.startswith("in:0")]
    found = check_pipeline(h)
    assert [a.detail.split()[1] for a in found["pipeline_missing"]] == ["'in:0'"]
    # An ambiguous input may have no output.
    h.txn_reads = [r for r in h.txn_reads if not r.value.startswith("in:2")]
    assert len(check_pipeline(h)["pipeline_missing"]) == 1
    assert check(h).total.pipeline_missing == 1 and check(h).failed
