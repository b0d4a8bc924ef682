"""The chaos checker on hand-made histories: a clean one passes, and each check
fails on the anomaly it exists for (so a green chaos run means something) — the
consumer group's re-read and skipped checks too, with their legitimate cases."""

from __future__ import annotations

import json

import pytest

from strand.records import BatchBuilder

from .checker import (
    NO_FAULT,
    check,
    check_divergence,
    check_lost,
    check_order,
    check_phantom,
    compare_replicas,
    log_prefix,
)
from .group_checker import check_group
from .history import (
    AMBIGUOUS,
    CLOSED,
    CRASHED,
    FAILED,
    FINAL_SESSION,
    OK,
    PENDING,
    REVOKED,
    Commit,
    FaultEvent,
    History,
    Ownership,
    Read,
    Send,
)


def acked(value: str, partition: int, offset: int, t: float = 1.0) -> Send:
    return Send(value, partition, t - 0.1, OK, offset, t)


def final(partition: int, offset: int, value: str, t: float = 100.0) -> Read:
    return Read(FINAL_SESSION, partition, offset, value, t)


def clean_history() -> History:
    """Two partitions, three acknowledged records, read live and read back."""
    h = History("t", 2, 0.0, final_complete={0, 1}, final_hw={0: 2, 1: 1})
    h.sends = [acked("w0:0", 0, 0), acked("w0:1", 1, 0), acked("w0:2", 0, 1),
               Send("w0:3", 1, 5.0, AMBIGUOUS, t_done=9.0, error="RequestTimedOutError")]
    h.reads = [Read("tail0#0", 0, 0, "w0:0", 2.0), Read("tail0#0", 1, 0, "w0:1", 2.0),
               Read("tail0#0", 0, 1, "w0:2", 2.1),
               final(0, 0, "w0:0"), final(0, 1, "w0:2"), final(1, 0, "w0:1")]
    return h


def test_a_clean_history_passes() -> None:
    report = check(clean_history())
    assert not report.failed and not report.unavailable
    total = report.total
    assert (total.acked, total.lost, total.divergence, total.order, total.phantom,
            total.ambiguous) == (3, 0, 0, 0, 0, 1)
    json.dumps(report.to_json())  # the --json output is plain JSON


# -------------------------------------------------------------------------------- lost

def test_lost_when_an_acknowledged_record_is_not_read_back() -> None:
    h = clean_history()
    h.reads = [r for r in h.reads if r.value != "w0:2" or r.session != FINAL_SESSION]
    lost = check_lost(h)
    assert [(a.partition, a.offset) for a in lost] == [(0, 1)]
    assert check(h).total.lost == 1 and check(h).failed


def test_lost_when_read_back_at_another_offset() -> None:
    h = clean_history()
    h.reads = [r if r.value != "w0:2" or r.session != FINAL_SESSION else final(0, 7, "w0:2")
               for r in h.reads]
    [anomaly] = check_lost(h)
    assert "found at [(0, 7)]" in anomaly.detail


def test_lost_when_the_partition_could_not_be_read_back() -> None:
    h = clean_history()
    h.final_complete = {1}
    h.reads = [r for r in h.reads if not (r.session == FINAL_SESSION and r.partition == 0)]
    assert len(check_lost(h)) == 2


def test_unacknowledged_records_are_never_lost() -> None:
    h = clean_history()
    h.sends.append(Send("w0:9", 0, 3.0, FAILED, t_done=3.1, error="InvalidRecordError"))
    h.sends.append(Send("w0:10", 0, 3.0, PENDING))
    assert check_lost(h) == []


# -------------------------------------------------------------------------- divergence

def test_divergence_between_two_readers() -> None:
    h = clean_history()
    h.sends.append(Send("w1:0", 0, 1.0, AMBIGUOUS, t_done=2.0))
    h.reads.append(Read("rewind#3", 0, 1, "w1:0", 50.0))  # offset 1 was "w0:2" before
    [anomaly] = check_divergence(h)
    assert (anomaly.partition, anomaly.offset, anomaly.t) == (0, 1, 50.0)
    assert "rewind#3" in anomaly.detail and "w1:0" in anomaly.detail


def test_divergence_between_the_acknowledgement_and_a_reader() -> None:
    h = clean_history()
    h.sends.append(acked("w1:0", 1, 5, t=3.0))
    h.sends.append(Send("w1:1", 1, 3.0, AMBIGUOUS, t_done=4.0))
    h.reads.append(Read("tail1#0", 1, 5, "w1:1", 6.0))
    [anomaly] = check_divergence(h)
    assert "ack" in anomaly.detail and anomaly.t == 6.0


def test_the_same_value_at_two_offsets_is_a_duplicate_not_a_divergence() -> None:
    h = clean_history()
    h.reads.append(final(0, 2, "w0:2"))  # a retry wrote it twice
    assert check_divergence(h) == []
    assert check(h).info["duplicated_in_final"] == 1


