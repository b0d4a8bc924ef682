"""The records of ``__transaction_state`` (a compacted topic): one per
transactional id, its latest :class:`~services.transactions.txn_metadata.TxnTransit`;
a tombstone (null value) once the id expired.

The key is Kafka's TransactionLog key version 0 byte for byte (int16 version 0,
the id as an int16-length UTF-8 string), so keys compact as in Kafka. The value is
Strand's own, big-endian and versioned (the topic is internal: no Kafka tool reads
it). Version 1 holds Kafka's value fields plus the last producer id and epoch,
which Kafka keeps in memory only, so a new owner of the shard knows them too:

    int16 version (1)      int64 producer_id     int64 last_producer_id
    int16 producer_epoch   int16 last_epoch      int32 timeout_ms
    int8  state (Kafka's id)                     int64 start_ms
    int64 last_update_ms   int32 topics, each: string topic, int32 n, n x int32 partition

Version 2 (written only while a transaction's markers are due under an earlier
epoch, see txn_metadata's Completion) appends that transaction:

    int64 producer_id  int16 producer_epoch  int8 commit  then its topics, as above

Decoding refuses anything else (an unknown version, a length that does not add up,
a state never written) with CorruptRecordError rather than misread it.
"""

from __future__ import annotations

import struct

from services.transactions.txn_metadata import (
    MAX_EPOCH,
    Completion,
    TopicPartition,
    TxnTransit,
)
from services.transactions.txn_state import TxnState
from strand.coordination.shard_log import Record
from strand.errors import CorruptRecordError

__all__ = ["KEY_VERSION", "VALUE_VERSION", "decode_key", "decode_value", "encode_key",
           "encode_value", "record"]

KEY_VERSION = 0
VALUE_VERSION = 1
COMPLETING_VALUE_VERSION = 2  # version 1 plus the Completion

_HEAD = struct.Struct(">hqqhhibqqi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_COMPLETION = struct.Struct(">qhb")
# States a record holds: PrepareEpochFence and Dead are only ever pending.
_WRITTEN = frozenset(TxnState) - {TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD}


def _string(text: str) -> bytes:
    data = text.encode()
    if len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes is over the int16 length limit")
    return _I16.pack(len(data)) + data


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def decode_key(data: bytes) -> str:
    try:
        version, length = struct.unpack_from(">hh", data)
        if version != KEY_VERSION:
            raise CorruptRecordError(
                f"__transaction_state key version {version} is unknown (only {KEY_VERSION})")
        if length < 1 or 4 + length != len(data):
            raise CorruptRecordError(
                f"__transaction_state key of {len(data)} bytes says its id has {length}")
        return data[4:].decode()
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"not a __transaction_state key: {data[:64]!r}") from exc


def _topics(partitions: frozenset[TopicPartition]) -> bytes:
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        topics.setdefault(topic, []).append(partition)
    parts = [_I32.pack(len(topics))]
    for topic, numbers in topics.items():
        parts.append(_string(topic) + _I32.pack(len(numbers))
                     + struct.pack(f">{len(numbers)}i", *numbers))
    return b"".join(parts)


def encode_value(transit: TxnTransit) -> bytes:
    if transit.state not in _WRITTEN:
        raise ValueError(f"{transit.state.kafka_name} is never written to the log")
    ended = transit.completing
    head = _HEAD.pack(VALUE_VERSION if ended is None else COMPLETING_VALUE_VERSION,
                      transit.producer_id, transit.last_producer_id, transit.producer_epoch,
                      transit.last_producer_epoch, transit.timeout_ms, transit.state,
                      transit.start_ms, transit.last_update_ms, 0)
    value = head[:-_I32.size] + _topics(transit.partitions)
    if ended is not None:
        value += (_COMPLETION.pack(ended.producer_id, ended.producer_epoch, ended.commit)
                  + _topics(ended.partitions))
    return value


def decode_value(data: bytes | None) -> TxnTransit | None:
    """The transit a value holds; None for a tombstone."""
    if data is None:
        return None
    try:
        return _decode_value(data)
    except CorruptRecordError:
        raise
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise CorruptRecordError(f"not a __transaction_state value: {data[:64]!r}") from exc


