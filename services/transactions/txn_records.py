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

Decoding refuses anything else (an unknown version, a length that does not add up,
a state never written) with CorruptRecordError rather than misread it.
"""

from __future__ import annotations

import struct

from services.transactions.txn_metadata import MAX_EPOCH, TopicPartition, TxnTransit
from services.transactions.txn_state import TxnState
from strand.coordination.shard_log import Record
from strand.errors import CorruptRecordError

__all__ = ["KEY_VERSION", "VALUE_VERSION", "decode_key", "decode_value", "encode_key",
           "encode_value", "record"]

KEY_VERSION = 0
VALUE_VERSION = 1

_HEAD = struct.Struct(">hqqhhibqqi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
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


def encode_value(transit: TxnTransit) -> bytes:
    if transit.state not in _WRITTEN:
        raise ValueError(f"{transit.state.kafka_name} is never written to the log")
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(transit.partitions):
        topics.setdefault(topic, []).append(partition)
    parts = [_HEAD.pack(VALUE_VERSION, transit.producer_id, transit.last_producer_id,
                        transit.producer_epoch, transit.last_producer_epoch,
                        transit.timeout_ms, transit.state, transit.start_ms,
                        transit.last_update_ms, len(topics))]
    for topic, partitions in topics.items():
        parts.append(_string(topic) + _I32.pack(len(partitions))
                     + struct.pack(f">{len(partitions)}i", *partitions))
    return b"".join(parts)


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
    if version != VALUE_VERSION:
        raise CorruptRecordError(f"__transaction_state value version {version} is unknown "
                                 f"(this Strand reads {VALUE_VERSION})")
    (_, producer_id, last_producer_id, epoch, last_epoch, timeout_ms, state_id, start_ms,
     last_update_ms, topic_count) = _HEAD.unpack_from(data)
    state = TxnState(state_id)
    if state not in _WRITTEN:
        raise CorruptRecordError(f"__transaction_state value in state {state.kafka_name}, "
                                 "which is never written")
    if producer_id < 0 or not 0 <= epoch <= MAX_EPOCH or timeout_ms <= 0 or topic_count < 0:
        raise CorruptRecordError(
            f"__transaction_state value out of range: producer {producer_id}, epoch {epoch}, "
            f"timeout {timeout_ms} ms, {topic_count} topics")
    pos = _HEAD.size
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
    if pos != len(data):
        raise CorruptRecordError(f"__transaction_state value has {len(data) - pos} bytes "
                                 "past its end")
    if partitions and state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                TxnState.COMPLETE_ABORT):
        raise CorruptRecordError(f"__transaction_state value in state {state.kafka_name} "
                                 "lists partitions")
    return TxnTransit(producer_id, last_producer_id, epoch, last_epoch, timeout_ms, state,
                      frozenset(partitions), start_ms, last_update_ms)


def record(transactional_id: str, transit: TxnTransit | None) -> Record:
    """The record that writes ``transit`` (None: the tombstone of an expired id)."""
    return Record(encode_key(transactional_id),
                  None if transit is None else encode_value(transit))

