"""`make run` today: the storage engine doing its job in a scratch directory.

Appends compressed batches, reads them back, rolls segments, compacts a keyed
topic, then tears the tail of the log as a crash would and shows recovery.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from strand.log import LogConfig, PartitionLog
from strand.log.cleaner import LogCleaner
from strand.records import BatchBuilder, Compression, iter_record_batches


def _batch(values: Sequence[tuple[bytes, bytes | None]], compression: Compression) -> bytes:
    builder = BatchBuilder(compression=compression)
    for key, value in values:
        builder.append(value, key=key)
    return builder.build()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="    log: %(message)s")
    root = Path(tempfile.mkdtemp(prefix="strand-demo-"))
    print(f"Strand log engine demo in {root}\n")

    path = root / "orders-0"
    log = PartitionLog.open(path, LogConfig(segment_bytes=16 * 1024))
    for i, codec in enumerate([Compression.NONE, Compression.GZIP, Compression.SNAPPY,
                               Compression.LZ4, Compression.ZSTD] * 40):
        batch = [(f"customer-{j % 7}".encode(), f"order {i}-{j} ".encode() * 8)
                 for j in range(10)]
        log.append_as_leader(_batch(batch, codec), leader_epoch=0)
    print(f"appended 200 batches (5 codecs): offsets {log.log_start_offset}.."
          f"{log.log_end_offset - 1} in {len(log.segments)} segments, "
          f"{log.size_in_bytes:,} bytes")
    data = log.read(1234, max_bytes=4096)
    first = next(iter_record_batches(data))
    record = next(r for r in first.records() if r.offset == 1234)
    print(f"read offset 1234 -> key={record.key!r} value={(record.value or b'')[:24]!r}... "
          f"(batch codec {first.header.compression.name.lower()})")
    log.close()

    compacted = PartitionLog.open(
        root / "customers-0",
        LogConfig(segment_bytes=8 * 1024, cleanup_policy=("compact",)),
    )
    for i in range(300):
        compacted.append_as_leader(
            _batch([(f"customer-{i % 10}".encode(), f"address v{i}".encode())],
                   Compression.NONE), leader_epoch=0)
    compacted.roll()
    compacted.update_high_watermark(compacted.log_end_offset)
    before = compacted.size_in_bytes
    result = LogCleaner().clean(compacted, now_ms=0)
    assert result is not None
    print(f"compacted a keyed topic: {before:,} -> {compacted.size_in_bytes:,} bytes, "
          f"{result.records_removed} superseded records removed, latest value per key kept")
    compacted.close()

    log = PartitionLog.open(path, LogConfig(segment_bytes=16 * 1024))
    end_before = log.log_end_offset
    last = log.active_segment.log_path
    log.close()
    (path / ".clean-shutdown").unlink()  # as if the process had been killed
    with open(last, "r+b") as f:
        f.truncate(os.path.getsize(last) - 100)  # a torn final batch
    log = PartitionLog.open(path, LogConfig(segment_bytes=16 * 1024))
    print(f"tore the last 100 bytes off, reopened: log end offset {end_before} -> "
          f"{log.log_end_offset} (the torn batch is gone, everything before it intact)")
    log.close()
    print(f"\nNext: make test (the whole suite), make bench (throughput JSON). Files: {root}")


if __name__ == "__main__":
    main()
