"""The gateway's scatter-gather (services/gateway/scatter.py) with fake nodes: split
per leader, merge in request order, pass-through for one node, errors per partition
(unroutable, node unavailable, unanswered), and the long-poll race."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from services.gateway.scatter import NodeUnavailable, ScatterGather
from strand.cluster.cache import MetadataCache
from strand.cluster.keys import KeySpace
from strand.cluster.model import BrokerRegistration, PartitionRecord, TopicRecord
from strand.errors import ErrorCode

NODE_A, NODE_B = "a:1", "b:2"


@dataclass
class Part:
    partition: int
    payload: str = ""


@dataclass
class Topic:
    topic: str
    partitions: list[Any]


@dataclass
class Message:
    topics: list[Topic]
    note: str = ""


@dataclass
class Answer:
    partition: int
    value: str = ""
    code: ErrorCode = ErrorCode.NONE
    message: str = ""


def request(**topics: list[int]) -> Message:
    return Message([Topic(name, [Part(p, f"{name}-{p}") for p in parts])
                    for name, parts in topics.items()], note="client")


def answers(response: Message) -> dict[tuple[str, int], Answer]:
    return {(t.topic, a.partition): a for t in response.topics for a in t.partitions}


def cluster() -> MetadataCache:
    """Topic ``x``: partition 0 on node 1 (a:1), 1 on node 2 (b:2), 2 leaderless;
    topic ``y``: partition 0 on node 1."""
    cache = MetadataCache(KeySpace("test"))
    cache.brokers = {1: BrokerRegistration(1, "a", 1), 2: BrokerRegistration(2, "b", 2)}
    cache.topics = {"x": TopicRecord("x", "id-x", 3, 2), "y": TopicRecord("y", "id-y", 1, 2)}
    for topic, partition, leader in (("x", 0, 1), ("x", 1, 2), ("x", 2, -1), ("y", 0, 1)):
        cache.partitions[(topic, partition)] = PartitionRecord(
            topic, partition, (1, 2), leader, 1, (1, 2))
    return cache


@dataclass
class Nodes:
    """Fake leader nodes: answer every partition with its payload, or as told."""

    sent: list[tuple[str, Message]] = field(default_factory=list)
    down: set[str] = field(default_factory=set)
    hanging: set[str] = field(default_factory=set)
    empty: set[str] = field(default_factory=set)  # answer without data
    cancelled: list[str] = field(default_factory=list)
    answered: list[Message] = field(default_factory=list)

    async def send(self, address: str, sub: Message) -> Message:
        self.sent.append((address, sub))
        if address in self.down:
            raise NodeUnavailable(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"leader {address}: down")
        if address in self.hanging:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled.append(address)
                raise
        answer = Message([Topic(t.topic, [
            Answer(p.partition, "" if address in self.empty else p.payload)
            for p in t.partitions]) for t in sub.topics])
        self.answered.append(answer)
        return answer


def scatter(nodes: Nodes, *, race: bool = False) -> ScatterGather[Message, Message, Answer]:
    return ScatterGather(
        send=nodes.send,
        split=lambda req, topics: Message(
            [Topic(name, parts) for name, parts in topics.items()], note=req.note),
        respond=lambda topics: Message([Topic(name, parts) for name, parts in topics]),
        error=lambda partition, code, message: Answer(partition, code=code, message=message),
        decisive=(lambda answer: bool(answer.value) or answer.code != 0) if race else None)


def test_one_node_gets_the_request_as_it_came_and_its_answer_is_passed_back() -> None:
    nodes = Nodes()
    client_request = request(x=[0], y=[0])
    response = asyncio.run(scatter(nodes).call(cluster(), client_request))
    ((address, sent),) = nodes.sent
    assert address == NODE_A and sent is client_request
    assert response is nodes.answered[0]
    assert answers(response) == {("x", 0): Answer(0, "x-0"), ("y", 0): Answer(0, "y-0")}


def test_a_request_is_split_per_leader_and_merged_in_request_order() -> None:
    nodes = Nodes()
    response = asyncio.run(scatter(nodes).call(cluster(), request(y=[0], x=[1, 0])))
    by_node = {address: sub for address, sub in nodes.sent}
    assert set(by_node) == {NODE_A, NODE_B}
    assert [(t.topic, [p.partition for p in t.partitions]) for t in by_node[NODE_A].topics] == [
        ("y", [0]), ("x", [0])]
    assert [(t.topic, [p.partition for p in t.partitions]) for t in by_node[NODE_B].topics] == [
        ("x", [1])]
    assert by_node[NODE_A].note == "client"  # the request's own fields carry over
    assert [(t.topic, [a.partition for a in t.partitions]) for t in response.topics] == [
        ("y", [0]), ("x", [1, 0])]
    assert [a.value for t in response.topics for a in t.partitions] == ["y-0", "x-1", "x-0"]


def test_unroutable_partitions_get_their_error_and_never_leave_the_gateway() -> None:
    nodes = Nodes()
    got = answers(asyncio.run(scatter(nodes).call(cluster(), request(x=[0, 2, 7], z=[0]))))
    assert got[("x", 0)].value == "x-0"
    assert got[("x", 2)].code == ErrorCode.LEADER_NOT_AVAILABLE
    assert got[("x", 7)].code == got[("z", 0)].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert [[(t.topic, [p.partition for p in t.partitions]) for t in sub.topics]
            for _, sub in nodes.sent] == [[("x", [0])]]


def test_a_node_that_does_not_answer_fails_only_its_partitions() -> None:
    nodes = Nodes(down={NODE_B})
    got = answers(asyncio.run(scatter(nodes).call(cluster(), request(x=[0, 1]))))
    assert got[("x", 0)] == Answer(0, "x-0")
    assert got[("x", 1)] == Answer(1, code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                   message=f"leader {NODE_B}: down")


def test_when_the_only_node_does_not_answer_every_partition_fails() -> None:
    nodes = Nodes(down={NODE_A})
    got = answers(asyncio.run(scatter(nodes).call(cluster(), request(x=[0], y=[0]))))
    assert {a.code for a in got.values()} == {ErrorCode.NOT_LEADER_OR_FOLLOWER}
    assert set(got) == {("x", 0), ("y", 0)}


def test_a_partition_no_node_answered_is_an_unknown_server_error() -> None:
    nodes = Nodes()

    async def forgetful(address: str, sub: Message) -> Message:
        full = await nodes.send(address, sub)
        return Message(full.topics[:1])  # node 1 forgets topic y

    rpc = scatter(nodes)
    rpc = ScatterGather(forgetful, rpc.split, rpc.respond, rpc.error)
    got = answers(asyncio.run(rpc.call(cluster(), request(x=[0, 1], y=[0]))))
    assert got[("x", 0)].value == "x-0" and got[("x", 1)].value == "x-1"
    assert got[("y", 0)].code == ErrorCode.UNKNOWN_SERVER_ERROR


def test_without_a_race_every_node_is_awaited() -> None:
    nodes = Nodes(empty={NODE_B})
    got = answers(asyncio.run(scatter(nodes).call(cluster(), request(x=[0, 1]))))
    assert got == {("x", 0): Answer(0, "x-0"), ("x", 1): Answer(1, "")}
    assert nodes.cancelled == []


def test_in_a_race_the_first_node_with_data_answers_and_the_others_are_cancelled() -> None:
    nodes = Nodes(hanging={NODE_B})
    rpc = scatter(nodes, race=True)
    rpc = ScatterGather(rpc.send, rpc.split, rpc.respond, rpc.error,
                        unanswered=lambda partition: Answer(partition, "(none)"),
                        decisive=rpc.decisive)
    got = answers(asyncio.run(asyncio.wait_for(
        rpc.call(cluster(), request(x=[0, 1])), 5)))
    assert got == {("x", 0): Answer(0, "x-0"), ("x", 1): Answer(1, "(none)")}
    assert nodes.cancelled == [NODE_B]


def test_in_a_race_a_node_without_data_does_not_end_the_wait() -> None:
    nodes = Nodes(empty={NODE_A})

    async def slower(address: str, sub: Message) -> Message:
        if address == NODE_B:
            await asyncio.sleep(0.05)
        return await nodes.send(address, sub)

    rpc = scatter(nodes, race=True)
    rpc = ScatterGather(slower, rpc.split, rpc.respond, rpc.error, decisive=rpc.decisive)
    got = answers(asyncio.run(rpc.call(cluster(), request(x=[0, 1]))))
    assert got == {("x", 0): Answer(0, ""), ("x", 1): Answer(1, "x-1")}


def test_fail_all_refuses_every_partition_alike() -> None:
    response = scatter(Nodes()).fail_all(request(x=[0, 1], y=[0]),
                                         ErrorCode.INVALID_REQUIRED_ACKS, "bad acks")
    assert [(t.topic, [(a.partition, a.code, a.message) for a in t.partitions])
            for t in response.topics] == [
        ("x", [(0, ErrorCode.INVALID_REQUIRED_ACKS, "bad acks"),
               (1, ErrorCode.INVALID_REQUIRED_ACKS, "bad acks")]),
        ("y", [(0, ErrorCode.INVALID_REQUIRED_ACKS, "bad acks")])]
