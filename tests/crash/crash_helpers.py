"""Shared helpers of the crash-recovery tests.

Imported by the test modules and by the child-process scripts of this directory (run
as ``python -m tests.crash.crash_child_<x>``), so every process derives the same
deterministic content from a batch number, and the parent can check byte for byte
what a killed child wrote.

Nothing here imports pytest: the child scripts use it too.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from strand.log import LogConfig, PartitionLog
from strand.log.checkpoint import CLEAN_SHUTDOWN_FILE
from strand.log.files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TMP_SUFFIX,
    parse_base_offset,
    segment_path,
)
from strand.records import (
    BatchBuilder,
    BatchHeader,
    Compression,
    Record,
    RecordBatch,
    iter_record_batches,
    stamp,
    validate_batch,
)

REPO = Path(__file__).resolve().parents[2]
FIXED_NOW_MS = 1_700_000_000_000
BASE_TIMESTAMP = FIXED_NOW_MS - 3_600_000
LEADER_EPOCH = 3
# Mostly uncompressed, but every codec shows up regularly.
CODEC_CYCLE = (
    Compression.NONE, Compression.NONE, Compression.GZIP, Compression.NONE,
    Compression.LZ4, Compression.NONE, Compression.ZSTD, Compression.SNAPPY,
)


def fixed_clock() -> int:
    """The clock every log of these tests runs on: time never triggers a roll or flush."""
    return FIXED_NOW_MS


# -- deterministic batches of an append-only log ------------------------------------------


def append_config(*, segment_bytes: int = 64 * 1024, flush_messages: int | None = None,
                  index_interval_bytes: int = 1024) -> LogConfig:
    if flush_messages is None:
        return LogConfig(segment_bytes=segment_bytes, index_interval_bytes=index_interval_bytes)
    return LogConfig(segment_bytes=segment_bytes, index_interval_bytes=index_interval_bytes,
                     flush_messages=flush_messages)


def record_count(batch_no: int) -> int:
    return 1 + (batch_no * 7) % 5


def record_key(batch_no: int, i: int) -> bytes:
    return f"key-{(batch_no * 5 + i) % 17}".encode()


def record_value(batch_no: int, i: int) -> bytes:
    head = f"{batch_no}:{i}:".encode()
    return head.ljust(32 + (batch_no * 31 + i * 17) % 180, b"#")


def record_timestamp(batch_no: int, i: int) -> int:
    # Not monotonic from batch to batch, so the time index has work to do.
    return BASE_TIMESTAMP + batch_no * 10 + i - 25 * (batch_no % 3)


def build_batch(batch_no: int) -> bytes:
    """The producer batch number ``batch_no`` (base offset 0, no epoch), as sent to the log."""
    builder = BatchBuilder(compression=CODEC_CYCLE[batch_no % len(CODEC_CYCLE)])
    for i in range(record_count(batch_no)):
        builder.append(record_value(batch_no, i), key=record_key(batch_no, i),
                       timestamp=record_timestamp(batch_no, i))
    return builder.build()


def stored_batch(batch_no: int, base_offset: int, leader_epoch: int = LEADER_EPOCH) -> bytes:
    """The exact bytes the log stores for batch ``batch_no`` appended at ``base_offset``."""
    data = bytearray(build_batch(batch_no))
    stamp(data, 0, base_offset, leader_epoch)
    return bytes(data)


def batch_number(batch: RecordBatch) -> int:
    """Which deterministic batch this is, from its first record's value."""
    value = batch.records()[0].value
    assert value is not None
    return int(value.split(b":", 1)[0])


def check_batch_content(batch: RecordBatch, batch_no: int) -> None:
    """The batch holds exactly the records of ``batch_no`` at contiguous offsets."""
    base = batch.header.base_offset
    assert batch.raw == stored_batch(batch_no, base), f"batch {batch_no} at {base}: bytes differ"
    records = batch.records()
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (base + i, record_key(batch_no, i), record_value(batch_no, i),
         record_timestamp(batch_no, i))
        for i in range(record_count(batch_no))
    ]


