"""A read_committed consumer's committed offsets (KIP-447), with the gateway's
OffsetFetch answers scripted: it asks for stable offsets, retries a partition
answered UNSTABLE_OFFSET_COMMIT after a backoff until its timeout, and then raises
the typed, retriable error instead of handing out an offset a transaction may still
replace; read_uncommitted does not ask."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from strand.client.structs import TopicPartition
from strand.consumer.coordinator import ConsumerCoordinator
from strand.consumer.subscription_state import SubscriptionState
from strand.errors import UnstableOffsetCommitError
from strand.v1 import groups_pb2 as pb

TP = TopicPartition("t", 0)


class Answered:
    def __init__(self, answer: pb.OffsetFetchResponse) -> None:
        self.answer = answer

    def result(self) -> pb.OffsetFetchResponse:
        return self.answer


class OffsetFetch:
    """The gateway's OffsetFetch: ``unstable`` answers UNSTABLE_OFFSET_COMMIT first."""

    def __init__(self, unstable: int) -> None:
        self.unstable = unstable
        self.requests: list[pb.OffsetFetchRequest] = []

    def future(self, request: pb.OffsetFetchRequest, timeout: float) -> Answered:
        self.requests.append(request)
        if self.unstable:
            self.unstable -= 1
            return Answered(pb.OffsetFetchResponse(partitions=[pb.OffsetFetchPartition(
                topic=TP.topic, partition=TP.partition, offset=-1,
                error_code="UNSTABLE_OFFSET_COMMIT", error_message="pending")]))
        return Answered(pb.OffsetFetchResponse(partitions=[pb.OffsetFetchPartition(
            topic=TP.topic, partition=TP.partition, offset=30)]))


@pytest.fixture
def channel() -> Iterator[grpc.Channel]:
    channel = grpc.insecure_channel("127.0.0.1:9")  # never called: the stub is replaced
    yield channel
    channel.close()


def coordinator(channel: grpc.Channel, fetch: OffsetFetch, stable: bool) -> ConsumerCoordinator:
    made = ConsumerCoordinator(channel, "127.0.0.1:9", "g", "c", SubscriptionState(),
                               partitions_for=lambda topic: 1, require_stable=stable,
                               request_timeout_ms=5_000)
    stub: Any = type("Stub", (), {"OffsetFetch": fetch})()
    made.stub = stub
    return made


def test_read_committed_retries_until_the_transaction_ends(channel: grpc.Channel) -> None:
    fetch = OffsetFetch(unstable=2)
    assert coordinator(channel, fetch, stable=True).committed([TP]) == {TP: 30}
    assert len(fetch.requests) == 3
    assert all(r.require_stable for r in fetch.requests)


def test_still_unstable_at_the_timeout_is_a_typed_error(channel: grpc.Channel) -> None:
    fetch = OffsetFetch(unstable=100)
    with pytest.raises(UnstableOffsetCommitError, match="t-0") as raised:
        coordinator(channel, fetch, stable=True).committed([TP], timeout_s=0)
    assert raised.value.retriable
    assert len(fetch.requests) == 1


def test_read_uncommitted_does_not_ask_for_stable_offsets(channel: grpc.Channel) -> None:
    fetch = OffsetFetch(unstable=0)
    assert coordinator(channel, fetch, stable=False).committed([TP]) == {TP: 30}
    assert not fetch.requests[0].require_stable
