"""Cost of the leader's record validation, per batch and per record, JSON on stdout.

For each record size (100 B, 1 KiB), codec (none, lz4, zstd) and batch size, it times:

* ``crc``: what the leader did before: framing, magic and CRC (``validate_batch``);
* ``validate``: the record validation added for issue 11 (``validate_producer_batch``),
  including the decompression it needs for compressed batches;
* ``decompress``: that decompression alone (the part of ``validate`` a compressed
  batch adds);
* ``decode``: Strand's full decoder (``RecordBatch.records()``, objects per record);
* ``aiokafka``: aiokafka's Cython reader alone (uncompressed batches), the part of
  ``validate`` that reads the records.

    python bench/validation_bench.py [--seconds 0.3]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable

from strand.records.batch import HEADER_SIZE, validate_batch
from strand.records.builder import BatchBuilder
from strand.records.compression import Compression, decompress_bounded
from strand.records.reader import RecordBatch
from strand.records.validation import MAX_UNCOMPRESSED_BATCH_BYTES, validate_producer_batch


def _batch(record_size: int, batch_bytes: int, codec: Compression) -> tuple[bytes, int]:
    """A producer batch of about ``batch_bytes`` uncompressed; values half random
    (compressible about 2x, like text), keys of 8 bytes, no headers."""
    rng = random.Random(record_size * 31 + batch_bytes)
    builder = BatchBuilder(compression=codec)
    timestamp = 1_700_000_000_000
    while builder.uncompressed_size < batch_bytes:
        value = rng.randbytes(record_size // 4).hex().encode()[: record_size // 2]
        value += bytes(record_size - len(value))
        builder.append(value, key=rng.randbytes(8), timestamp=timestamp + rng.randrange(5))
    return builder.build(), builder.record_count


def _time(fn: Callable[[], object], seconds: float) -> float:
    """Seconds per call: the best of 3 runs of about ``seconds / 3`` each."""
    best = float("inf")
    calls = 1
    while True:  # calibrate
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed > 0.02:
            break
        calls *= 4
    per_run = max(1, int(calls * (seconds / 3) / elapsed))
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(per_run):
            fn()
        best = min(best, (time.perf_counter() - start) / per_run)
    return best


def _measure(data: bytes, codec: Compression, seconds: float) -> dict[str, float]:
    """Seconds per batch of each step (see the module docstring)."""
    from aiokafka.record.default_records import DefaultRecordBatch

    header = validate_batch(data)
    payload = memoryview(data)[HEADER_SIZE:]
    timings = {
        "crc": _time(lambda: validate_batch(data), seconds),
        "validate": _time(lambda: validate_producer_batch(data, 0, header), seconds),
        "decode": _time(lambda: RecordBatch(data).records(), seconds),
    }
    if codec == Compression.NONE:
        timings["aiokafka"] = _time(lambda: list(DefaultRecordBatch(data)), seconds)
    else:
        timings["decompress"] = _time(
            lambda: decompress_bounded(codec, payload, MAX_UNCOMPRESSED_BATCH_BYTES), seconds)
    return timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=0.3, help="per measurement")
    args = parser.parse_args(argv)
    rows = []
    for batch_bytes in (16 << 10, 256 << 10):
        for record_size in (100, 1024):
            for codec in (Compression.NONE, Compression.LZ4, Compression.ZSTD):
                data, count = _batch(record_size, batch_bytes, codec)
                timings = _measure(data, codec, args.seconds)
                rows.append({
                    "batch_bytes": batch_bytes, "record_size": record_size,
                    "codec": codec.name.lower(), "records": count, "wire_bytes": len(data),
                    "us_per_batch": {k: round(v * 1e6, 1) for k, v in timings.items()},
                    "ns_per_record": {k: round(v * 1e9 / count) for k, v in timings.items()},
                    "mb_per_s_validate": round(count * record_size / timings["validate"] / 1e6),
                })
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(json.dumps({"python": sys.version.split()[0], "results": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
