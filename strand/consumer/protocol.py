"""The consumer protocol's two opaque payloads, as the coordinator relays them:
a member's subscription (in JoinGroup) and its assignment (in SyncGroup).

Versioned JSON (small, rare, readable in ``DescribeGroup``). Kafka's
ConsumerProtocol carries the same fields: subscribed topics, the assignor's user
data, the partitions the member owns and its generation (for sticky and
cooperative assignors); an assignment is partitions plus the assignor's user data.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from strand.client.structs import TopicPartition
from strand.consumer.assignors import Assignment, Subscription

__all__ = ["ProtocolError", "decode_assignment", "decode_subscription", "encode_assignment",
           "encode_subscription"]

VERSION = 1


class ProtocolError(ValueError):
    """A subscription or assignment this version cannot read."""


def _dump(raw: dict[str, Any]) -> bytes:
    return json.dumps(raw, sort_keys=True, separators=(",", ":")).encode()


def _load(data: bytes, what: str) -> dict[str, Any]:
    try:
        raw = json.loads(data)
    except ValueError as exc:
        raise ProtocolError(f"unreadable {what}: {data[:80]!r}") from exc
    if not isinstance(raw, dict) or raw.get("v") != VERSION:
        raise ProtocolError(f"unsupported {what} version in {data[:80]!r}")
    return raw


def _partitions(raw: Any) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(str(t), int(p)) for t, p in raw)


def encode_subscription(subscription: Subscription) -> bytes:
    return _dump({"v": VERSION, "topics": sorted(subscription.topics),
                  "user_data": base64.b64encode(subscription.user_data).decode(),
                  "owned": sorted([t, p] for t, p in subscription.owned_partitions),
                  "generation": subscription.generation,
                  "instance": subscription.group_instance_id})


def decode_subscription(data: bytes) -> Subscription:
    raw = _load(data, "subscription")
    try:
        return Subscription(tuple(str(t) for t in raw["topics"]),
                            base64.b64decode(raw.get("user_data", "")),
                            _partitions(raw.get("owned", ())), int(raw.get("generation", -1)),
                            raw.get("instance"))
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"malformed subscription {data[:80]!r}") from exc


def encode_assignment(assignment: Assignment) -> bytes:
    return _dump({"v": VERSION, "partitions": sorted([t, p] for t, p in assignment.partitions),
                  "user_data": base64.b64encode(assignment.user_data).decode()})


def decode_assignment(data: bytes) -> Assignment:
    if not data:
        return Assignment(())  # the leader assigned this member nothing
    raw = _load(data, "assignment")
    try:
        return Assignment(_partitions(raw["partitions"]),
                          base64.b64decode(raw.get("user_data", "")))
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"malformed assignment {data[:80]!r}") from exc
