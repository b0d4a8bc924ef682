"""``strand verify consume``'s tally (strand/cli/verify_check.py): lost, duplicated and
out-of-order records of one run, against what the producer was told was written."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from strand.cli.verify_check import Tally


def test_a_clean_run() -> None:
    tally = Tally()
    for seq in range(10):
        tally.add(seq % 2, seq, latency_ms=float(seq))
    report = tally.report(range(10))
    assert (report["lost"], report["duplicated"], report["out_of_order"]) == (0, 0, 0)
    assert report["distinct"] == report["read"] == 10
    assert report["latency_ms"] == {"p50": 4.0, "p99": 9.0, "max": 9.0}


def test_lost_duplicated_and_out_of_order() -> None:
    tally = Tally()
    for partition, seq in [(0, 0), (0, 2), (0, 1), (1, 3), (1, 3), (1, 7)]:
        tally.add(partition, seq)
    report = tally.report([0, 1, 2, 3, 4, 5])
    assert report["lost"] == 2 and report["lost_sample"] == [4, 5]
    assert report["duplicated"] == 1 and report["duplicated_sample"] == [3]
    assert report["out_of_order"] == 1  # 1 after 2 in partition 0
    assert report["unacknowledged_but_read"] == 1  # 7: sent, not acknowledged, yet written


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50)), max_size=200),
       st.sets(st.integers(0, 50)))
def test_the_report_adds_up(reads: list[tuple[int, int]], acked: set[int]) -> None:
    tally = Tally()
    for partition, seq in reads:
        tally.add(partition, seq)
    report = tally.report(acked)
    seen = {seq for _, seq in reads}
    assert report["lost"] == len(acked - seen)
    assert report["read"] == len(reads) and report["distinct"] == len(seen)
    assert report["duplicated"] == len(seen) - len({s for s in seen
                                                     if sum(1 for _, x in reads if x == s) == 1})
