"""Partition directories the fuzzer found (fuzz/harnesses/log_recovery.py,
docs/fuzzing.md) that made opening a log fail untyped, hang, or open a log that then
failed its next append."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import crc32c
import pytest

from strand.errors import CorruptRecordError, StorageError
from strand.log import LogConfig, PartitionLog
from strand.log.checkpoint import CLEAN_SHUTDOWN_FILE
from strand.log.integrity import verify_batches
from strand.log.leader_epoch import CHECKPOINT_FILE, LeaderEpochCache
from strand.records.batch import validate_batch
from tests.unit.log.log_helpers import make_batch, read_all

RECORD_COUNT_POS = 57


def _fix_crc(data: bytearray) -> bytes:
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def test_verify_batches_refuses_a_negative_record_count_as_validate_batch_does() -> None:
    """The fetch path's fast check let through what validate_batch refuses: it serves
    (and the scrub passes) only what every reader takes."""
    data = bytearray(make_batch([b"a", b"b"]))
    struct.pack_into(">i", data, RECORD_COUNT_POS, -2)
    batch = _fix_crc(data)
    with pytest.raises(CorruptRecordError, match="negative record count"):
        validate_batch(batch)
    checked = verify_batches(batch)
    assert (checked.valid_bytes, checked.batches) == (0, 0)
    assert checked.error is not None and "negative record count" in checked.error


def test_a_leader_epoch_checkpoint_that_is_not_utf8_is_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / CHECKPOINT_FILE).write_bytes(b"0\n1\n0 \xf4\x80\n")
    with pytest.raises(StorageError, match="malformed leader epoch checkpoint"):
        LeaderEpochCache.load(tmp_path)


def _segments(log: PartitionLog) -> list[Path]:
    return sorted(log.directory.glob("*.log"))


@pytest.mark.parametrize("clean", [False, True])
def test_a_batch_offset_past_what_its_segment_indexes_is_cut_at_recovery(
        open_log: Callable[..., PartitionLog], clean: bool) -> None:
    """A flipped bit in a base offset (outside the CRC) put a batch 2^55 offsets past
    its segment's base: recovery kept it, and the next index entry or roll failed with
    OverflowError (the indexes hold 32-bit relative offsets). No append ever puts a
    batch there, so it is garbage: the log is cut before it."""
    config = LogConfig(index_interval_bytes=0)
    log = open_log(config)
    for i in range(3):
        log.append_as_leader(make_batch([b"v%d" % i]), 1)
    log.close()
    (segment,) = _segments(log)
    data = bytearray(segment.read_bytes())
    last = len(data) * 2 // 3  # the batches are alike: the last one starts here
    struct.pack_into(">q", data, last, 1 << 55)
    segment.write_bytes(bytes(data))
    if not clean:
        (log.directory / CLEAN_SHUTDOWN_FILE).unlink()
    again = open_log(config)
    assert again.log_end_offset == 2
    again.append_as_leader(make_batch([b"after"]), 2)
    again.roll()
    again.append_as_leader(make_batch([b"rolled"]), 2)
    assert [r.value for r in read_all(again)] == [b"v0", b"v1", b"after", b"rolled"]


@pytest.mark.parametrize("length", [-12, -100, 0])
def test_a_damaged_compaction_swap_is_a_typed_error_not_a_hang(
        open_log: Callable[..., PartitionLog], length: int) -> None:
    """Completing an interrupted compaction read the swap's batch lengths without a
    check: a length of -12 (a batch of 0 bytes) looped forever, a negative one read at
    a negative position (OSError)."""
    log = open_log()
    log.append_as_leader(make_batch([b"a", b"b"]), 1)
    log.close()
    (segment,) = _segments(log)
    swap = bytearray(segment.read_bytes())
    struct.pack_into(">i", swap, 8, length)
    segment.with_name(segment.name + ".swap").write_bytes(bytes(swap))
    with pytest.raises(CorruptRecordError, match="compaction swap is damaged"):
        open_log()
