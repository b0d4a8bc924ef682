"""A coordinator's shard log in memory (the :class:`strand.coordination.shard_log.ShardLog`
interface), for the coordinators' unit tests: appends can be made to fail."""

from __future__ import annotations

from collections.abc import Sequence

from strand.coordination.shard_log import Record
from strand.errors import NotEnoughReplicasError


class MemoryLog:
    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []
        self.fail_next = False

    async def append(self, records: Sequence[Record], *, hold_s: float = 0.0) -> None:
        if self.fail_next:
            self.fail_next = False
            raise NotEnoughReplicasError("ISR too small")
        self.records.extend((r.key, r.value) for r in records)

    async def read_all(self) -> list[tuple[bytes, bytes | None]]:
        return list(self.records)