# ------------------------------------------------------------------------------- order

@pytest.mark.parametrize("offsets, violations", [([0, 1, 2], 0), ([0, 1, 1], 1),
                                                  ([0, 2, 1, 3], 1), ([3, 0, 1, 2], 1)])
def test_order_within_a_session(offsets: list[int], violations: int) -> None:
    h = clean_history()
    h.sends += [Send(f"x:{o}", 0, 1.0, AMBIGUOUS) for o in offsets]
    h.reads += [Read("tail9#0", 0, o, f"x:{o}", 10.0 + i) for i, o in enumerate(offsets)]
    assert len(check_order(h)) == violations


def test_a_new_session_may_start_over() -> None:
    h = clean_history()
    h.reads += [Read("rewind#1", 0, 0, "w0:0", 5.0), Read("rewind#2", 0, 0, "w0:0", 6.0)]
    assert check_order(h) == []


# ----------------------------------------------------------------------------- phantom

def test_phantom_when_a_value_was_never_sent() -> None:
    h = clean_history()
    h.reads.append(Read("tail0#0", 1, 1, "nobody:7", 3.0))
    h.reads.append(final(1, 1, "nobody:7"))  # counted once per value
    [anomaly] = check_phantom(h)
    assert "never sent" in anomaly.detail
    assert check(h).total.phantom == 1


def test_phantom_when_a_refused_value_is_read() -> None:
    h = clean_history()
    h.sends.append(Send("w0:5", 1, 3.0, FAILED, t_done=3.1, error="InvalidRecordError: no"))
    h.reads.append(final(1, 1, "w0:5"))
    [anomaly] = check_phantom(h)
    assert "refused" in anomaly.detail


def test_ambiguous_values_read_back_are_not_phantoms() -> None:
    h = clean_history()
    h.sends.append(Send("w0:6", 1, 3.0, PENDING))
    h.reads += [final(1, 1, "w0:3"), final(1, 2, "w0:6")]
    report = check(h)
    assert check_phantom(h) == [] and not report.failed
    assert report.info["ambiguous_found_in_final"] == 2
    assert report.total.ambiguous == 2


# ---------------------------------------------------------------------------- replicas

def batch(base_offset: int, values: list[bytes], epoch: int = 0) -> bytes:
    builder = BatchBuilder(base_offset=base_offset, partition_leader_epoch=epoch)
    for value in values:
        builder.append(value, timestamp=1_700_000_000_000)
    return bytes(builder.build())


LOG = batch(0, [b"a", b"b"]) + batch(2, [b"c"]) + batch(3, [b"d", b"e"], epoch=1)


def test_identical_replicas() -> None:
    result = compare_replicas(0, 5, 1, {1: LOG, 2: LOG, 3: LOG})
    assert result.identical, result.detail


def test_bytes_above_the_high_watermark_and_a_torn_tail_do_not_count() -> None:
    tail = batch(5, [b"f"])
    result = compare_replicas(0, 3, 1, {1: LOG + tail[:20], 2: LOG[:len(LOG) - 5],
                                        3: batch(0, [b"a", b"b"]) + batch(2, [b"c"])})
    assert result.identical, result.detail
    assert log_prefix(LOG + tail[:20], 99).end == 5


def test_a_replica_that_differs_below_the_high_watermark() -> None:
    # Same records, another leader epoch stamped on the last batch: not a copy.
    other = batch(0, [b"a", b"b"]) + batch(2, [b"c"]) + batch(3, [b"d", b"e"], epoch=2)
    result = compare_replicas(0, 5, 1, {1: LOG, 2: other, 3: LOG})
    assert not result.identical
    assert "node 2: differs from the leader at offset 3" in result.detail


def test_a_replica_with_other_records_at_the_same_offsets() -> None:
    other = batch(0, [b"a", b"b"]) + batch(2, [b"X"]) + batch(3, [b"d", b"e"], epoch=1)
    assert "offset 2" in compare_replicas(0, 5, 1, {1: LOG, 2: LOG, 3: other}).detail


def test_a_short_or_missing_replica() -> None:
    result = compare_replicas(0, 5, 1, {1: LOG, 2: batch(0, [b"a", b"b"]), 3: None})
    assert not result.identical
    assert "node 2: short: ends at 2 < hw 5" in result.detail
    assert "node 3: missing" in result.detail


def test_a_corrupt_replica() -> None:
    corrupt = bytearray(LOG)
    corrupt[-1] ^= 0xFF  # inside the last batch: its CRC no longer matches
    result = compare_replicas(0, 5, 1, {1: LOG, 2: LOG, 3: bytes(corrupt)})
    assert not result.identical and "corrupt" in result.detail


