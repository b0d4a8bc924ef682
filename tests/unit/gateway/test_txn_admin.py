"""The gateway's KIP-664 routing (services/gateway/txn_admin.py) with fake storage
nodes: DescribeProducers and WriteTxnMarkers go to each partition's leader, one call
per node, answers come back in request order, unroutable partitions and unreachable
nodes fail alone, and a COMMIT marker is refused without reaching any node."""

from __future__ import annotations

import asyncio
from typing import Any

from services.gateway.scatter import NodeUnavailable
from services.gateway.txn_admin import describe_producers, write_txn_markers
from strand.errors import ErrorCode
from strand.v1 import storage_pb2 as pb
from tests.unit.gateway.test_scatter import NODE_A, NODE_B, cluster


class Storage:
    """Fake nodes: DescribeProducers answers one producer per partition (its id: the
    partition number), WriteTxnMarkers answers NONE; ``down`` nodes are unreachable."""

    def __init__(self, *down: str) -> None:
        self.down = set(down)
        self.sent: list[tuple[str, Any]] = []

    async def send(self, address: str, request: Any) -> Any:
        self.sent.append((address, request))
        if address in self.down:
            raise NodeUnavailable(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{address} is gone")
        if isinstance(request, pb.DescribeProducersRequest):
            return pb.DescribeProducersResponse(partitions=[
                pb.DescribeProducersPartition(topic=t.topic, partition=p, producers=[
                    pb.ActiveProducer(producer_id=p, current_txn_start_offset=7)])
                for t in reversed(request.topics) for p in t.partitions])  # any order
        return pb.WriteTxnMarkersResponse(markers=[pb.WritableTxnMarkerResult(
            producer_id=m.producer_id, topics=[pb.WritableTxnMarkerTopicResult(
                topic=t.topic, partitions=[pb.WritableTxnMarkerPartitionResult(partition=p)
                                           for p in t.partitions]) for t in m.topics])
            for m in request.markers])


def topics(**parts: list[int]) -> list[pb.WritableTxnMarkerTopic]:
    return [pb.WritableTxnMarkerTopic(topic=t, partitions=p) for t, p in parts.items()]


def test_describe_producers_asks_each_leader_once_and_keeps_the_request_order() -> None:
    nodes = Storage()
    response = asyncio.run(describe_producers(cluster(), nodes.send, pb.DescribeProducersRequest(
        topics=[*topics(y=[0]), *topics(x=[1, 0, 2, 9])])))
    assert [(p.topic, p.partition, ErrorCode(p.error_code)) for p in response.partitions] == [
        ("y", 0, ErrorCode.NONE), ("x", 1, ErrorCode.NONE), ("x", 0, ErrorCode.NONE),
        ("x", 2, ErrorCode.LEADER_NOT_AVAILABLE), ("x", 9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert [p.producers[0].producer_id for p in response.partitions[:3]] == [0, 1, 0]
    asked = {address: [(t.topic, list(t.partitions)) for t in r.topics]
             for address, r in nodes.sent}
    assert asked == {NODE_A: [("y", [0]), ("x", [0])], NODE_B: [("x", [1])]}


def test_an_unreachable_leader_fails_its_partitions_only() -> None:
    nodes = Storage(NODE_B)
    response = asyncio.run(describe_producers(cluster(), nodes.send, pb.DescribeProducersRequest(
        topics=topics(x=[0, 1]))))
    assert [ErrorCode(p.error_code) for p in response.partitions] == [
        ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER]
    assert "b:2 is gone" in response.partitions[1].error_message


def test_markers_are_split_per_leader_and_merged_back_per_marker() -> None:
    nodes = Storage()
    request = pb.WriteTxnMarkersRequest(timeout_ms=500, markers=[
        pb.WritableTxnMarker(producer_id=1, producer_epoch=3, coordinator_epoch=2,
                             topics=topics(x=[1, 0])),
        pb.WritableTxnMarker(producer_id=2, producer_epoch=0, topics=topics(y=[0], x=[2]))])
    response = asyncio.run(write_txn_markers(cluster(), nodes.send, request))
    got = [(m.producer_id, t.topic, p.partition, ErrorCode(p.error_code))
           for m in response.markers for t in m.topics for p in t.partitions]
    assert got == [(1, "x", 1, ErrorCode.NONE), (1, "x", 0, ErrorCode.NONE),
                   (2, "y", 0, ErrorCode.NONE), (2, "x", 2, ErrorCode.LEADER_NOT_AVAILABLE)]
    sent = {address: [(m.producer_id, m.producer_epoch, m.coordinator_epoch, m.committed,
                       [(t.topic, list(t.partitions)) for t in m.topics])
                      for m in r.markers] for address, r in nodes.sent}
    assert sent == {NODE_A: [(1, 3, 2, False, [("x", [0])]), (2, 0, 0, False, [("y", [0])])],
                    NODE_B: [(1, 3, 2, False, [("x", [1])])]}
    assert all(r.timeout_ms == 500 for _, r in nodes.sent)


def test_a_commit_marker_is_refused_and_sent_nowhere() -> None:
    nodes = Storage()
    response = asyncio.run(write_txn_markers(cluster(), nodes.send, pb.WriteTxnMarkersRequest(
        markers=[pb.WritableTxnMarker(producer_id=1, committed=True, topics=topics(x=[0])),
                 pb.WritableTxnMarker(producer_id=2, topics=topics(x=[0]))])))
    first, second = (m.topics[0].partitions[0] for m in response.markers)
    assert ErrorCode(first.error_code) is ErrorCode.INVALID_REQUEST
    assert "ABORT markers only" in first.error_message
    assert ErrorCode(second.error_code) is ErrorCode.NONE
    assert [m.producer_id for _, r in nodes.sent for m in r.markers] == [2]
