"""What a partition directory holds on disk, checked from outside the log: every
``.log`` segment must be whole, valid batches end to end (no torn tail)."""

from __future__ import annotations

from pathlib import Path

from strand.errors import CorruptRecordError
from strand.log.files import LOG_SUFFIX
from strand.records.batch import split_batches


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
