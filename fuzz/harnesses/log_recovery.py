"""A partition directory as the log finds it at start-up: segments, their offset, time
and aborted-transaction indexes, producer snapshots, the offset and leader-epoch
checkpoints, an interrupted compaction's swap file and the damage mark, each as the
fuzzer wrote it, opened by the real loader (``PartitionLog.open``).

Input: one flags byte, then chunks (``kind u8 | length u16 | payload``, see
:func:`fuzz.harnesses.common.read_chunks`), each one file:

====  ==============================================================================
kind  file
====  ==============================================================================
0     a segment: 8 bytes of base offset, then its ``.log`` bytes
1-3   the ``.index``, ``.timeindex``, ``.txnindex`` of the last segment before it
4     a producer snapshot: 8 bytes of offset, then the file
5, 6  ``offsets-checkpoint``, ``leader-epoch-checkpoint``
7     a compaction swap: 8 bytes of base offset, then the ``.log.swap`` bytes
8     ``damaged-from``
====  ==============================================================================

The open either fails with a typed error (:data:`RECOVERY_ERRORS`) or gives
a log that holds: segments in offset order ending at the log end offset, offsets in
range, a log that takes an append and reads it back, and the same log again after a
clean close. When every segment was recovered (an unclean shutdown, no checkpoint, no
swap), every byte of it is also whole batches with valid CRCs and increasing offsets:
"no corrupted log".
"""

from __future__ import annotations

import itertools
import os
import struct
from pathlib import Path

from fuzz.harnesses.common import (
    check,
    fix_batch_crcs,
    read_chunks,
    scratch_directory,
    write_chunks,
)
from strand.errors import CorruptRecordError, InvalidTxnStateError, StorageError
from strand.log.checkpoint import CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE
from strand.log.config import LogConfig
from strand.log.failure import DAMAGE_MARK_FILE
from strand.log.files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_file_name,
)
from strand.log.integrity import find_damage, verify_batches
from strand.log.leader_epoch import CHECKPOINT_FILE as EPOCH_CHECKPOINT_FILE
from strand.log.log import PartitionLog
from strand.log.producer_snapshot import SNAPSHOT_SUFFIX
from strand.records.batch import validate_batch
from strand.records.builder import BatchBuilder
from strand.records.reader import iter_record_batches

__all__ = [
    "CLEAN",
    "FIX_CRCS",
    "RECOVERY_ERRORS",
    "Kind",
    "encode_directory",
    "test_one_input",
]

# Flags of the first byte.
CLEAN = 0x01  # the last shutdown was clean: segments are trusted, indexes loaded
FIX_CRCS = 0x02  # recompute the CRCs of .log and .swap batches
DENSE_INDEX = 0x04  # an index entry for every batch (index.interval.bytes 0)


class Kind:
    SEGMENT, INDEX, TIME_INDEX, TXN_INDEX, SNAPSHOT = 0, 1, 2, 3, 4
    OFFSET_CHECKPOINT, EPOCH_CHECKPOINT, SWAP, DAMAGE_MARK = 5, 6, 7, 8
    COUNT = 9


# A damaged file (StorageError, CorruptRecordError), or producer batches the state
# replayed from the log and a snapshot refuses (a snapshot that contradicts the log):
# the log does not open, as Kafka's does not.
RECOVERY_ERRORS = (StorageError, CorruptRecordError, InvalidTxnStateError)

_OFFSET = struct.Struct(">Q")
# File-name offsets below 2^62: a log never gets near the int64 end of its offsets, where
# an append would overflow the batch header (no log can be appended to forever).
_MAX_BASE_OFFSET = (1 << 62) - 1
_NOW_MS = 1_700_000_000_000
_CONFIGS = {False: LogConfig(), True: LogConfig(index_interval_bytes=0)}
_DIRECTORY = scratch_directory("log") / "topic-0"
_INDEX_SUFFIXES = {Kind.INDEX: INDEX_SUFFIX, Kind.TIME_INDEX: TIME_INDEX_SUFFIX,
                   Kind.TXN_INDEX: TXN_INDEX_SUFFIX}
