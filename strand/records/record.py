"""A decoded record: what a consumer sees."""

from __future__ import annotations

from dataclasses import dataclass, field

Header = tuple[str, bytes | None]


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)
