from __future__ import annotations

from pathlib import Path

import pytest

from strand.errors import StorageError
from strand.log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_OFFSET, EpochEntry, LeaderEpochCache


def test_assign_and_persist(tmp_path: Path) -> None:
    cache = LeaderEpochCache.load(tmp_path)
    assert cache.assign(0, 0)
    assert not cache.assign(0, 10)  # same epoch, later offset: nothing new
    assert cache.assign(2, 10)
    assert cache.assign(5, 30)
    assert LeaderEpochCache.load(tmp_path).entries() == [
        EpochEntry(0, 0), EpochEntry(2, 10), EpochEntry(5, 30)]
    text = (tmp_path / "leader-epoch-checkpoint").read_text()
    assert text == "0\n3\n0 0\n2 10\n5 30\n"  # Kafka's format


def test_assign_removes_non_monotonic_entries(tmp_path: Path) -> None:
    cache = LeaderEpochCache.load(tmp_path)
    cache.assign(1, 0)
    cache.assign(3, 20)
    cache.assign(4, 40)
    cache.assign(3, 30)  # epoch 4's entry conflicts (epoch >= 3) and goes
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(3, 30)]
    cache.assign(5, 10)  # start offset 10 < 30: epoch 3's entry goes
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(5, 10)]


def test_end_offset_for(tmp_path: Path) -> None:
    cache = LeaderEpochCache.load(tmp_path)
    assert cache.end_offset_for(0, 100) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    cache.assign(1, 0)
    cache.assign(3, 20)
    cache.assign(6, 50)
    assert cache.end_offset_for(6, 80) == (6, 80)  # latest epoch: the log end offset
    assert cache.end_offset_for(3, 80) == (3, 50)
    assert cache.end_offset_for(4, 80) == (3, 50)  # unknown epoch: the floor epoch's end
    assert cache.end_offset_for(1, 80) == (1, 20)
    assert cache.end_offset_for(0, 80) == (0, 0)  # before the first epoch
    assert cache.end_offset_for(7, 80) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    assert cache.end_offset_for(UNDEFINED_EPOCH, 80) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)


def test_truncation(tmp_path: Path) -> None:
    cache = LeaderEpochCache.load(tmp_path)
    for epoch, start in [(1, 0), (2, 10), (3, 20), (4, 30)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(20)
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(2, 10)]
    cache.truncate_from_start(15)
    assert cache.entries() == [EpochEntry(2, 15)]
    assert LeaderEpochCache.load(tmp_path).entries() == [EpochEntry(2, 15)]


def test_malformed_checkpoint_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n3\n1 0\n")
    with pytest.raises(StorageError):
        LeaderEpochCache.load(tmp_path)