def append_batches(log: PartitionLog, batch_numbers: Iterable[int]) -> list[tuple[int, int]]:
    """Append the given deterministic batches; returns their (first, last) offsets."""
    out = []
    for batch_no in batch_numbers:
        info = log.append_as_leader(build_batch(batch_no), LEADER_EPOCH)
        out.append((info.first_offset, info.last_offset))
    return out


def build_append_log(directory: Path, batches: int, config: LogConfig) -> PartitionLog:
    log = PartitionLog.open(directory, config, clock=fixed_clock)
    append_batches(log, range(batches))
    return log


# -- reading a log back ---------------------------------------------------------------------


def read_all_batches(log: PartitionLog, *, contiguous: bool = True,
                     max_bytes: int = 16 * 1024) -> list[RecordBatch]:
    """Every batch from the log start offset to the log end offset through ``read``.

    Checks that each read returns whole, CRC-valid batches, that offsets strictly
    increase (and, for ``contiguous``, leave no gap), and that nothing is served
    at or after the log end offset.
    """
    batches: list[RecordBatch] = []
    offset = log.log_start_offset
    end = log.log_end_offset
    while offset < end:
        data = log.read(offset, max_bytes)
        assert data, f"read({offset}) returned nothing below the log end offset {end}"
        got = list(iter_record_batches(data))  # validates every CRC
        assert sum(b.header.size_in_bytes for b in got) == len(data), "read returned a torn batch"
        for batch in got:
            header = batch.header
            if contiguous:
                assert header.base_offset == offset, (header.base_offset, offset)
            else:
                assert header.last_offset >= offset, (header.base_offset, offset)
                assert not batches or header.base_offset >= batches[-1].header.next_offset
            offset = header.next_offset
            batches.append(batch)
    assert offset == end, f"batches end at {offset}, the log end offset is {end}"
    assert log.read(end, max_bytes) == b""
    return batches


@dataclass(frozen=True, slots=True)
class FileBatch:
    position: int
    header: BatchHeader
    data: bytes

    @property
    def end(self) -> int:
        return self.position + self.header.size_in_bytes


def file_batches(path: Path) -> list[FileBatch]:
    """Parse a segment file that must consist of back-to-back valid batches only."""
    data = path.read_bytes()
    out = []
    pos = 0
    while pos < len(data):
        header = validate_batch(data, pos)
        out.append(FileBatch(pos, header, data[pos : pos + header.size_in_bytes]))
        pos += header.size_in_bytes
    return out


def segment_bases(directory: Path, suffix: str = LOG_SUFFIX) -> list[int]:
    return sorted(
        base for path in directory.iterdir()
        if path.name.endswith(suffix) and (base := parse_base_offset(path.name)) is not None
    )


def check_directory(directory: Path) -> list[int]:
    """On-disk invariants of a log directory right after open; returns the segment bases.

    No temporary, cleaned, swap or deleted file; every index has its segment; every
    segment file is back-to-back valid batches whose offsets increase across segments.
    """
    leftovers = [p.name for p in directory.iterdir()
                 if p.name.endswith((TMP_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX))]
    assert not leftovers, leftovers
    bases = segment_bases(directory)
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        orphans = set(segment_bases(directory, suffix)) - set(bases)
        assert not orphans, f"orphan {suffix} files for {sorted(orphans)}"
    previous_end = -1
    for base in bases:
        for batch in file_batches(segment_path(directory, base, LOG_SUFFIX)):
            assert batch.header.base_offset >= max(base, previous_end), (base, batch.header)
            previous_end = batch.header.next_offset
    return bases


def log_records(log: PartitionLog) -> list[Record]:
    return [r for batch in read_all_batches(log, contiguous=False) for r in batch.records()]


