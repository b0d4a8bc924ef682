"""The group coordinator service with real processes, through the gateway's gRPC API:
the join / sync / heartbeat handshake of two members, generation-fenced commits,
and committed offsets and group state surviving the SIGKILL of coordinator
instances (another instance takes the shard over from __consumer_offsets).

The SDK's group consumer (subscribe, rebalance listeners, auto commit) builds on
this; these tests speak the protocol directly.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from strand import Admin, NewTopic
from strand.errors import ErrorCode
from strand.launcher import Cluster
from strand.v1 import common_pb2, gateway_pb2_grpc
from strand.v1 import groups_pb2 as pb
from tests.support.cluster import cluster_spec
from tests.support.waiting import wait_until

RANGE = [pb.GroupProtocol(name="range", metadata=b"orders")]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Three storage nodes and two group coordinators (6 shards of __consumer_offsets)."""
    with Cluster(cluster_spec(tmp_path, "groups", storage_nodes=3, coordinators=2,
                              coordinator_args=("--shards", "6",
                                                "--initial-rebalance-delay-ms", "200"))
                 ) as started:
        yield started


@pytest.fixture
def stub(cluster: Cluster) -> Iterator[gateway_pb2_grpc.GatewayStub]:
    with grpc.insecure_channel(cluster.bootstrap) as channel:
        yield gateway_pb2_grpc.GatewayStub(channel)


def code(name: str) -> int:
    return int(common_pb2.ErrorCode.Value(name))


def join(stub: gateway_pb2_grpc.GatewayStub, member_id: str = "") -> pb.JoinGroupResponse:
    response: pb.JoinGroupResponse = stub.JoinGroup(pb.JoinGroupRequest(
        group_id="app", member_id=member_id, client_id="test", protocol_type="consumer",
        protocols=RANGE, session_timeout_ms=6000, rebalance_timeout_ms=5000), timeout=60)
    return response


def member_id(stub: gateway_pb2_grpc.GatewayStub) -> str:
    def ready() -> bool:
        return join(stub).error_code == code("MEMBER_ID_REQUIRED")

    wait_until(ready, 60, "a coordinator to serve the group")
    first = join(stub)
    assert first.error_code == code("MEMBER_ID_REQUIRED")
    return first.member_id


def fetch(stub: gateway_pb2_grpc.GatewayStub) -> dict[tuple[str, int], int]:
    response = stub.OffsetFetch(pb.OffsetFetchRequest(group_id="app"), timeout=30)
    assert response.error_code == 0, response.error_message
    return {(p.topic, p.partition): p.offset for p in response.partitions}


def test_two_members_rebalance_commit_and_survive_coordinator_kills(
        cluster: Cluster, stub: gateway_pb2_grpc.GatewayStub) -> None:
    with Admin(cluster.bootstrap) as admin:  # offsets are committed for existing topics
        admin.create_topics([NewTopic("orders", 3, 1)])
    a, b = member_id(stub), member_id(stub)
    with ThreadPoolExecutor(2) as pool:
        joined = list(pool.map(lambda m: join(stub, m), (a, b)))
    assert [j.error_code for j in joined] == [0, 0]
    assert {j.generation_id for j in joined} == {1}
    leader = next(j for j in joined if j.member_id == j.leader_id)
    assert {m.member_id for m in leader.members} == {a, b}
    with ThreadPoolExecutor(2) as pool:
        follower_sync = pool.submit(stub.SyncGroup, pb.SyncGroupRequest(
            group_id="app", member_id=b if leader.member_id == a else a, generation_id=1),
            timeout=30)
        time.sleep(0.2)
        leader_sync = stub.SyncGroup(pb.SyncGroupRequest(
            group_id="app", member_id=leader.member_id, generation_id=1, assignments=[
                pb.SyncGroupAssignment(member_id=a, assignment=b"partitions 0-2"),
                pb.SyncGroupAssignment(member_id=b, assignment=b"partitions 3-5")]),
            timeout=30)
        assert leader_sync.error_code == 0
        assert follower_sync.result().error_code == 0
    commit = stub.OffsetCommit(pb.OffsetCommitRequest(
        group_id="app", member_id=a, generation_id=1,
        partitions=[pb.OffsetCommitPartition(topic="orders", partition=p, offset=100 + p)
                    for p in range(3)]), timeout=30)
    assert commit.error_code == 0, commit.error_message
    zombie = stub.OffsetCommit(pb.OffsetCommitRequest(
        group_id="app", member_id=a, generation_id=0,
        partitions=[pb.OffsetCommitPartition(topic="orders", partition=0, offset=999)]),
        timeout=30)
    assert zombie.error_code == code("ILLEGAL_GENERATION")
    expected = {("orders", p): 100 + p for p in range(3)}
    assert fetch(stub) == expected

    # Kill each coordinator instance in turn (restarting the first before killing the
    # second): whichever owned the group's shard, another one takes it over.
    for index in (0, 1):
        victim = cluster.coordinators[index]
        victim.kill()
        wait_until(lambda: fetch(stub) == expected, 60, "the offsets served again")
        heartbeat = stub.Heartbeat(pb.HeartbeatRequest(group_id="app", member_id=a,
                                                       generation_id=1), timeout=30)
        assert heartbeat.error_code in (0, code("REBALANCE_IN_PROGRESS"),
                                        code("UNKNOWN_MEMBER_ID")), heartbeat
        cluster.coordinators[index] = cluster.group_coordinator(
            index, victim.listen_port).start()
    described = stub.DescribeGroup(pb.DescribeGroupRequest(group_id="app"), timeout=30)
    assert described.error_code == 0 and described.protocol_type == "consumer"
    listed = stub.ListGroups(pb.ListGroupsRequest(), timeout=30)
    assert listed.error_code == 0, listed.error_message  # complete, not a partial list
    assert "app" in {g.group_id for g in listed.groups}


def test_bad_group_requests_get_typed_errors(stub: gateway_pb2_grpc.GatewayStub) -> None:
    empty = stub.JoinGroup(pb.JoinGroupRequest(group_id="", protocol_type="consumer",
                                               protocols=RANGE), timeout=30)
    assert empty.error_code == code("INVALID_GROUP_ID")
    member_id(stub)  # wait until served
    unknown = stub.Heartbeat(pb.HeartbeatRequest(group_id="app", member_id="nobody",
                                                 generation_id=1), timeout=30)
    assert unknown.error_code == code("UNKNOWN_MEMBER_ID")
    assert ErrorCode(code("GROUP_ID_NOT_FOUND")) == ErrorCode.GROUP_ID_NOT_FOUND
    missing = stub.DeleteGroup(pb.DeleteGroupRequest(group_id="never-used"), timeout=30)
    assert missing.error_code == code("GROUP_ID_NOT_FOUND")
