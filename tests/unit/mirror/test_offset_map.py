"""The mirror's offset map alone (strand.mirror.offset_map): runs, encoding, and the
translation of a source offset, checked against the record-by-record truth for random
copies (gaps on both sides, ranges split across micro-batches)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strand.client.structs import TopicPartition
from strand.mirror.offset_map import OffsetMapEntry, OffsetRun, runs_of, translate
from strand.mirror.translate import TranslationGap, translate_offsets


def test_runs_break_where_either_side_skips() -> None:
    assert runs_of([(0, 10), (1, 11), (2, 12), (4, 13), (5, 15)]) == (
        OffsetRun(0, 10, 3), OffsetRun(4, 13, 1), OffsetRun(5, 15, 1))
    assert runs_of([]) == ()


def test_entries_round_trip_and_refuse_garbage() -> None:
    entry = OffsetMapEntry("orders", 3, 100, 250, "east.orders", 3, runs_of([(100, 7)]))
    assert OffsetMapEntry.decode(entry.encode()) == entry
    assert entry.key == b"orders/3"
    with pytest.raises(ValueError, match="not an offset map entry"):
        OffsetMapEntry.decode(b'{"source": 1}')


@st.composite
def copies(draw: st.DrawFn) -> tuple[list[OffsetMapEntry], list[tuple[int, int]], int, int]:
    """Random copied pairs (source, target), increasing on both sides with gaps, cut
    into consecutive micro-batch ranges; also the first and end source offsets."""
    first = draw(st.integers(0, 50))
    size = draw(st.integers(1, 60))
    source = first
    target = draw(st.integers(0, 50))
    pairs: list[tuple[int, int]] = []
    for _ in range(size):
        if draw(st.booleans()):  # copied (else: skipped, e.g. a marker or a loop)
            pairs.append((source, target))
            target += 1 + draw(st.sampled_from([0, 0, 0, 1, 3]))  # markers on the target
        source += 1 + draw(st.sampled_from([0, 0, 0, 2]))  # markers on the source
    end = source
    cuts = sorted(draw(st.sets(st.integers(first + 1, max(first + 1, end - 1)), max_size=5)))
    bounds = [first, *[c for c in cuts if first < c < end], end]
    entries = []
    for a, b in itertools.pairwise(bounds):
        inside = [(s, t) for s, t in pairs if a <= s < b]
        entries.append(OffsetMapEntry("t", 0, a, b, "x.t", 0, runs_of(inside)))
    return entries, pairs, first, end


@given(copies())
def test_translation_is_exact_for_every_offset_passed(
        case: tuple[list[OffsetMapEntry], list[tuple[int, int]], int, int]) -> None:
    entries, pairs, first, end = case
    for offset in range(first, end + 1):
        later = [t for s, t in pairs if s >= offset]
        earlier = [t for s, t in pairs if s < offset]
        expected = later[0] if later else (earlier[-1] + 1 if earlier else None)
        assert translate(entries, offset) == expected, offset
    assert translate(entries, end + 1) is None  # not mirrored that far yet
    if first > 0:
        assert translate(entries, first - 1) is None  # before the mirror began


def test_a_partition_not_mirrored_far_enough_is_named() -> None:
    entries = {("t", 0): [OffsetMapEntry("t", 0, 0, 10, "x.t", 0, runs_of(
        [(i, i + 5) for i in range(10)]))]}
    assert translate_offsets(entries, {TopicPartition("t", 0): 4}) == {
        TopicPartition("x.t", 0): 9}
    with pytest.raises(TranslationGap, match="t-0 at 12"):
        translate_offsets(entries, {TopicPartition("t", 0): 12})
    with pytest.raises(TranslationGap, match="nothing of it mirrored"):
        translate_offsets(entries, {TopicPartition("t", 1): 0})