def _decode_value(data: bytes) -> TxnTransit:
    (version,) = _I16.unpack_from(data)
    if version not in (VALUE_VERSION, COMPLETING_VALUE_VERSION):
        raise CorruptRecordError(f"__transaction_state value version {version} is unknown "
                                 f"(this Strand reads {VALUE_VERSION} and "
                                 f"{COMPLETING_VALUE_VERSION})")
    (_, producer_id, last_producer_id, epoch, last_epoch, timeout_ms, state_id, start_ms,
     last_update_ms, _count) = _HEAD.unpack_from(data)
    state = TxnState(state_id)
    if state not in _WRITTEN:
        raise CorruptRecordError(f"__transaction_state value in state {state.kafka_name}, "
                                 "which is never written")
    if producer_id < 0 or not 0 <= epoch <= MAX_EPOCH or timeout_ms <= 0:
        raise CorruptRecordError(
            f"__transaction_state value out of range: producer {producer_id}, epoch {epoch}, "
            f"timeout {timeout_ms} ms")
    partitions, pos = _decode_topics(data, _HEAD.size - _I32.size)
    completing = None
    if version == COMPLETING_VALUE_VERSION:
        ended_id, ended_epoch, commit = _COMPLETION.unpack_from(data, pos)
        ended, pos = _decode_topics(data, pos + _COMPLETION.size)
        if ended_id < 0 or not 0 <= ended_epoch <= MAX_EPOCH or commit not in (0, 1) \
                or state not in (TxnState.ONGOING, TxnState.PREPARE_COMMIT,
                                 TxnState.PREPARE_ABORT):
            raise CorruptRecordError(
                f"__transaction_state value in state {state.kafka_name} completing producer "
                f"{ended_id} epoch {ended_epoch} (commit byte {commit}): out of range")
        completing = Completion(ended_id, ended_epoch, bool(commit), frozenset(ended))
    if pos != len(data):
        raise CorruptRecordError(f"__transaction_state value has {len(data) - pos} bytes "
                                 "past its end")
    if partitions and state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                TxnState.COMPLETE_ABORT):
        raise CorruptRecordError(f"__transaction_state value in state {state.kafka_name} "
                                 "lists partitions")
    return TxnTransit(producer_id, last_producer_id, epoch, last_epoch, timeout_ms, state,
                      frozenset(partitions), start_ms, last_update_ms, completing)


def _decode_topics(data: bytes, pos: int) -> tuple[list[TopicPartition], int]:
    """The topics list at ``pos``; returns it and the position past it."""
    (topic_count,) = _I32.unpack_from(data, pos)
    if topic_count < 0:
        raise CorruptRecordError(f"__transaction_state value with {topic_count} topics")
    pos += _I32.size
    partitions: list[TopicPartition] = []
    for _ in range(topic_count):
        (length,) = _I16.unpack_from(data, pos)
        topic = data[pos + 2:pos + 2 + length].decode()
        if length < 1 or len(topic.encode()) != length:
            raise CorruptRecordError("__transaction_state value with a truncated topic name")
        pos += 2 + length
        (count,) = _I32.unpack_from(data, pos)
        pos += 4
        if not 0 < count <= (len(data) - pos) // 4:
            raise CorruptRecordError(f"__transaction_state value says {topic!r} has {count} "
                                     f"partitions in {len(data) - pos} bytes")
        for partition in struct.unpack_from(f">{count}i", data, pos):
            # The writer lists partitions in order, each once: anything else is damage
            # (a changed byte in a topic name may still decode as another name).
            if partition < 0 or (partitions and (topic, partition) <= partitions[-1]):
                raise CorruptRecordError(
                    f"__transaction_state value lists {topic!r}-{partition} out of order")
            partitions.append((topic, partition))
        pos += 4 * count
    return partitions, pos


def record(transactional_id: str, transit: TxnTransit | None) -> Record:
    """The record that writes ``transit`` (None: the tombstone of an expired id)."""
    return Record(encode_key(transactional_id),
                  None if transit is None else encode_value(transit))