def test_replica_mismatches_fail_the_run() -> None:
    h = clean_history()
    h.replicas.append(compare_replicas(0, 5, 1, {1: LOG, 2: b"", 3: LOG}, t=50.0))
    report = check(h)
    assert report.failed and report.total.replica_mismatches == 1


# ------------------------------------------------------------------ charging to faults

def test_anomalies_are_charged_to_faults() -> None:
    h = clean_history()  # records acknowledged at t=1
    h.faults = [FaultEvent("kill-leader", "storage-1", 10.0, 14.0, 15.0),
                FaultEvent("partition-node", "storage-2", 20.0, 26.0, 27.0)]
    h.sends.append(acked("w0:7", 1, 1, t=30.0))  # after the last recovery, never read
    h.reads = [r for r in h.reads if r.value != "w0:2" or r.session != FINAL_SESSION]
    h.sends.append(Send("w1:0", 0, 21.0, AMBIGUOUS, t_done=24.0))
    h.reads.append(Read("tail0#1", 0, 0, "w1:0", 22.0))  # divergence during the cut
    report = check(h)
    rows = {r.fault: r for r in report.rows}
    assert rows["kill-leader"].lost == 1  # acked at t=1, the next fault could destroy it
    assert rows[NO_FAULT].lost == 1  # acked after the last fault
    assert rows["partition-node"].divergence == 1
    assert rows["partition-node"].ambiguous == 1  # w1:0, done during the cut
    assert rows[NO_FAULT].ambiguous == 1  # w0:3, done at t=9 before any fault
    assert rows[NO_FAULT].acked == 3 and rows["partition-node"].acked == 1
    assert report.total.injections == 2 and report.total.recovered == 2


def test_a_fault_without_recovery_makes_the_run_unavailable() -> None:
    h = clean_history()
    h.faults = [FaultEvent("restart-etcd", "etcd", 10.0, 12.0, 42.0, recovered=False,
                           crashed=["controller-0 (exit 1)"])]
    report = check(h)
    assert report.unavailable and not report.failed
    assert "controller-0 (exit 1)" in report.unrecovered[0]
    assert report.rows[0].recovered == 0


# ----------------------------------------------------------------------- consumer group

def group_history(final_offsets: range | list[int] = range(6)) -> History:
    """Partition 0 holds offsets 0..5. Member a owns it from t=10, reads 0..2 and
    commits 3 (acknowledged at t=12); a rebalance at t=20 gives it to member b."""
    h = History("t", 1, 0.0, final_complete={0}, final_hw={0: max(final_offsets) + 1})
    h.sends = [acked(f"w0:{o}", 0, o, t=5.0) for o in final_offsets]
    h.reads = [final(0, o, f"w0:{o}") for o in final_offsets]
    h.ownerships = [Ownership("a", "a/a1", 0, 1, 9.0, 10.0, None, t_end=20.0, end=REVOKED),
                    Ownership("b", "b/a1", 0, 2, 20.0, 21.0, 3)]
    h.members = {"a": CLOSED, "b": CLOSED}
    h.commits = [Commit("a", 0, 3, 1, 11.5, 12.0, OK)]
    group_reads(h, "a/a1", [0, 1, 2], t=11.0)
    return h


def group_reads(h: History, session: str, offsets: list[int], t: float) -> None:
    h.reads += [Read(session, 0, o, f"w0:{o}", t + i * 0.01) for i, o in enumerate(offsets)]


def test_a_clean_group_history_passes() -> None:
    h = group_history()
    group_reads(h, "b/a1", [3, 4, 5], t=22.0)
    report = check(h)
    assert not report.failed, report.examples
    assert (report.total.group_reads, report.total.owner_changes) == (6, 1)
    assert (report.total.reread, report.total.skipped) == (0, 0)
    assert report.info["group"]["read_again"] == 0
    assert report.info["group"]["final_records_read_by_group"] == 6
    assert {"group_reads", "owner_changes", "reread", "skipped"} <= set(
        report.to_json()["rows"][-1])


def test_reread_below_an_acknowledged_commit() -> None:
    h = group_history()
    group_reads(h, "b/a1", [1, 2, 3], t=22.0)  # committed 3 was acknowledged at t=12
    [anomaly] = check_group(h).anomalies["reread"]
    assert (anomaly.partition, anomaly.offset, anomaly.t) == (0, 1, 21.0)
    assert "2 offsets 1..2" in anomaly.detail and "last acknowledged commit 3" in anomaly.detail
    assert check(h).total.reread == 1 and check(h).failed


def test_skipped_between_the_committed_offset_and_the_first_read() -> None:
    h = group_history()
    group_reads(h, "b/a1", [5], t=22.0)
    [anomaly] = check_group(h).anomalies["skipped"]
    assert anomaly.offset == 3 and "2 offsets 3..4" in anomaly.detail
    assert check(h).total.skipped == 1 and check(h).failed


