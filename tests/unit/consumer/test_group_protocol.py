"""The consumer protocol payloads the coordinator relays: subscription, assignment."""

from __future__ import annotations

import pytest

from strand.client.structs import TopicPartition
from strand.consumer.assignors import Assignment, Subscription
from strand.consumer.protocol import (
    ProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)


def test_subscription_round_trip() -> None:
    subscription = Subscription(("b", "a"), b"\x00\x01", (TopicPartition("a", 1),), 7, "host-1")
    decoded = decode_subscription(encode_subscription(subscription))
    assert decoded.topics == ("a", "b")  # sorted on the wire
    assert (decoded.user_data, decoded.owned_partitions, decoded.generation,
            decoded.group_instance_id) == (b"\x00\x01", (TopicPartition("a", 1),), 7, "host-1")


def test_assignment_round_trip_and_empty() -> None:
    assignment = Assignment((TopicPartition("t", 2), TopicPartition("t", 0)), b"x")
    decoded = decode_assignment(encode_assignment(assignment))
    assert decoded.partitions == (TopicPartition("t", 0), TopicPartition("t", 2))
    assert decoded.user_data == b"x"
    assert decode_assignment(b"").partitions == ()  # the leader gave nothing


@pytest.mark.parametrize("data", [b"garbage", b'{"v":2,"topics":[]}', b'{"v":1}', b"[1]"])
def test_unreadable_payloads_are_refused(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_subscription(data)
