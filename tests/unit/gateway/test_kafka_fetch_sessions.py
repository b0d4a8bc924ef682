"""The fetch session cache (KIP-227) without a cluster: sessions, epochs, what an
incremental fetch answers about, forgotten partitions, and the bounded cache's
eviction."""

from __future__ import annotations

import itertools

import pytest

from services.gateway.kafka.fetch_sessions import (
    FETCH_SESSION_ID_NOT_FOUND,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_FETCH_SESSION_EPOCH,
    FetchPosition,
    FetchSessionCache,
    FetchSessionError,
    PartitionKey,
    PartitionNews,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def positions(*keys: PartitionKey, offset: int = 0) -> list[tuple[PartitionKey, FetchPosition]]:
    return [(key, FetchPosition(offset, 1 << 20)) for key in keys]


def news(hw: int, records: bool = False, error: int = 0) -> PartitionNews:
    return PartitionNews(error, hw, hw, 0, records)


A, B, C = ("t", 0), ("t", 1), ("u", 0)


def new_cache(slots: int = 10, clock: Clock | None = None) -> FetchSessionCache:
    ids = itertools.count(100)
    return FetchSessionCache(slots, eviction_s=60, clock=clock or Clock(),
                             new_id=lambda: next(ids))


def test_a_full_fetch_opens_a_session_and_incremental_ones_answer_only_news() -> None:
    cache = new_cache()
    full = cache.context(0, INITIAL_EPOCH, positions(A, B))
    assert (full.session_id, full.incremental) == (100, False)
    assert cache.news(full, {A: news(5), B: news(7)}) == [A, B]
    quiet = cache.context(100, 1, [])
    assert quiet.incremental and set(quiet.partitions) == {A, B}
    assert cache.news(quiet, {A: news(5), B: news(7)}) == []
    moved = cache.context(100, 2, positions(A, offset=5))
    assert moved.partitions[A].position.fetch_offset == 5
    assert cache.news(moved, {A: news(5), B: news(8)}) == [B]  # its high watermark moved
    records = cache.context(100, 3, [])
    assert cache.news(records, {A: news(5, records=True), B: news(8, error=6)}) == [A, B]


def test_unknown_high_watermarks_are_no_news_and_keep_the_last_known() -> None:
    cache = new_cache()
    full = cache.context(0, INITIAL_EPOCH, positions(A))
    cache.news(full, {A: news(5)})
    later = cache.context(100, 1, [])
    assert cache.news(later, {A: news(-1)}) == []
    assert later.partitions[A].high_watermark == 5


def test_partitions_are_added_and_forgotten() -> None:
    cache = new_cache()
    cache.context(0, INITIAL_EPOCH, positions(A, B))
    grown = cache.context(100, 1, positions(C), forgotten=[B])
    assert set(grown.partitions) == {A, C}


def test_wrong_epochs_and_unknown_sessions_are_refused() -> None:
    cache = new_cache()
    cache.context(0, INITIAL_EPOCH, positions(A))
    cache.context(100, 1, [])
    with pytest.raises(FetchSessionError) as stale:
        cache.context(100, 1, [])
    assert stale.value.code == INVALID_FETCH_SESSION_EPOCH
    with pytest.raises(FetchSessionError) as unknown:
        cache.context(999, 1, [])
    assert unknown.value.code == FETCH_SESSION_ID_NOT_FOUND
    cache.context(100, 2, [])  # the right epoch still works


def test_final_epoch_closes_and_a_new_initial_fetch_replaces_a_session() -> None:
    cache = new_cache()
    cache.context(0, INITIAL_EPOCH, positions(A))
    sessionless = cache.context(100, FINAL_EPOCH, positions(B))
    assert (sessionless.session_id, sessionless.incremental) == (0, False)
    assert 100 not in cache and len(cache) == 0
    cache.context(0, INITIAL_EPOCH, positions(A))
    replaced = cache.context(101, INITIAL_EPOCH, positions(B))
    assert replaced.session_id == 102 and 101 not in cache and len(cache) == 1


def test_no_session_for_an_empty_full_fetch() -> None:
    cache = new_cache()
    assert cache.context(0, INITIAL_EPOCH, []).session_id == 0 and len(cache) == 0


def test_a_full_cache_evicts_an_idle_session_then_a_smaller_one_then_refuses() -> None:
    clock = Clock()
    cache = new_cache(slots=2, clock=clock)
    cache.context(0, INITIAL_EPOCH, positions(A, B))  # 100: two partitions
    clock.now = 10
    cache.context(0, INITIAL_EPOCH, positions(A))  # 101: one partition
    clock.now = 20
    # Full, nothing idle long enough, the new one no bigger than the smallest: none.
    assert cache.context(0, INITIAL_EPOCH, positions(C)).session_id == 0
    # Bigger than the smallest (101): it makes room.
    assert cache.context(0, INITIAL_EPOCH, positions(A, B, C)).session_id == 102
    assert 101 not in cache and cache.evictions == 1
    clock.now = 100  # 100 idle for 100 s, over the eviction time: it goes first
    assert cache.context(0, INITIAL_EPOCH, positions(C)).session_id == 103
    assert 100 not in cache and 102 in cache and cache.evictions == 2


def test_a_cache_without_slots_serves_without_sessions() -> None:
    cache = new_cache(slots=0)
    assert cache.context(0, INITIAL_EPOCH, positions(A)).session_id == 0
