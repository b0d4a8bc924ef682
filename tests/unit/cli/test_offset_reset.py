"""The plan of ``strand group reset-offsets``: targets clamped to each partition's
[log start, log end], shifts need a committed offset, date-times and topic scopes parse."""

from __future__ import annotations

import pytest

from strand.cli.offset_reset import (
    ResetError,
    ResetSpec,
    parse_datetime,
    parse_topic_scope,
    plan,
)
from strand.client.structs import TopicPartition

A, B = TopicPartition("t", 0), TopicPartition("t", 1)
STARTS, ENDS = {A: 5, B: 0}, {A: 20, B: 8}


def test_targets_are_clamped_to_the_partition_range() -> None:
    resets = plan(ResetSpec("offset", 99_999), [B, A], {}, STARTS, ENDS)
    assert [(r.tp, r.new) for r in resets] == [(A, 20), (B, 8)]
    assert all("past the end" in r.note for r in resets)
    low = plan(ResetSpec("offset", 2), [A, B], {}, STARTS, ENDS)
    assert [(r.new, bool(r.note)) for r in low] == [(5, True), (2, False)]


def test_shift_by_moves_the_committed_offset_and_needs_one() -> None:
    resets = plan(ResetSpec("shift", -10), [A, B], {A: 12, B: 7}, STARTS, ENDS)
    assert [(r.current, r.new) for r in resets] == [(12, 5), (7, 0)]
    with pytest.raises(ResetError, match="no committed offset"):
        plan(ResetSpec("shift", 1), [A], {}, STARTS, ENDS)


def test_datetime_uses_the_offset_for_the_time_or_the_end() -> None:
    resets = plan(ResetSpec("datetime", 1), [A, B], {}, STARTS, ENDS, {A: 7, B: None})
    assert [r.new for r in resets] == [7, 8]


def test_parsing() -> None:
    assert parse_datetime("1970-01-01T00:00:01.5Z") == 1500
    assert parse_datetime("1970-01-01T02:00:02+02:00") == 2000
    with pytest.raises(ValueError, match="not a date-time"):
        parse_datetime("yesterday")
    assert parse_topic_scope("orders") == ("orders", None)
    assert parse_topic_scope("orders:2,0,2") == ("orders", (0, 2))
    for bad in (":1", "orders:x", "orders:-1", "orders:"):
        with pytest.raises(ValueError):
            parse_topic_scope(bad)