def test_skipped_within_an_ownership() -> None:
    h = group_history()
    group_reads(h, "b/a1", [3, 5], t=22.0)
    [anomaly] = check_group(h).anomalies["skipped"]
    assert (anomaly.offset, anomaly.t) == (4, 22.01) and "offset 4" in anomaly.detail


def test_offsets_missing_from_the_final_log_may_be_jumped() -> None:
    h = group_history(final_offsets=[0, 1, 2, 4, 5, 7])  # 3 and 6: e.g. markers
    group_reads(h, "b/a1", [4, 5, 7], t=22.0)  # committed 3: the next record is 4
    assert not check(h).failed


def test_an_unanswered_commit_may_or_may_not_have_taken_effect() -> None:
    for start in (3, 5):
        h = group_history()
        group_reads(h, "a/a1", [3, 4], t=13.0)
        h.commits.append(Commit("a", 0, 5, 1, 14.0, 19.0, AMBIGUOUS, "RequestTimedOutError"))
        group_reads(h, "b/a1", list(range(start, 6)), t=22.0)
        assert not check(h).failed, (start, check(h).examples)
        assert check(h).info["group"]["read_again"] == 5 - start
    h = group_history()  # neither value: 4 is above the lower one, so 3 was skipped
    h.commits.append(Commit("a", 0, 5, 1, 14.0, 19.0, AMBIGUOUS, "RequestTimedOutError"))
    group_reads(h, "b/a1", [4, 5], t=22.0)
    assert [a.offset for a in check_group(h).anomalies["skipped"]] == [3]


def test_an_acknowledged_commit_after_an_unanswered_one_settles_it() -> None:
    h = group_history()
    h.commits += [Commit("a", 0, 5, 1, 13.0, 14.0, AMBIGUOUS, "DEADLINE_EXCEEDED"),
                  Commit("a", 0, 4, 1, 15.0, 16.0, OK)]
    group_reads(h, "b/a1", [5], t=22.0)  # 5 was certainly overwritten by 4
    [anomaly] = check_group(h).anomalies["skipped"]
    assert anomaly.offset == 4


def test_a_crashed_members_uncommitted_records_may_be_read_again() -> None:
    h = group_history()
    h.ownerships[0].end = CRASHED
    group_reads(h, "a/a1", [3, 4], t=13.0)  # processed; its commit never answered
    h.commits.append(Commit("a", 0, 5, 1, 13.5, 20.0, AMBIGUOUS, "no answer: the member crashed"))
    group_reads(h, "b/a1", [3, 4, 5], t=22.0)
    report = check(h)
    assert not report.failed and report.info["group"]["read_again"] == 2


def test_a_commit_answered_while_the_new_owner_fetched_offsets() -> None:
    h = group_history()
    h.commits.append(Commit("zombie", 0, 5, 1, 19.0, 20.5, OK))  # t_poll 20, assigned 21
    for start, failed in ((3, False), (5, False), (1, True)):
        h2 = group_history()
        h2.commits = list(h.commits)
        group_reads(h2, "b/a1", list(range(start, 6)), t=22.0)
        assert check(h2).failed == failed, start


def test_nothing_committed_starts_at_the_log_start() -> None:
    h = group_history()
    h.commits = []
    group_reads(h, "b/a1", [0, 1], t=22.0)
    assert not check(h).failed
    h = group_history()
    h.commits = []
    group_reads(h, "b/a1", [2], t=22.0)
    assert [a.offset for a in check_group(h).anomalies["skipped"]] == [0]


def test_a_member_given_back_a_partition_starts_anew() -> None:
    h = group_history()
    h.commits = []  # nothing committed: the log start, not where the member had got to
    h.ownerships[1] = Ownership("a", "a/a2", 0, 2, 20.0, 21.0, None)
    group_reads(h, "a/a2", [3, 4], t=22.0)
    report = check(h)
    assert [a.offset for a in check_group(h).anomalies["skipped"]] == [0]
    assert report.failed and report.total.owner_changes == 0
    h.reads = [r for r in h.reads if r.session != "a/a2"]
    group_reads(h, "a/a2", [0, 1, 2, 3, 4], t=22.0)
    assert not check(h).failed


def test_group_anomalies_are_charged_to_faults() -> None:
    h = group_history()
    h.faults = [FaultEvent("kill-coordinator", "groups-1", 18.0, 22.0, 23.0)]
    group_reads(h, "b/a1", [1, 2, 3], t=22.0)
    rows = {r.fault: r for r in check(h).rows}
    assert rows["kill-coordinator"].reread == 1 and rows["kill-coordinator"].owner_changes == 1
    assert rows[NO_FAULT].group_reads == 3 and rows["kill-coordinator"].group_reads == 3
