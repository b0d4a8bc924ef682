"""Throughput and latency benchmark of Strand's partition log.

Measures, in one run:

1. Sequential append and read throughput of :class:`PartitionLog` for 16 KiB,
   256 KiB and 1 MiB batches of 1 KiB records, beside plain sequential file
   writes and reads of the very same bytes in the same directory (the ceiling a
   log can reach through Python's file API).
2. Random-offset read latency on a small (~10 MiB) and a large (~2 GiB) log, to
   check that a read costs the same however long the log is.
3. The build rate of :class:`BatchBuilder` (records per second).

Everything stays in the page cache, as the log does by default (nothing is
fsynced, nothing is dropped from the cache). An untimed ``os.sync()`` before
each write phase lets it start with no dirty-page backlog from the one before.
The log and its raw-file baseline are measured in alternating rounds, and the
two logs of the latency test are read interleaved, so that the machine's noise
weighs on both sides of each comparison alike. Throughputs are in MB/s with
MB = 10**6 bytes; latencies in microseconds.

Run: ``python bench/log_bench.py --json`` (``--quick`` for a smoke run).
Progress goes to stderr; stdout gets one JSON object (``--json``) or a summary.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strand.log import LogConfig, PartitionLog
from strand.records import BatchBuilder, read_header

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
MB = 1_000_000  # throughput unit

RECORD_VALUE_BYTES = KIB
THROUGHPUT_BATCH_SIZES = (16 * KIB, 256 * KIB, MIB)
LATENCY_BATCH_BYTES = 16 * KIB
LATENCY_MAX_BYTES = 16384
CODEC_RECORD_SIZES = (100, KIB)
CODEC_BATCH_BYTES = 16 * KIB
POOL_MAX_BYTES = 32 * MIB  # distinct batches built up front per size; appended in turn
WARMUP_MAX_BYTES = 8 * MIB

REPO_ROOT = Path(__file__).resolve().parent.parent

# Targets (checked and reported, never enforced).
TARGET_APPEND_VS_RAW_1MIB = 0.5
TARGET_APPEND_VS_RAW_16KIB = 0.25
TARGET_P99_RATIO = 2.0


def info(message: str) -> None:
    print(f"[log_bench] {message}", file=sys.stderr, flush=True)


def size_label(size: int) -> str:
    if size % MIB == 0:
        return f"{size // MIB}MiB"
    if size % KIB == 0:
        return f"{size // KIB}KiB"
    return f"{size}B"


def mb_per_s(nbytes: int, ns: int) -> float:
    return nbytes / MB / (ns / 1e9) if ns > 0 else math.inf


# -- batches --------------------------------------------------------------------------------


class ValueSource:
    """Random-ish record values: slices of one random blob at random offsets."""

    def __init__(self, rng: random.Random, value_size: int) -> None:
        self._rng = rng
        self._size = value_size
        self._blob = rng.randbytes(MIB + value_size)

    def next(self) -> bytes:
        start = self._rng.randrange(MIB)
        return self._blob[start : start + self._size]


def records_fitting(nominal: int, value_size: int, timestamp: int) -> int:
    """How many records of ``value_size`` bytes fit in an uncompressed batch of at most
    ``nominal`` bytes (at least one)."""
    builder = BatchBuilder()
    value = bytes(value_size)
    count = 0
    while True:
        builder.append(value, timestamp=timestamp)
        if builder.uncompressed_size > nominal:
            return max(1, count)
        count += 1


def build_batch(values: ValueSource, count: int, timestamp: int) -> bytes:
    builder = BatchBuilder()
    for _ in range(count):
        builder.append(values.next(), timestamp=timestamp)
    return builder.build()


@dataclass(frozen=True)
class BatchPool:
    nominal: int
    records_per_batch: int
    batches: list[bytes]

    @property
    def batch_bytes(self) -> int:
        """Size of every batch of the pool (all hold the same number of same-size records)."""
        return len(self.batches[0])

    def cycle(self, count: int) -> list[bytes]:
        """``count`` batches taken from the pool in turn (references, not copies)."""
        pool = self.batches
        return [pool[i % len(pool)] for i in range(count)]


def make_pool(nominal: int, value_size: int, max_bytes: int, rng: random.Random) -> BatchPool:
    timestamp = time.time_ns() // 1_000_000
    per_batch = records_fitting(nominal, value_size, timestamp)
    values = ValueSource(rng, value_size)
    first = build_batch(values, per_batch, timestamp)
    count = max(1, min(max_bytes, POOL_MAX_BYTES) // len(first))
    batches = [first] + [build_batch(values, per_batch, timestamp) for _ in range(count - 1)]
    sizes = {len(b) for b in batches}
    if len(sizes) != 1:
        raise RuntimeError(f"batches of one pool differ in size: {sorted(sizes)}")
    return BatchPool(nominal, per_batch, batches)


# -- sequential throughput ------------------------------------------------------------------
#
# The raw file and the log are written (and then read) in alternating rounds, ABBA order,
# so that whatever the machine does meanwhile (page allocation, a VM host reclaiming or
# backing guest memory, another tenant) weighs on both alike. Each side's time is the
# sum of its rounds.


def raw_write(write: Callable[[bytes], int | None], batches: Sequence[bytes]) -> int:
    """Write ``batches`` through ``write`` (an unbuffered file's); returns ns spent."""
    start = time.perf_counter_ns()
    for batch in batches:
        if write(batch) != len(batch):
            raise RuntimeError("short write")
    return time.perf_counter_ns() - start


def log_append(plog: PartitionLog, batches: Sequence[bytes]) -> int:
    """Append ``batches`` to ``plog`` as the leader; returns ns spent."""
    append = plog.append_as_leader
    start = time.perf_counter_ns()
    for batch in batches:
        append(batch, leader_epoch=0)
    return time.perf_counter_ns() - start


def raw_read(read: Callable[[int], bytes | None], nbytes: int, chunk: int) -> tuple[int, int]:
    """Read ``nbytes`` in ``chunk``-byte reads (the last one shorter) from the current
    position; (bytes, ns)."""
    total = 0
    start = time.perf_counter_ns()
    while total < nbytes:
        data = read(min(chunk, nbytes - total))
        if not data:
            raise RuntimeError(f"the raw file ended {nbytes - total} bytes early")
        total += len(data)
    return total, time.perf_counter_ns() - start


def log_read(plog: PartitionLog, offset: int, nbytes: int,
             max_bytes: int) -> tuple[int, int, int, int]:
    """Read sequentially from ``offset`` until ``nbytes`` are returned or the log ends,
    ``max_bytes`` per read; (next offset, bytes, batches, ns)."""
    read = plog.read
    end_offset = plog.log_end_offset
    total = batches = 0
    start = time.perf_counter_ns()
    while total < nbytes and offset < end_offset:
        data = read(offset, max_bytes)
        size = len(data)
        if not size:
            raise RuntimeError(f"empty read at offset {offset} (log end {end_offset})")
        pos = 0
        while True:  # find the last batch returned: its header gives the next offset
            header = read_header(data, pos)
            batches += 1
            following = pos + header.size_in_bytes
            if following >= size:
                break
            pos = following
        offset = header.next_offset
        total += size
    return offset, total, batches, time.perf_counter_ns() - start


def warm_page_cache(plog: PartitionLog) -> None:
    """Untimed: read every segment file of ``plog`` once, sequentially."""
    for segment in plog.segments:
        with open(segment.log_path, "rb", buffering=0) as f:
            while f.read(1 << 20):
                pass


def sync_disks() -> None:
    """Untimed: write back dirty pages so the next write phase starts without a backlog."""
    os.sync()


def measure_throughput(
    pool: BatchPool, total_bytes: int, rounds: int, workdir: Path
) -> dict[str, Any]:
    batch_bytes = pool.batch_bytes
    count = max(1, round(total_bytes / batch_bytes))
    rounds = max(1, min(rounds, count))
    warm_count = max(1, min(WARMUP_MAX_BYTES, total_bytes // 16) // batch_bytes)
    batches = pool.cycle(warm_count + count)
    warmup, timed = batches[:warm_count], batches[warm_count:]
    bounds = [count * r // rounds for r in range(rounds + 1)]
    chunks = [timed[bounds[r] : bounds[r + 1]] for r in range(rounds)]
    timed_bytes = batch_bytes * count
    warm_bytes = batch_bytes * warm_count
    label = size_label(pool.nominal)
    raw_path = workdir / f"raw-{label}.bin"
    chunk_read = pool.nominal

    sync_disks()
    info(f"{label}: writing {count} x {batch_bytes} B to a raw file and to the log "
         f"in {rounds} alternating rounds")
    plog = PartitionLog.open(workdir / f"log-{label}", LogConfig())
    try:
        raw_write_ns = append_ns = 0
        with open(raw_path, "wb", buffering=0) as raw_file:
            raw_write(raw_file.write, warmup)
            log_append(plog, warmup)
            for r, chunk in enumerate(chunks):
                if r % 4 in (0, 3):
                    raw_write_ns += raw_write(raw_file.write, chunk)
                    append_ns += log_append(plog, chunk)
                else:
                    append_ns += log_append(plog, chunk)
                    raw_write_ns += raw_write(raw_file.write, chunk)
        if plog.log_end_offset != (warm_count + count) * pool.records_per_batch:
            raise RuntimeError(f"log end offset {plog.log_end_offset} is not what was appended")

        info(f"{label}: reading both back in {rounds} alternating rounds")
        raw_read_ns = read_ns = raw_read_bytes = read_bytes = read_batches = 0
        with open(raw_path, "rb", buffering=0) as raw_file:
            raw_read(raw_file.read, warm_bytes, chunk_read)  # warm-up
            offset, *_ = log_read(plog, 0, warm_bytes, chunk_read)  # warm-up
            for r in range(rounds):
                nbytes = (bounds[r + 1] - bounds[r]) * batch_bytes
                for side in ("raw", "log") if r % 4 in (0, 3) else ("log", "raw"):
                    if side == "raw":
                        got, ns = raw_read(raw_file.read, nbytes, chunk_read)
                        raw_read_bytes += got
                        raw_read_ns += ns
                    else:
                        offset, got, n, ns = log_read(plog, offset, nbytes, chunk_read)
                        read_bytes += got
                        read_batches += n
                        read_ns += ns
        if read_bytes != timed_bytes or read_batches != count or raw_read_bytes != timed_bytes:
            raise RuntimeError(
                f"read back {read_bytes} B in {read_batches} batches from the log and "
                f"{raw_read_bytes} B from the raw file; {timed_bytes} B in {count} were written")
        segments = len(plog.segments)
    finally:
        plog.delete()  # no flush: nothing of the log is fsynced
        raw_path.unlink(missing_ok=True)

    append_mb_s = mb_per_s(timed_bytes, append_ns)
    raw_write_mb_s = mb_per_s(timed_bytes, raw_write_ns)
    read_mb_s = mb_per_s(read_bytes, read_ns)
    raw_read_mb_s = mb_per_s(raw_read_bytes, raw_read_ns)
    result = {
        "batch_nominal_bytes": pool.nominal,
        "batch_bytes": batch_bytes,
        "records_per_batch": pool.records_per_batch,
        "record_value_bytes": RECORD_VALUE_BYTES,
        "distinct_batches": len(pool.batches),
        "batches": count,
        "warmup_batches": warm_count,
        "rounds": rounds,
        "total_bytes": timed_bytes,
        "segments": segments,
        "read_max_bytes": chunk_read,
        "append_mb_s": round(append_mb_s, 1),
        "raw_write_mb_s": round(raw_write_mb_s, 1),
        "append_vs_raw": round(append_mb_s / raw_write_mb_s, 3),
        "append_us_per_batch": round(append_ns / count / 1e3, 2),
        "raw_write_us_per_batch": round(raw_write_ns / count / 1e3, 2),
        "read_mb_s": round(read_mb_s, 1),
        "raw_read_mb_s": round(raw_read_mb_s, 1),
        "read_vs_raw": round(read_mb_s / raw_read_mb_s, 3),
        "read_us_per_batch": round(read_ns / read_batches / 1e3, 2),
    }
    info(f"{label}: append {result['append_mb_s']} MB/s vs raw {result['raw_write_mb_s']} "
         f"({result['append_vs_raw']}); read {result['read_mb_s']} MB/s vs raw "
         f"{result['raw_read_mb_s']}")
    return result


# -- random-offset read latency -------------------------------------------------------------
#
# Both logs are built first, then read in alternating blocks (see time_random_reads),
# with a baseline of plain ``os.pread`` calls of the same size at random positions of
# the same segment files: it shows how much of a tail comes from the kernel's page
# cache (or the VM under it) rather than from Strand.


def fill_log(plog: PartitionLog, pool: BatchPool, target_bytes: int, label: str) -> int:
    """Append pool batches until the log holds ``target_bytes``; returns ns spent."""
    count = max(1, math.ceil(target_bytes / pool.batch_bytes))
    append = plog.append_as_leader
    batches = pool.batches
    report_every = max(1, count // 4)
    start = time.perf_counter_ns()
    for i in range(count):
        append(batches[i % len(batches)], leader_epoch=0)
        if (i + 1) % report_every == 0 and count >= 4 * 1024:
            info(f"{label} log: {(i + 1) * pool.batch_bytes / MB:,.0f} MB appended")
    return time.perf_counter_ns() - start


def percentile(sorted_values: Sequence[int], q: float) -> int:
    """Nearest-rank percentile of already sorted values."""
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


class SegmentFiles:
    """The ``.log`` files of a log opened read-only, for the raw ``pread`` baseline."""

    def __init__(self, plog: PartitionLog) -> None:
        self.fds = [os.open(segment.log_path, os.O_RDONLY) for segment in plog.segments]
        self.sizes = [os.fstat(fd).st_size for fd in self.fds]
        self.total = sum(self.sizes)

    def random_position(self, rng: random.Random, length: int) -> tuple[int, int]:
        """(fd, position) of a uniformly random ``length``-byte read inside one file."""
        point = rng.randrange(self.total)
        for fd, size in zip(self.fds, self.sizes, strict=True):
            if point < size:
                return fd, max(0, min(point, size - length))
            point -= size
        raise AssertionError("unreachable")

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)


@dataclass(frozen=True)
class LatencySamples:
    strand: list[int]  # ns per PartitionLog.read
    raw: list[int]  # ns per os.pread of the same size


def time_random_reads(
    logs: Sequence[PartitionLog], reads: int, blocks: int, rng: random.Random
) -> list[LatencySamples]:
    """``reads`` Strand reads of each log at uniformly random offsets and as many raw
    ``pread`` calls of ``LATENCY_MAX_BYTES`` at random positions of its files; per log,
    the latency of each call in ns.

    The calls of each kind (log x Strand/raw) run back to back in ``blocks`` blocks, and
    the blocks of the kinds take turns in a shuffled order each round: a read of one log
    never sits between reads of another (which would share their cache misses), while
    a disturbance of the machine lasting a while is spread over every kind.
    """
    files = [SegmentFiles(plog) for plog in logs]
    try:
        kinds = [(i, raw) for i in range(len(logs)) for raw in (False, True)]
        blocks = max(1, min(blocks, reads))
        bounds = [reads * b // blocks for b in range(blocks + 1)]
        warmup = max(100, reads // 10)
        samples: dict[tuple[int, bool], list[int]] = {kind: [] for kind in kinds}
        order: list[tuple[int, bool, int]] = [(i, raw, -warmup) for i, raw in kinds]
        for b in range(blocks):
            round_kinds = list(kinds)
            rng.shuffle(round_kinds)
            order += [(i, raw, bounds[b + 1] - bounds[b]) for i, raw in round_kinds]
        for i, raw, count in order:  # a negative count: warm-up calls, not recorded
            out = samples[(i, raw)] if count > 0 else []
            if raw:
                positions = [files[i].random_position(rng, LATENCY_MAX_BYTES)
                             for _ in range(abs(count))]
                _time_preads(positions, out)
            else:
                plog = logs[i]
                offsets = [rng.randrange(plog.log_start_offset, plog.log_end_offset)
                           for _ in range(abs(count))]
                _time_log_reads(plog, offsets, out)
    finally:
        for f in files:
            f.close()
    return [LatencySamples(samples[(i, False)], samples[(i, True)]) for i in range(len(logs))]


def _time_log_reads(plog: PartitionLog, offsets: list[int], out: list[int]) -> None:
    read = plog.read
    clock = time.perf_counter_ns
    record = out.append
    for offset in offsets:
        t0 = clock()
        data = read(offset, LATENCY_MAX_BYTES)
        record(clock() - t0)
        if not data:
            raise RuntimeError(f"empty read at offset {offset}")


def _time_preads(positions: list[tuple[int, int]], out: list[int]) -> None:
    pread = os.pread
    clock = time.perf_counter_ns
    record = out.append
    for fd, position in positions:
        t0 = clock()
        data = pread(fd, LATENCY_MAX_BYTES, position)
        record(clock() - t0)
        if not data:
            raise RuntimeError(f"empty pread at {position}")


def median_block_p99_us(samples: list[int], blocks: int) -> float:
    """The median over blocks of each block's p99 (samples are recorded block by block).

    Reported beside the pooled p99: a disturbance of the machine during one block
    shows in the pooled p99 but not here, so the two together tell noise from cost.
    """
    count = len(samples)
    blocks = max(1, min(blocks, count))
    bounds = [count * b // blocks for b in range(blocks + 1)]
    p99s = sorted(percentile(sorted(samples[bounds[b]:bounds[b + 1]]), 0.99)
                  for b in range(blocks))
    return round(p99s[len(p99s) // 2] / 1e3, 2)


def latency_summary(samples: list[int], prefix: str = "") -> dict[str, float]:
    ordered = sorted(samples)
    return {
        f"{prefix}p50_us": round(percentile(ordered, 0.50) / 1e3, 2),
        f"{prefix}p90_us": round(percentile(ordered, 0.90) / 1e3, 2),
        f"{prefix}p99_us": round(percentile(ordered, 0.99) / 1e3, 2),
        f"{prefix}p999_us": round(percentile(ordered, 0.999) / 1e3, 2),
        f"{prefix}max_us": round(ordered[-1] / 1e3, 2),
        f"{prefix}mean_us": round(sum(ordered) / len(ordered) / 1e3, 2),
    }


def measure_random_reads(
    pool: BatchPool, sizes: dict[str, int], reads: int, blocks: int, workdir: Path, seed: int
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    logs: list[PartitionLog] = []
    try:
        for name, target in sizes.items():
            sync_disks()
            info(f"random reads: building the {name} log ({target / MB:,.0f} MB)")
            plog = PartitionLog.open(workdir / f"latency-{name}", LogConfig())
            logs.append(plog)
            build_ns = fill_log(plog, pool, target, name)
            results[name] = {
                "log_bytes": plog.size_in_bytes,
                "segments": len(plog.segments),
                "log_end_offset": plog.log_end_offset,
                "reads": reads,
                "build_append_mb_s": round(mb_per_s(plog.size_in_bytes, build_ns), 1),
            }
        # Untimed: without these the reads race the writeback of the log just built
        # (gigabytes of dirty pages), and on this VM a cached page left untouched for a
        # while costs 20-90 us on its next touch (host-side memory handling; a plain
        # pread shows it too). One sequential pass makes both logs as warm as a broker's
        # hot data, so the comparison measures the lookup, not the hypervisor.
        sync_disks()
        for plog in logs:
            warm_page_cache(plog)
        info(f"random reads: {reads} reads of each log and {reads} raw preads of its "
             f"files, in {blocks} alternating blocks")
        samples = time_random_reads(logs, reads, blocks, random.Random(seed))
    finally:
        for plog in logs:
            plog.delete()
    for name, log_samples in zip(sizes, samples, strict=True):
        row = results[name]
        row.update(latency_summary(log_samples.strand))
        row.update(latency_summary(log_samples.raw, "raw_pread_"))
        row["p99_median_of_blocks_us"] = median_block_p99_us(log_samples.strand, blocks)
        row["raw_pread_p99_median_of_blocks_us"] = median_block_p99_us(log_samples.raw, blocks)
        info(f"random reads on the {name} log: p50 {row['p50_us']} us, p99 {row['p99_us']} us "
             f"(raw pread p50 {row['raw_pread_p50_us']} us, p99 {row['raw_pread_p99_us']} us)")
    large, small = results["large"], results["small"]
    results["p99_ratio_large_vs_small"] = round(large["p99_us"] / small["p99_us"], 3)
    results["p50_ratio_large_vs_small"] = round(large["p50_us"] / small["p50_us"], 3)
    results["raw_pread_p99_ratio_large_vs_small"] = round(
        large["raw_pread_p99_us"] / small["raw_pread_p99_us"], 3)
    results["p99_median_of_blocks_ratio_large_vs_small"] = round(
        large["p99_median_of_blocks_us"] / small["p99_median_of_blocks_us"], 3)
    results["raw_pread_p99_median_of_blocks_ratio_large_vs_small"] = round(
        large["raw_pread_p99_median_of_blocks_us"] / small["raw_pread_p99_median_of_blocks_us"],
        3)
    results["max_bytes"] = LATENCY_MAX_BYTES
    results["batch_bytes"] = pool.batch_bytes
    results["records_per_batch"] = pool.records_per_batch
    return results


# -- codec build rate -----------------------------------------------------------------------


def measure_build_rate(value_size: int, seconds: float, rng: random.Random) -> dict[str, Any]:
    timestamp = time.time_ns() // 1_000_000
    per_batch = records_fitting(CODEC_BATCH_BYTES, value_size, timestamp)
    source = ValueSource(rng, value_size)
    values = [source.next() for _ in range(per_batch)]

    def build_one() -> int:
        builder = BatchBuilder()
        append = builder.append
        for value in values:
            append(value)  # no key, no headers, the clock read per record as a producer does
        return len(builder.build())

    for _ in range(20):  # warm-up
        build_one()
    batches = built_bytes = 0
    deadline = seconds * 1e9
    start = time.perf_counter_ns()
    elapsed = 0
    while elapsed < deadline:
        built_bytes += build_one()
        batches += 1
        elapsed = time.perf_counter_ns() - start
    records = batches * per_batch
    return {
        "record_value_bytes": value_size,
        "records_per_batch": per_batch,
        "batch_bytes": built_bytes // batches,
        "batches": batches,
        "seconds": round(elapsed / 1e9, 3),
        "records_per_s": round(records / (elapsed / 1e9)),
        "mb_s": round(mb_per_s(built_bytes, elapsed), 1),
    }


# -- driver ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Params:
    total_bytes: int
    rounds: int
    small_log_bytes: int
    large_log_bytes: int
    reads: int
    read_blocks: int
    codec_seconds: float
    seed: int
    quick: bool
    parent_dir: str

    def as_json(self) -> dict[str, Any]:
        return {
            "quick": self.quick,
            "total_bytes_per_size": self.total_bytes,
            "rounds": self.rounds,
            "batch_sizes": list(THROUGHPUT_BATCH_SIZES),
            "record_value_bytes": RECORD_VALUE_BYTES,
            "compression": "none",
            "small_log_bytes": self.small_log_bytes,
            "large_log_bytes": self.large_log_bytes,
            "segment_bytes": LogConfig().segment_bytes,
            "latency_batch_nominal_bytes": LATENCY_BATCH_BYTES,
            "random_reads": self.reads,
            "random_read_blocks": self.read_blocks,
            "codec_seconds": self.codec_seconds,
            "codec_batch_nominal_bytes": CODEC_BATCH_BYTES,
            "seed": self.seed,
            "fsync": False,
            "sync_before_write_phases": True,
            "parent_dir": self.parent_dir,
        }


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, Params]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object to stdout")
    parser.add_argument("--quick", action="store_true",
                        help="shrink everything for a smoke run (well under a minute)")
    parser.add_argument("--total-mb", type=float, default=None,
                        help="MiB appended (and read) per batch size (default 512, quick 32)")
    parser.add_argument("--rounds", type=int, default=64,
                        help="alternating raw/log rounds the bytes of each size are split in")
    parser.add_argument("--small-mb", type=float, default=10.0,
                        help="MiB in the small log of the random-read test (default 10)")
    parser.add_argument("--large-gb", type=float, default=None,
                        help="GiB in the large log of the random-read test (default 2, quick 0.2)")
    parser.add_argument("--reads", type=int, default=None,
                        help="random reads per log (default 20000, quick 2000)")
    parser.add_argument("--read-blocks", type=int, default=10,
                        help="alternating blocks the random reads of each log are split in")
    parser.add_argument("--codec-seconds", type=float, default=None,
                        help="seconds per codec build-rate measurement (default 1, quick 0.2)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--dir", default=None,
                        help="parent of the temporary directory (default: the system temp dir)")
    parser.add_argument("--output", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    quick = bool(args.quick)
    total_mb = args.total_mb if args.total_mb is not None else (32.0 if quick else 512.0)
    large_gb = args.large_gb if args.large_gb is not None else (0.2 if quick else 2.0)
    reads = args.reads if args.reads is not None else (2000 if quick else 20000)
    codec_seconds = (args.codec_seconds if args.codec_seconds is not None
                     else (0.2 if quick else 1.0))
    if total_mb <= 0 or args.small_mb <= 0 or large_gb <= 0 or reads <= 0 or codec_seconds <= 0 \
            or args.rounds <= 0 or args.read_blocks <= 0:
        parser.error("sizes, reads and seconds must be positive")
    parent = args.dir if args.dir is not None else tempfile.gettempdir()
    params = Params(
        total_bytes=int(total_mb * MIB),
        rounds=args.rounds,
        small_log_bytes=int(args.small_mb * MIB),
        large_log_bytes=int(large_gb * GIB),
        reads=reads,
        read_blocks=args.read_blocks,
        codec_seconds=codec_seconds,
        seed=args.seed,
        quick=quick,
        parent_dir=str(Path(parent).resolve()),
    )
    return args, params


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine_facts(parent: Path) -> dict[str, Any]:
    usage = shutil.disk_usage(parent)
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "disk_free_bytes": usage.free,
        "same_device_as_repo": os.stat(parent).st_dev == os.stat(REPO_ROOT).st_dev,
    }


def check_space(parent: Path, params: Params) -> None:
    warm = min(WARMUP_MAX_BYTES, params.total_bytes // 16)
    throughput = 2 * (params.total_bytes + warm + MIB)  # the log and the raw file at once
    latency = params.large_log_bytes + LATENCY_BATCH_BYTES
    needed = int(max(throughput, latency) * 1.05) + 64 * MIB
    free = shutil.disk_usage(parent).free
    if free < needed:
        raise SystemExit(
            f"log_bench: {parent} has {free / MB:,.0f} MB free, the run needs ~{needed / MB:,.0f}")


def run(params: Params) -> dict[str, Any]:
    parent = Path(params.parent_dir)
    check_space(parent, params)
    facts = machine_facts(parent)
    if not facts["same_device_as_repo"]:
        info(f"warning: {parent} is not on the repository's device")
    rng = random.Random(params.seed)
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="strand-log-bench-", dir=parent))
    info(f"working in {workdir}")
    try:
        info("building batches")
        pools = {
            size: make_pool(size, RECORD_VALUE_BYTES, params.total_bytes, rng)
            for size in THROUGHPUT_BATCH_SIZES
        }
        latency_pool = pools[LATENCY_BATCH_BYTES]
        gc.collect()
        gc.freeze()  # the pools are long-lived: keep them out of every collection

        throughput = {
            size_label(size): measure_throughput(
                pool, params.total_bytes, params.rounds, workdir)
            for size, pool in pools.items()
        }
        random_read = measure_random_reads(
            latency_pool,
            {"small": params.small_log_bytes, "large": params.large_log_bytes},
            params.reads, params.read_blocks, workdir, params.seed,
        )
        info("codec build rate")
        codec = {
            size_label(size): measure_build_rate(size, params.codec_seconds, rng)
            for size in CODEC_RECORD_SIZES
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        gc.unfreeze()

    at_1mib, at_16kib = throughput[size_label(MIB)], throughput[size_label(16 * KIB)]
    targets = {
        "append_ge_0.5x_raw_at_1MiB": at_1mib["append_vs_raw"] >= TARGET_APPEND_VS_RAW_1MIB,
        "append_ge_0.25x_raw_at_16KiB": at_16kib["append_vs_raw"] >= TARGET_APPEND_VS_RAW_16KIB,
        "random_read_p99_large_le_2x_small":
            random_read["p99_ratio_large_vs_small"] <= TARGET_P99_RATIO,
    }
    targets["all_met"] = all(targets.values())
    return {
        "benchmark": "strand.log",
        "mb_unit": "1e6 bytes",
        "latency_unit": "microseconds",
        "machine": facts,
        "params": params.as_json(),
        "throughput": throughput,
        "random_read": random_read,
        "codec_build": codec,
        "targets": targets,
        "elapsed_s": round(time.perf_counter() - started, 1),
    }


def summary(result: dict[str, Any]) -> str:
    lines = [f"strand log benchmark ({result['mb_unit']} per MB), "
             f"{result['elapsed_s']} s, Python {result['machine']['python']}"]
    for label, row in result["throughput"].items():
        lines.append(
            f"  {label:>7} batches ({row['batch_bytes']} B): append {row['append_mb_s']:>8} MB/s "
            f"(raw {row['raw_write_mb_s']}, x{row['append_vs_raw']})  read "
            f"{row['read_mb_s']:>8} MB/s (raw {row['raw_read_mb_s']}, x{row['read_vs_raw']})")
    rr = result["random_read"]
    for name in ("small", "large"):
        row = rr[name]
        lines.append(f"  random read, {name} log ({row['log_bytes'] / MB:,.0f} MB, "
                     f"{row['segments']} segments): p50 {row['p50_us']} us, p99 {row['p99_us']} us"
                     f" (raw pread p50 {row['raw_pread_p50_us']} us, "
                     f"p99 {row['raw_pread_p99_us']} us)")
    lines.append(f"  p99 large/small: {rr['p99_ratio_large_vs_small']} "
                 f"(raw pread: {rr['raw_pread_p99_ratio_large_vs_small']})")
    for label, row in result["codec_build"].items():
        lines.append(f"  build {label} records: {row['records_per_s']:,} records/s "
                     f"({row['mb_s']} MB/s)")
    lines.append("  targets: " + ", ".join(f"{k}={v}" for k, v in result["targets"].items()))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None,
         emit: Callable[[str], None] = print) -> int:
    args, params = parse_args(argv)
    result = run(params)
    text = json.dumps(result, indent=2)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text + "\n")
    emit(text if args.json else summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
