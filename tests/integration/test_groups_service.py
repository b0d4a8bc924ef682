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
from cluster_helpers import EtcdServer, ServiceProcess, wait_until

from strand.errors import ErrorCode
from strand.v1 import common_pb2, gateway_pb2_grpc
from strand.v1 import groups_pb2 as pb

RANGE = [pb.GroupProtocol(name="range", metadata=b"orders")]


class Cluster:
    def __init__(self, tmp: Path) -> None:
        self.etcd = EtcdServer(tmp / "etcd")
        self.etcd.start()
        common = ["--etcd", self.etcd.endpoint, "--cluster", "groups"]
        self.controller = ServiceProcess("controller", [*common, "--lease-ttl", "2"],
                                         tmp / "controller.log").start()
        self.storage = [ServiceProcess("storage", [
            *common, "--node-id", str(n), "--data-dir", str(tmp / f"data-{n}"),
            "--lease-ttl", "2"], tmp / f"storage-{n}.log").start() for n in (1, 2, 3)]
        self.gateway = ServiceProcess("gateway", common, tmp / "gateway.log").start()
        self.coordinators = [self.coordinator(i, tmp) for i in (0, 1)]
        self.channel = grpc.insecure_channel(self.gateway.address)
        self.stub = gateway_pb2_grpc.GatewayStub(self.channel)
        self.tmp = tmp

    def coordinator(self, index: int, tmp: Path, port: int | None = None) -> ServiceProcess:
        proc = ServiceProcess("groups", [
            "--etcd", self.etcd.endpoint, "--cluster", "groups", "--id", f"groups-{index}",
            "--bootstrap", self.gateway.address, "--lease-ttl", "2", "--shards", "6",
            "--initial-rebalance-delay-ms", "200"], tmp / f"groups-{index}.log")
        if port is not None:
            proc.listen_port = port
        return proc.start()

    def stop(self) -> None:
        self.channel.close()
        for proc in (*self.coordinators, self.gateway, *self.storage, self.controller):
            proc.stop()
        self.etcd.stop()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    started = Cluster(tmp_path)
    try:
        yield started
    finally:
        started.stop()


def code(name: str) -> int:
    return common_pb2.ErrorCode.Value(name)


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


def test_two_members_rebalance_commit_and_survive_coordinator_kills(cluster: Cluster) -> None:
    stub = cluster.stub
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
        cluster.coordinators[index] = cluster.coordinator(index, cluster.tmp,
                                                          port=victim.listen_port)
    described = stub.DescribeGroup(pb.DescribeGroupRequest(group_id="app"), timeout=30)
    assert described.error_code == 0 and described.protocol_type == "consumer"
    listed = stub.ListGroups(pb.ListGroupsRequest(), timeout=30)
    assert listed.error_code == 0, listed.error_message  # complete, not a partial list
    assert "app" in {g.group_id for g in listed.groups}


def test_bad_group_requests_get_typed_errors(cluster: Cluster) -> None:
    stub = cluster.stub
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