_APPENDED = [(b"key-%d" % i, b"appended after recovery %d" % i) for i in range(3)]


def test_one_input(data: bytes) -> None:
    if not data:
        return
    flags = data[0]
    fully_recovered = _write_directory(data[1:], fix_crcs=bool(flags & FIX_CRCS),
                                       clean=bool(flags & CLEAN))
    config = _CONFIGS[bool(flags & DENSE_INDEX)]
    try:
        log = PartitionLog.open(_DIRECTORY, config, clock=lambda: _NOW_MS)
    except RECOVERY_ERRORS:
        return
    end = _check_opened(log, fully_recovered)
    appended_at = _check_append(log)
    log.close()
    again = PartitionLog.open(_DIRECTORY, config, clock=lambda: _NOW_MS)
    try:
        check(again.log_end_offset == end + len(_APPENDED),
              f"reopened after a clean close at {again.log_end_offset}, closed at "
              f"{end + len(_APPENDED)}")
        check(again.log_start_offset == log.log_start_offset, "the log start offset moved")
        _check_read_back(again, appended_at)
    finally:
        again.close()


def _write_directory(payload: bytes, *, fix_crcs: bool, clean: bool) -> bool:
    """Replace the directory's files with the input's; whether the loader will recover
    every segment (so each must end up valid)."""
    _DIRECTORY.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(_DIRECTORY):
        os.unlink(entry.path)
    segment_base: int | None = None
    trusted = clean
    for kind, chunk in read_chunks(payload):
        kind %= Kind.COUNT
        name: str | None = None
        body = chunk
        if kind in (Kind.SEGMENT, Kind.SNAPSHOT, Kind.SWAP):
            offset = _OFFSET.unpack(chunk[:8].ljust(8, b"\0"))[0] & _MAX_BASE_OFFSET
            body = chunk[8:]
            if kind == Kind.SEGMENT:
                segment_base = offset
                name = segment_file_name(offset, LOG_SUFFIX)
            elif kind == Kind.SNAPSHOT:
                name = segment_file_name(offset, SNAPSHOT_SUFFIX)
            else:
                name = segment_file_name(offset, LOG_SUFFIX + SWAP_SUFFIX)
                trusted = True  # a swap replaces segments without recovering them
            if fix_crcs and kind != Kind.SNAPSHOT:
                fixed = bytearray(body)
                fix_batch_crcs(fixed)
                body = bytes(fixed)
        elif kind in _INDEX_SUFFIXES:
            if segment_base is not None:
                name = segment_file_name(segment_base, _INDEX_SUFFIXES[kind])
        elif kind == Kind.OFFSET_CHECKPOINT:
            name, trusted = CHECKPOINT_FILE, True  # its recovery point skips segments
        elif kind == Kind.EPOCH_CHECKPOINT:
            name = EPOCH_CHECKPOINT_FILE
        else:
            name = DAMAGE_MARK_FILE
        if name is not None:
            (_DIRECTORY / name).write_bytes(body)
    if clean:
        (_DIRECTORY / CLEAN_SHUTDOWN_FILE).write_bytes(b"")
    return not trusted


def _check_opened(log: PartitionLog, fully_recovered: bool) -> int:
    """The log's shape, and with ``fully_recovered`` every batch; its end offset."""
    segments = log.segments
    check(bool(segments), "a log without segments")
    for earlier, later in itertools.pairwise(segments):
        check(earlier.next_offset <= later.base_offset,
              f"segment {later.base_offset} starts before {earlier.next_offset}")
    end = log.log_end_offset
    check(end == segments[-1].next_offset, "the log end is not its last segment's end")
    check(log.log_start_offset <= log.high_watermark <= end,
          f"offsets out of order: start {log.log_start_offset}, high watermark "
          f"{log.high_watermark}, end {end}")
    check(log.recovery_point <= end, "a recovery point past the log end")
    if fully_recovered:
        for segment in segments:
            expected = segment.base_offset
            for position, header in segment.headers_from(0):
                validate_batch(segment.read_at(position, header.size_in_bytes))
                check(header.base_offset >= expected, "offsets go back in a recovered log")
                expected = header.next_offset
            check(expected == segment.next_offset, "a segment's end is not its last batch's")
        check(find_damage(log, log.log_start_offset) is None, "the scrub finds damage")
        _check_reads(log)
    return end