def check_append_only_log(log: PartitionLog, *, acked: dict[int, tuple[int, int]] | None = None
                          ) -> list[RecordBatch]:
    """The log holds batches 0, 1, 2, ... exactly as appended, from offset 0, no gap."""
    assert log.log_start_offset == 0
    batches = read_all_batches(log)
    for batch_no, batch in enumerate(batches):
        assert batch_number(batch) == batch_no
        check_batch_content(batch, batch_no)
    for batch_no, (first, last) in (acked or {}).items():
        assert batch_no < len(batches), f"acknowledged batch {batch_no} was lost"
        header = batches[batch_no].header
        assert (header.base_offset, header.last_offset) == (first, last)
    return batches


def check_appends_continue(log: PartitionLog, next_batch_no: int, count: int = 3) -> None:
    """New appends start at the log end offset and read back intact."""
    start = log.log_end_offset
    offsets = append_batches(log, range(next_batch_no, next_batch_no + count))
    assert offsets[0][0] == start
    for (_, last), (next_first, _) in itertools.pairwise(offsets):
        assert next_first == last + 1
    assert log.log_end_offset == offsets[-1][1] + 1
    for batch_no, (first, _) in zip(range(next_batch_no, next_batch_no + count), offsets,
                                   strict=True):
        got = next(iter_record_batches(log.read(first, 1)))
        check_batch_content(got, batch_no)


def reopen(directory: Path, config: LogConfig) -> PartitionLog:
    return PartitionLog.open(directory, config, clock=fixed_clock)


def remove_clean_shutdown_marker(directory: Path) -> None:
    (directory / CLEAN_SHUTDOWN_FILE).unlink()


def has_clean_shutdown_marker(directory: Path) -> bool:
    return (directory / CLEAN_SHUTDOWN_FILE).exists()


