"""Helpers shared by the log tests (the clock is tests.support.clock's)."""

from __future__ import annotations

from collections.abc import Sequence

from strand.log import PartitionLog
from strand.records import BatchBuilder, Compression, Record, RecordBatch, iter_record_batches


def make_batch(
    values: Sequence[bytes | None],
    *,
    keys: Sequence[bytes | None] | None = None,
    timestamp: int = 1_700_000_000_000,
    compression: Compression = Compression.NONE,
) -> bytes:
    builder = BatchBuilder(compression=compression)
    for i, value in enumerate(values):
        builder.append(value, key=None if keys is None else keys[i], timestamp=timestamp)
    return builder.build()


def read_all(log: PartitionLog, max_bytes: int = 1 << 20) -> list[Record]:
    out: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes)
        if not data:
            break
        for batch in iter_record_batches(data):
            out.extend(r for r in batch.records() if r.offset >= offset)
            offset = batch.header.next_offset
    return out


def read_batches(log: PartitionLog) -> list[RecordBatch]:
    """Every batch of the log; a read serves one segment at a time, so loop."""
    out: list[RecordBatch] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        batches = list(iter_record_batches(log.read(offset, 1 << 30)))
        if not batches:
            break
        out.extend(batches)
        offset = batches[-1].header.next_offset
    return out
