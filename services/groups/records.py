"""The records of ``__consumer_offsets`` (a compacted topic): committed offsets and
group metadata, as record keys and values.

Keys are canonical JSON (sorted keys, no spaces), so the same logical key is always
the same bytes and compaction keeps only its latest value; a null value (tombstone)
deletes it. JSON keeps the topic readable with ``strand consume __consumer_offsets
--print-key`` while debugging; records are small and the rate is the commit rate.
Every value carries a format version ``v``; a reader refuses versions it does not
know rather than misread them. An offset's value names the id of the topic it was
committed for (absent in records written before ids were kept: ``""``), so an offset
of a deleted topic never applies to a new topic of the same name. A ``txn_offset``
record is an offset a transactional producer committed (TxnOffsetCommit), pending
until its transaction ends (:mod:`services.groups.txn_offsets`); the completion
writes it again as an ``offset`` record and tombstones it.

    key   {"g":"orders-app","k":"offset","p":3,"t":"orders"}
    value {"commit_ms":...,"expire_ms":-1,"leader_epoch":5,"metadata":"","offset":1200,
           "topic_id":"6c1f…","v":1}

    key   {"g":"orders-app","k":"txn_offset","p":3,"pid":4012,"t":"orders"}
    value {"commit_ms":...,"expire_ms":-1,...,"offset":1200,"producer_epoch":2,...,"v":1}

    key   {"g":"orders-app","k":"group"}
    value {"generation":7,"leader":"...","members":[...],"protocol":"range",
           "protocol_type":"consumer","state_ms":...,"v":1}
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from strand.errors import CorruptRecordError

__all__ = ["GroupKey", "GroupValue", "MemberValue", "OffsetKey", "OffsetValue", "TxnOffsetKey",
           "TxnOffsetValue", "decode_key", "decode_value", "encode_key", "encode_value"]

VERSION = 1


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class TxnOffsetKey:
    """A pending transactional offset: per (group, producer id, partition)."""

    group: str
    producer_id: int
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    metadata: str = ""
    leader_epoch: int = -1
    commit_ms: int = 0
    expire_ms: int = -1  # -1: the group's retention applies
    topic_id: str = ""  # "": committed before topic ids were kept


@dataclass(frozen=True, slots=True)
class TxnOffsetValue:
    producer_epoch: int
    offset: OffsetValue


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    subscription: bytes
    assignment: bytes
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str
    leader: str
    state_ms: int
    members: tuple[MemberValue, ...] = field(default_factory=tuple)


Key = OffsetKey | GroupKey | TxnOffsetKey
Value = OffsetValue | GroupValue | TxnOffsetValue


def _dump(raw: dict[str, Any]) -> bytes:
    return json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def encode_key(key: Key) -> bytes:
    if isinstance(key, OffsetKey):
        return _dump({"k": "offset", "g": key.group, "t": key.topic, "p": key.partition})
    if isinstance(key, TxnOffsetKey):
        return _dump({"k": "txn_offset", "g": key.group, "pid": key.producer_id,
                      "t": key.topic, "p": key.partition})
    return _dump({"k": "group", "g": key.group})


def decode_key(data: bytes) -> Key:
    try:
        raw = json.loads(data)
        kind = raw["k"]
        if kind == "offset":
            return OffsetKey(str(raw["g"]), str(raw["t"]), int(raw["p"]))
        if kind == "group":
            return GroupKey(str(raw["g"]))
        if kind == "txn_offset":
            return TxnOffsetKey(str(raw["g"]), int(raw["pid"]), str(raw["t"]), int(raw["p"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptRecordError(f"not a __consumer_offsets key: {data[:100]!r}") from exc
    raise CorruptRecordError(f"unknown __consumer_offsets key kind {kind!r}")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _offset_fields(value: OffsetValue) -> dict[str, Any]:
    return {"v": VERSION, "offset": value.offset, "metadata": value.metadata,
            "leader_epoch": value.leader_epoch, "commit_ms": value.commit_ms,
            "expire_ms": value.expire_ms, "topic_id": value.topic_id}


def _offset_value(raw: dict[str, Any]) -> OffsetValue:
    return OffsetValue(int(raw["offset"]), str(raw.get("metadata", "")),
                       int(raw.get("leader_epoch", -1)), int(raw.get("commit_ms", 0)),
                       int(raw.get("expire_ms", -1)), str(raw.get("topic_id", "")))


def encode_value(value: Value) -> bytes:
    if isinstance(value, OffsetValue):
        return _dump(_offset_fields(value))
    if isinstance(value, TxnOffsetValue):
        return _dump({**_offset_fields(value.offset), "producer_epoch": value.producer_epoch})
    return _dump({
        "v": VERSION, "protocol_type": value.protocol_type, "generation": value.generation,
        "protocol": value.protocol, "leader": value.leader, "state_ms": value.state_ms,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                     "client_id": m.client_id, "client_host": m.client_host,
                     "session_timeout_ms": m.session_timeout_ms,
                     "rebalance_timeout_ms": m.rebalance_timeout_ms,
                     "subscription": _b64(m.subscription), "assignment": _b64(m.assignment)}
                    for m in value.members]})


def decode_value(key: Key, data: bytes | None) -> Value | None:
    """The value of ``key``; None for a tombstone."""
    if data is None:
        return None
    try:
        raw = json.loads(data)
        if raw.get("v") != VERSION:
            raise CorruptRecordError(f"unsupported __consumer_offsets value version {raw.get('v')}")
        if isinstance(key, OffsetKey):
            return _offset_value(raw)
        if isinstance(key, TxnOffsetKey):
            return TxnOffsetValue(int(raw["producer_epoch"]), _offset_value(raw))
        return GroupValue(
            str(raw["protocol_type"]), int(raw["generation"]), str(raw["protocol"]),
            str(raw["leader"]), int(raw.get("state_ms", 0)),
            tuple(MemberValue(str(m["member_id"]), m.get("group_instance_id"),
                              str(m.get("client_id", "")), int(m["session_timeout_ms"]),
                              int(m["rebalance_timeout_ms"]),
                              base64.b64decode(m.get("subscription", "")),
                              base64.b64decode(m.get("assignment", "")),
                              str(m.get("client_host", "")))
                  for m in raw.get("members", ())))
    except CorruptRecordError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptRecordError(f"not a __consumer_offsets value: {data[:100]!r}") from exc
