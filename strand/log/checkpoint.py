"""The partition's offset checkpoint: log start offset, high watermark, recovery point,
and how far the cleaner has compacted. One small text file, replaced atomically::

    version 0
    log_start_offset 0
    high_watermark 1200
    recovery_point 1000
    cleaner_offset 0
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path

from strand.errors import StorageError
from strand.log.files import atomic_write

CHECKPOINT_FILE = "offsets-checkpoint"
CLEAN_SHUTDOWN_FILE = ".clean-shutdown"
_VERSION = 0


@dataclass(slots=True)
class OffsetCheckpoint:
    log_start_offset: int = 0
    high_watermark: int = 0
    recovery_point: int = 0
    cleaner_offset: int = 0

    @classmethod
    def load(cls, directory: Path) -> OffsetCheckpoint:
        path = directory / CHECKPOINT_FILE
        if not path.exists():
            return cls()
        values: dict[str, int] = {}
        try:
            for line in path.read_text().splitlines():
                if line.strip():
                    name, value = line.split()
                    values[name] = int(value)
        except ValueError as exc:
            raise StorageError(f"{path}: malformed offsets checkpoint: {exc}") from exc
        if values.pop("version", None) != _VERSION:
            raise StorageError(f"{path}: missing or unsupported version")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})

    def save(self, directory: Path) -> None:
        lines = [f"version {_VERSION}"] + [f"{k} {v}" for k, v in asdict(self).items()]
        atomic_write(directory / CHECKPOINT_FILE, ("\n".join(lines) + "\n").encode())
