"""A coordinator's shard: one partition of its internal compacted topic
(``__consumer_offsets`` for groups, ``__transaction_state`` for transactions),
written and read through the gateway with the SDK (a coordinator is a client of
the log like any other).

Writes use acks=all, so a change answered to a client is on every in-sync replica
of the shard's partition and survives the loss of its leader. Loading reads the
partition from its start to the high watermark. The SDK is thread based; its calls
run in the default executor, off the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from strand.client.structs import TopicPartition
from strand.consumer import Consumer
from strand.errors import RequestTimedOutError
from strand.producer import Producer

__all__ = ["LOAD_TIMEOUT_S", "GatewayShardLog", "Record", "ShardLog"]

LOAD_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a shard: a coordinator's key and value bytes."""

    key: bytes
    value: bytes | None  # None: a tombstone


class ShardLog(Protocol):
    """Partition ``shard`` of a coordinator's internal topic."""

    async def append(self, records: Sequence[Record]) -> None:
        """Write with acks=all; raise (a StrandError) if that did not happen."""

    async def read_all(self) -> list[tuple[bytes, bytes | None]]:
        """Every (key, value) from the log start to the high watermark."""


class GatewayShardLog:
    def __init__(self, producer: Producer, bootstrap: str, topic: str, shard: int) -> None:
        self.producer = producer
        self.bootstrap = bootstrap
        self.topic = topic
        self.shard = shard

    async def append(self, records: Sequence[Record]) -> None:
        futures = [self.producer.send(self.topic, value=r.value, key=r.key,
                                      partition=self.shard) for r in records]
        loop = asyncio.get_running_loop()
        # Each result() raises the record's delivery error: nothing is applied then.
        await loop.run_in_executor(None, lambda: [f.result() for f in futures])

    async def read_all(self) -> list[tuple[bytes, bytes | None]]:
        return await asyncio.get_running_loop().run_in_executor(None, self._read_all)

    def _read_all(self) -> list[tuple[bytes, bytes | None]]:
        tp = TopicPartition(self.topic, self.shard)
        out: list[tuple[bytes, bytes | None]] = []
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        with Consumer(self.bootstrap) as consumer:
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            end = consumer.end_offsets([tp])[tp]
            while consumer.position(tp) < end:
                if time.monotonic() > deadline:
                    raise RequestTimedOutError(
                        f"loading {self.topic}-{self.shard}: only up to offset "
                        f"{consumer.position(tp)} of {end} in {LOAD_TIMEOUT_S:g} s")
                for records in consumer.poll(timeout_ms=500).values():
                    out.extend((r.key or b"", r.value) for r in records)
        return out
