"""What a partition directory holds on disk, checked from outside the log: every
``.log`` segment must be whole, valid batches end to end (no torn tail)."""

from __future__ import annotations

from pathlib import Path

from strand.errors import CorruptRecordError
from strand.log.files import LOG_SUFFIX
from strand.records.batch import split_batches
from strand.records.reader import RecordBatch


def torn_segments(data_dir: Path) -> list[str]:
    """Each ``.log`` file under ``data_dir`` (any depth) that is not valid batches end to
    end, with the reason; empty when all are whole."""
    problems = []
    for path in sorted(data_dir.rglob(f"*{LOG_SUFFIX}")):
        try:
            split_batches(path.read_bytes())
        except CorruptRecordError as exc:
            problems.append(f"{path.relative_to(data_dir)}: {exc}")
    return problems


def values_on_disk(partition_dir: Path) -> list[bytes | None]:
    """The record values of a partition directory's segments, in offset order, read
    from the files (a live node's log is not opened: that would change it)."""
    values: list[bytes | None] = []
    for path in sorted(partition_dir.glob(f"*{LOG_SUFFIX}")):
        data = path.read_bytes()
        for position, header in split_batches(data):
            batch = RecordBatch(data[position:position + header.size_in_bytes])
            values.extend(record.value for record in batch.records())
    return values