def copy_log(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


# -- observable answers of a log, for before/after comparisons ------------------------------

READ_SIZES = (1, 700, 8192)


def read_answers(log: PartitionLog) -> dict[tuple[int, int], bytes]:
    """``read(offset, max_bytes)`` for every offset of the log and a few sizes."""
    return {
        (offset, max_bytes): log.read(offset, max_bytes)
        for offset in range(log.log_start_offset, log.log_end_offset + 1)
        for max_bytes in READ_SIZES
    }


def timestamp_answers(log: PartitionLog, timestamps: Iterable[int]
                      ) -> dict[int, tuple[int, int] | None]:
    return {ts: log.offset_for_timestamp(ts) for ts in timestamps}


# -- child processes ---------------------------------------------------------------------------


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(  # the child imports tests.crash.crash_helpers
        [str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def child_module(script: str) -> str:
    """``crash_child_x.py`` of this directory as a module to run (``python -m``)."""
    return f"{__package__}.{Path(script).stem}"


def run_child(script: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a child script of this directory to completion (or to its own death)."""
    return subprocess.run(
        [sys.executable, "-m", child_module(script), *args], capture_output=True, text=True,
        timeout=timeout, env=child_env(), check=False,
    )


def start_child(script: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", child_module(script), *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=child_env(),
    )


def parse_acks(lines: Iterable[bytes]) -> dict[int, tuple[int, int]]:
    """``ack <batch_no> <first> <last>`` lines of an appending child."""
    acked: dict[int, tuple[int, int]] = {}
    for line in lines:
        fields = line.split()
        if fields and fields[0] == b"ack":
            acked[int(fields[1])] = (int(fields[2]), int(fields[3]))
    return acked


def garbage(kind: str, size: int, seed: int) -> bytes:
    if kind == "zeros":
        return bytes(size)
    if kind == "ones":
        return b"\xff" * size
    if kind == "random":
        return random.Random(seed).randbytes(size)
    raise ValueError(kind)



def brute_force_offset_for_timestamp(records: list[Record], timestamp: int
                                     ) -> tuple[int, int] | None:
    """The first record, in offset order, whose timestamp is >= ``timestamp``: what
    ``offset_for_timestamp`` must answer, worked out without any index."""
    for record in records:
        if record.timestamp >= timestamp:
            return record.offset, record.timestamp
    return None


def timestamp_probes(records: list[Record]) -> list[int]:
    """Every record timestamp, its neighbours, and values outside the log's range."""
    stamps = {r.timestamp for r in records}
    if not stamps:
        return [0]
    probes = {t + d for t in stamps for d in (-1, 0, 1)}
    probes |= {min(stamps) - 1000, max(stamps) + 1000}
    return sorted(probes)


# -- a compacted topic ---------------------------------------------------------------------

COMPACT_SEGMENTS = 9  # rolled by hand; the cleaner groups them three by three
COMPACT_BATCHES_PER_SEGMENT = 10
COMPACT_VALUE_LENGTH = 40
COMPACT_SEGMENT_BYTES = 7 * 1024


def compact_config() -> LogConfig:
    # delete.retention.ms=0: every tombstone is old enough to go (timestamps < now).
    return LogConfig(cleanup_policy=("compact",), segment_bytes=COMPACT_SEGMENT_BYTES,
                     index_interval_bytes=200, delete_retention_ms=0)


@dataclass(frozen=True, slots=True)
class KeyedRecord:
    offset: int
    key: bytes
    value: bytes | None
    timestamp: int


def compact_layout() -> list[list[list[KeyedRecord]]]:
    """Segments → batches → records of the compacted log, with the offsets they get.

    * segments 0-2: 30 general keys ``g00``..``g29``, plus ``spike-a``, written once
      with the newest timestamp of its segments (early in the segment, so only the
      time index records it);
    * segments 3-5: hot keys ``h0``..``h4`` only, every one overwritten again later
      (so cleaning this group leaves nothing);
    * segments 6-8: ``spike-c``, the hot keys again, tombstones for ``g25``..``g29``,
      new values for ``g00``..``g09``.
    """
    segments: list[list[list[KeyedRecord]]] = []
    offset = 0
    for segment_no in range(COMPACT_SEGMENTS):
        batches = []
        for batch_no in range(COMPACT_BATCHES_PER_SEGMENT):
            records = []
            for i in range(3):
                timestamp = BASE_TIMESTAMP + offset * 10
                value: bytes | None
                if segment_no < 3:
                    key = f"g{(offset * 7) % 30:02d}"
                    if segment_no == 0 and batch_no == 0 and i == 0:
                        key, timestamp = "spike-a", FIXED_NOW_MS - 2
                elif segment_no < 6:
                    key = f"h{offset % 5}"
                else:
                    key = f"h{offset % 5}"
                    if segment_no == 6 and batch_no == 0 and i == 0:
                        key, timestamp = "spike-c", FIXED_NOW_MS - 1
                    elif segment_no == 7 and batch_no < 5 and i == 0:
                        key = f"g{25 + batch_no}"
                    elif segment_no == 8 and i < 2:
                        key = f"g{(batch_no * 2 + i) % 10:02d}"
                value = f"{key}={offset}:".encode().ljust(COMPACT_VALUE_LENGTH, b".")
                if segment_no == 7 and batch_no < 5 and i == 0:
                    value = None  # tombstone
                records.append(KeyedRecord(offset, key.encode(), value, timestamp))
                offset += 1
            batches.append(records)
        segments.append(batches)
    return segments


def compact_records() -> list[KeyedRecord]:
    return [r for segment in compact_layout() for batch in segment for r in batch]


def latest_per_key(records: Iterable[KeyedRecord]) -> dict[bytes, KeyedRecord]:
    latest: dict[bytes, KeyedRecord] = {}
    for record in records:
        latest[record.key] = record
    return latest


def build_compacted_log(directory: Path) -> PartitionLog:
    """The compacted log of :func:`compact_layout`, every segment rolled, the high
    watermark at the log end and everything flushed: all but the (empty) active
    segment is cleanable."""
    log = PartitionLog.open(directory, compact_config(), clock=fixed_clock)
    for segment in compact_layout():
        for batch in segment:
            builder = BatchBuilder()
            for record in batch:
                builder.append(record.value, key=record.key, timestamp=record.timestamp)
            info = log.append_as_leader(builder.build(), LEADER_EPOCH)
            assert info.first_offset == batch[0].offset
        log.roll()
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    return log
