"""WriteTxnMarkers: the transaction coordinator ends a transaction on a partition.

For each marker (producer id and epoch, COMMIT or ABORT, coordinator epoch) and each
of its partitions this node leads, a control batch is appended as leader with origin
COORDINATOR (:class:`strand.log.producer_state.AppendOrigin`): the producer's epoch
and the coordinator epoch are checked, its transaction on the partition ends (the
LSO moves, an ABORT goes to the aborted index). As in Kafka the marker is written
with acks=all: the answer waits until every in-sync replica has it, so a new leader
cannot reopen a transaction the coordinator believes ended. Errors are per partition
(NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT...: the coordinator
retries on the current leader; INVALID_PRODUCER_EPOCH,
TRANSACTION_COORDINATOR_FENCED: it does not).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from services.storage.produce import Appender, PartitionAppend
from strand.errors import StrandError
from strand.log.producer_state import AppendOrigin
from strand.records.control import ControlType, build_end_txn_marker


@dataclass(frozen=True, slots=True)
class TxnMarker:
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: Sequence[tuple[str, int]]  # (topic, partition), in request order
    # The producer's next transaction is open on these partitions under this epoch
    # (the coordinator's word: its first writes need no verification).
    next_producer_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class MarkerOutcome:
    topic: str
    partition: int
    error_code: int = 0
    error_message: str = ""


class MarkerWriter:
    def __init__(self, appender: Appender) -> None:
        self.appender = appender

    async def write(self, markers: Sequence[TxnMarker],
                    timeout_ms: int = 30_000) -> list[list[MarkerOutcome]]:
        """Per marker, one outcome per partition in request order (all in parallel;
        markers for one partition are appended in request order)."""
        return list(await asyncio.gather(*(self._write(m, timeout_ms) for m in markers)))

    async def _write(self, marker: TxnMarker, timeout_ms: int) -> list[MarkerOutcome]:
        try:
            batch = build_end_txn_marker(
                ControlType.COMMIT if marker.committed else ControlType.ABORT,
                producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
                coordinator_epoch=marker.coordinator_epoch)
        except StrandError as exc:  # out of the on-disk fields' range: this marker only
            return [MarkerOutcome(topic, partition, exc.code, f"{topic}-{partition}: {exc}")
                    for topic, partition in marker.partitions]
        appends = [PartitionAppend(topic, partition, batch, AppendOrigin.COORDINATOR,
                                   next_producer_epoch=marker.next_producer_epoch)
                   for topic, partition in marker.partitions]
        results = await self.appender.append(-1, appends, timeout_ms)
        return [MarkerOutcome(r.topic, r.partition, r.error_code, r.error_message)
                for r in results]