def _check_reads(log: PartitionLog) -> None:
    """Reading the log from its start returns every batch it holds, valid, in order,
    each once, and nothing else."""
    expected = [(header.base_offset, header.next_offset) for segment in log.segments
                for _, header in segment.headers_from(0)
                if header.last_offset >= log.log_start_offset]
    seen: list[tuple[int, int]] = []
    offset = log.log_start_offset
    for _ in range(len(expected) + 1):
        data = log.read(offset, 1 << 20) if offset < log.log_end_offset else b""
        if not data:
            break
        verified = verify_batches(data, -1)
        check(verified.error is None, f"a read at {offset} fails verification: "
                                      f"{verified.error}")
        # Records are not decoded: recovery checks framing and CRCs, as Kafka's does; a
        # body that keeps its CRC yet does not decode was written so by its producer.
        seen.extend((batch.header.base_offset, batch.header.next_offset)
                    for batch in iter_record_batches(data))
        check(verified.next_offset > offset, f"a read at {offset} makes no progress")
        offset = verified.next_offset
    check(seen == expected, f"reads returned {len(seen)} batches of the {len(expected)} "
                            f"the log holds")


def _check_append(log: PartitionLog) -> int:
    """The recovered log takes a leader's append and returns it; its first offset."""
    end = log.log_end_offset
    builder = BatchBuilder()
    for key, value in _APPENDED:
        builder.append(value, key=key, timestamp=_NOW_MS)
    info = log.append_as_leader(builder.build(), 1)
    check(info.first_offset == end, f"appended at {info.first_offset}, the end was {end}")
    _check_read_back(log, end)
    return end


def _check_read_back(log: PartitionLog, offset: int) -> None:
    data = log.read(offset, 1 << 20)
    records = [r for batch in iter_record_batches(data) for r in batch.records()
               if r.offset >= offset]
    check([(r.key, r.value) for r in records] == _APPENDED,
          f"read back {len(records)} records at {offset}, not the appended ones")


def encode_directory(directory: Path, flags: int) -> bytes:
    """A directory's files as an input of this harness (the corpus seeds)."""
    chunks: list[tuple[int, bytes]] = []
    names = sorted(p.name for p in directory.iterdir())
    for name in names:
        stem, _, suffix = name.partition(".")
        data = (directory / name).read_bytes()
        if suffix == LOG_SUFFIX[1:]:
            chunks.append((Kind.SEGMENT, _OFFSET.pack(int(stem)) + data))
            for kind, index_suffix in _INDEX_SUFFIXES.items():
                if stem + index_suffix in names:
                    chunks.append((kind, (directory / (stem + index_suffix)).read_bytes()))
        elif suffix == (LOG_SUFFIX + SWAP_SUFFIX)[1:]:
            chunks.append((Kind.SWAP, _OFFSET.pack(int(stem)) + data))
        elif suffix == SNAPSHOT_SUFFIX[1:]:
            chunks.append((Kind.SNAPSHOT, _OFFSET.pack(int(stem)) + data))
        elif name == CHECKPOINT_FILE:
            chunks.append((Kind.OFFSET_CHECKPOINT, data))
        elif name == EPOCH_CHECKPOINT_FILE:
            chunks.append((Kind.EPOCH_CHECKPOINT, data))
        elif name == DAMAGE_MARK_FILE:
            chunks.append((Kind.DAMAGE_MARK, data))
    return bytes([flags]) + write_chunks(chunks)

