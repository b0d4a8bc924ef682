"""Control batches: transaction commit/abort markers (Kafka's EndTransactionMarker)."""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from strand.errors import CorruptRecordError
from strand.records.batch import NO_PARTITION_LEADER_EPOCH
from strand.records.builder import BatchBuilder
from strand.records.record import Record

_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinator epoch
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    control_type: ControlType
    coordinator_epoch: int


def build_end_txn_marker(
    control_type: ControlType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int | None = None,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    builder = BatchBuilder(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder.append(
        key=_CONTROL_KEY.pack(CONTROL_KEY_VERSION, control_type),
        value=_END_TXN_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch),
        timestamp=timestamp,
    )
    return builder.build()


def parse_control_type(record: Record) -> ControlType:
    if record.key is None or len(record.key) < _CONTROL_KEY.size:
        raise CorruptRecordError("control record has no valid key")
    _version, control_type = _CONTROL_KEY.unpack_from(record.key)
    try:
        return ControlType(control_type)
    except ValueError:
        raise CorruptRecordError(f"unknown control record type {control_type}") from None


def parse_end_txn_marker(record: Record) -> EndTransactionMarker:
    control_type = parse_control_type(record)
    if record.value is None or len(record.value) < _END_TXN_VALUE.size:
        raise CorruptRecordError("end transaction marker has no valid value")
    _version, coordinator_epoch = _END_TXN_VALUE.unpack_from(record.value)
    return EndTransactionMarker(control_type, coordinator_epoch)
