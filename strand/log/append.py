"""What an append is made of: the checks of a leader's incoming batches, their stamping
with offsets and the leader epoch, and the answer (:class:`AppendInfo`). Pure
functions on bytes; the partition log does the writing."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from strand.errors import InvalidRecordError, RecordTooLargeError
from strand.log.config import LogConfig
from strand.log.files import Buffer
from strand.log.producer_state_manager import Duplicate
from strand.records.batch import (
    MAGIC_POS,
    BatchHeader,
    TimestampType,
    set_log_append_time,
    split_batches,
    stamp,
    stamped_prefix,
)
from strand.records.validation import validate_producer_batch


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    record_count: int
    batch_count: int
    size_bytes: int  # bytes written: 0 for a producer's retry answered from its state
    duplicate: bool = False


def split_leader_batches(view: memoryview, config: LogConfig) -> list[tuple[int, BatchHeader]]:
    """Each batch checked (framing, magic, CRC, size, then its records:
    ``strand.records.validation``); raises the first batch's typed error."""
    batches = split_batches(view)
    if not batches:
        raise InvalidRecordError("the request carries no record batch")
    for pos, header in batches:
        if header.size_in_bytes > config.max_message_bytes:
            raise RecordTooLargeError(
                f"batch of {header.size_in_bytes} bytes exceeds max.message.bytes "
                f"({config.max_message_bytes})"
            )
        validate_producer_batch(view, pos, header, require_keys=config.compact)
    return batches


def stamp_leader_batches(
    view: memoryview, batches: list[tuple[int, BatchHeader]], offset: int, leader_epoch: int,
    log_append_time: int | None,
) -> tuple[list[Buffer], list[tuple[int, BatchHeader]]]:
    """The pieces to write and each batch's (base offset, header) from ``offset`` on.

    Without LogAppendTime the batches are written as they came behind stamped copies of
    their first bytes; with it (``log_append_time`` set) they are copied and stamped in
    place, their max timestamp then being that time."""
    assigned: list[tuple[int, BatchHeader]] = []
    pieces: list[Buffer] = []
    mutable = bytearray(view) if log_append_time is not None else None
    for pos, header in batches:
        size = header.size_in_bytes
        if mutable is not None and log_append_time is not None:
            stamp(mutable, pos, offset, leader_epoch)
            set_log_append_time(mutable, pos, size, log_append_time)
            header = dataclasses.replace(header, max_timestamp=log_append_time)
        else:
            pieces.append(stamped_prefix(view, pos, offset, leader_epoch))
            pieces.append(view[pos + MAGIC_POS : pos + size])
        assigned.append((offset, header))
        offset += header.last_offset_delta + 1
    return ([mutable] if mutable is not None else pieces), assigned


def duplicate_info(duplicate: Duplicate, config: LogConfig) -> AppendInfo:
    """The answer to a retried request: where its batches were first written."""
    append_time = config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
    return AppendInfo(
        first_offset=duplicate.first_offset, last_offset=duplicate.last_offset,
        max_timestamp=duplicate.max_timestamp,
        log_append_time=duplicate.max_timestamp if append_time else -1,
        record_count=duplicate.record_count, batch_count=duplicate.batch_count,
        size_bytes=0, duplicate=True)
