"""A write the disk refuses (ENOSPC, EIO) leaves no partial batch, index entry or
checkpoint behind: the log answers KAFKA_STORAGE_ERROR, takes no further writes
until ``recover_from_failure`` and then goes on where it was (issue 11, point 4).

The disk is simulated (a write that stores half its bytes, then raises ENOSPC), and
real: a tiny tmpfs filled by appends.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import strand.log.files as files_module
import strand.log.segment as segment_module
from strand.errors import ErrorCode, LogWriteError
from strand.log import LogConfig, PartitionLog
from strand.log.files import INDEX_SUFFIX, atomic_write
from strand.log.leader_epoch import LeaderEpochCache
from tests.support.clock import FakeClock
from tests.support.log_files import torn_segments
from tests.support.tmpfs import fill, small_tmpfs
from tests.unit.log.log_helpers import make_batch, read_all

OpenLog = Callable[..., PartitionLog]


def _enospc() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _half_then_enospc(fd: int, pieces: Sequence[Any]) -> None:
    """A disk that fills up in the middle of a write."""
    data = b"".join(bytes(p) for p in pieces)
    os.write(fd, data[: len(data) // 2])
    raise _enospc()


def _log_files_size(log: PartitionLog) -> int:
    return sum(os.path.getsize(s.log_path) for s in log.segments)


def test_a_failed_append_leaves_no_partial_batch(open_log: OpenLog,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"kept"]), leader_epoch=0)
    size = _log_files_size(log)
    monkeypatch.setattr(segment_module, "_write_all", _half_then_enospc)
    with pytest.raises(LogWriteError) as failed:
        log.append_as_leader(make_batch([b"torn" * 100]), leader_epoch=0)
    assert failed.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert "No space left on device" in str(failed.value)
    assert _log_files_size(log) == size  # the half batch was cut off again
    assert log.log_end_offset == 1
    assert log.failure is not None
    assert torn_segments(log.directory) == []
    assert [r.value for r in read_all(log)] == [b"kept"]  # reads go on


def test_a_failed_log_takes_no_writes_until_recovered(open_log: OpenLog,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"a"]), leader_epoch=0)
    monkeypatch.setattr(segment_module, "_write_all", _half_then_enospc)
    with pytest.raises(LogWriteError):
        log.append_as_leader(make_batch([b"lost"]), leader_epoch=0)
    monkeypatch.undo()  # the disk has room again, but the log was not told yet
    with pytest.raises(LogWriteError, match="takes no writes"):
        log.append_as_leader(make_batch([b"refused"]), leader_epoch=0)
    with pytest.raises(LogWriteError):
        log.append_as_follower(make_batch([b"refused"]))
    assert log.recover_from_failure() == 0
    assert log.failure is None
    info = log.append_as_leader(make_batch([b"b"]), leader_epoch=0)
    assert info.first_offset == 1
    log.close()
    reopened = PartitionLog.open(log.directory, LogConfig())
    assert [r.value for r in read_all(reopened)] == [b"a", b"b"]
    reopened.close()


def test_recovery_cuts_torn_bytes_the_rollback_could_not(
        open_log: OpenLog, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"a"]), leader_epoch=0)
    size = _log_files_size(log)
    monkeypatch.setattr(segment_module, "_write_all", _half_then_enospc)

    def ftruncate_fails(fd: int, length: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "ftruncate", ftruncate_fails)
    with pytest.raises(LogWriteError):
        log.append_as_leader(make_batch([b"torn" * 100]), leader_epoch=0)
    monkeypatch.undo()
    assert _log_files_size(log) > size
    assert torn_segments(log.directory)  # the failed cut left half a batch
    with pytest.raises(LogWriteError):
        log.append_as_leader(make_batch([b"refused"]), leader_epoch=0)
    torn = _log_files_size(log) - size
    assert log.recover_from_failure() == torn
    assert _log_files_size(log) == size
    assert torn_segments(log.directory) == []
    log.append_as_leader(make_batch([b"b"]), leader_epoch=0)
    assert [r.value for r in read_all(log)] == [b"a", b"b"]


def test_a_failed_index_write_is_rolled_back_and_the_roll_undone(
        open_log: OpenLog, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(LogConfig(index_interval_bytes=1))
    for i in range(5):
        log.append_as_leader(make_batch([b"v%d" % i]), leader_epoch=0)
    active = log.active_segment
    index_path = active.offset_index.path
    monkeypatch.setattr(files_module, "write_all", _half_then_enospc)
    with pytest.raises(LogWriteError):
        log.roll()  # the sealed segment's indexes are written out on roll
    assert os.path.getsize(index_path) == 0  # no torn entry was left
    assert log.segments == [active]  # no new segment either
    monkeypatch.undo()
    log.recover_from_failure()
    assert os.path.getsize(index_path) == 8 * len(active.offset_index)
    log.roll()
    assert len(log.segments) == 2
    assert len(list(log.directory.glob(f"*{INDEX_SUFFIX}"))) == 2
    log.append_as_leader(make_batch([b"after"]), leader_epoch=0)
    assert [r.value for r in read_all(log)][-2:] == [b"v4", b"after"]


def test_a_failed_checkpoint_leaves_the_old_file_and_no_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "offsets-checkpoint"
    atomic_write(target, b"old\n")
    real_open = open

    def open_full(path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        f = real_open(path, mode, *args, **kwargs)
        if "w" in mode:
            f.write(b"ne")
            f.close()
            raise _enospc()
        return f

    monkeypatch.setattr("builtins.open", open_full)
    with pytest.raises(OSError):
        atomic_write(target, b"new\n")
    monkeypatch.undo()
    assert target.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["offsets-checkpoint"]


def test_a_failed_leader_epoch_write_changes_nothing(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    cache = LeaderEpochCache.load(tmp_path)
    cache.assign(1, 0)

    def full(path: Path, data: bytes) -> None:
        raise _enospc()

    monkeypatch.setattr("strand.log.leader_epoch.atomic_write", full)
    with pytest.raises(OSError):
        cache.assign(2, 10)
    assert cache.latest_epoch == 1  # memory still agrees with the file
    monkeypatch.undo()
    assert LeaderEpochCache.load(tmp_path).entries() == cache.entries()


def test_appends_until_a_real_disk_is_full_leave_whole_batches(tmp_path: Path) -> None:
    clock = FakeClock()
    config = LogConfig(segment_bytes=256 * 1024)
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        (disk / "ballast").write_bytes(bytes(512 * 1024))
        log = PartitionLog.open(disk / "topic-0", config, clock=clock)
        acknowledged: list[bytes] = []
        failure: LogWriteError | None = None
        for i in range(10_000):
            value = b"%06d" % i + bytes(3000)
            try:
                log.append_as_leader(make_batch([value]), leader_epoch=0)
            except LogWriteError as exc:
                failure = exc
                break
            acknowledged.append(value)
        assert failure is not None and "No space left on device" in str(failure)
        assert torn_segments(disk) == []
        filler = fill(disk)
        with pytest.raises(LogWriteError):
            log.recover_from_failure()  # still full: it stays failed
        filler.unlink()
        (disk / "ballast").unlink()  # space is back
        log.recover_from_failure()
        log.append_as_leader(make_batch([b"after"]), leader_epoch=0)
        log.close()
        reopened = PartitionLog.open(disk / "topic-0", config, clock=clock)
        assert [r.value for r in read_all(reopened)] == [*acknowledged, b"after"]
        reopened.close()
