"""The Kafka listener's group APIs translate every served version both ways: each
request becomes the servicer's protobuf call, each answer (or refusal) a response
that encodes as that version's schema."""

from __future__ import annotations

import datetime
import io
from typing import Any

import pytest
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode as KafkaError
from kio.serial import entity_writer
from kio.static.constants import EntityType

from services.gateway.kafka import group_admin, groups, offsets
from services.gateway.kafka.call import CallRefused, KafkaCall, KafkaContext
from services.gateway.kafka.messages import build
from services.gateway.kafka.replies import pb_code
from strand.errors import AuthorizationError, ErrorCode, GroupAuthorizationFailedError
from strand.security.acl import Operation, ResourceType
from strand.v1 import groups_pb2 as pb

pytestmark = pytest.mark.asyncio

SESSION = datetime.timedelta(seconds=10)


class GroupsServicer:
    """Answers the group calls as a coordinator would, and records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Any]] = []
        self.refuse: CallRefused | None = None
        self.access = self
        self.denied: set[str] = set()

    # -- the access control FindCoordinator and DescribeGroups consult ----------------------
    def refusal(self, operation: Operation, resource: ResourceType,
                name: str) -> AuthorizationError | None:
        return GroupAuthorizationFailedError(f"not {name}") if name in self.denied else None

    def allowed(self, operation: Operation, resource: ResourceType, name: str) -> bool:
        return name not in self.denied

    async def _answer(self, method: str, request: Any, answer: Any) -> Any:
        self.asked.append((method, request))
        if self.refuse is not None:
            raise self.refuse
        return answer

    async def JoinGroup(self, request: pb.JoinGroupRequest, context: Any) -> Any:
        if not request.member_id:
            return await self._answer("JoinGroup", request, pb.JoinGroupResponse(
                error_code=pb_code(ErrorCode.MEMBER_ID_REQUIRED), member_id="m-1",
                generation_id=-1))
        return await self._answer("JoinGroup", request, pb.JoinGroupResponse(
            member_id=request.member_id, generation_id=3, protocol_name="range",
            leader_id=request.member_id, members=[pb.JoinGroupMember(
                member_id=request.member_id, metadata=b"subscription")]))

    async def SyncGroup(self, request: Any, context: Any) -> Any:
        return await self._answer("SyncGroup", request, pb.SyncGroupResponse(
            assignment=b"assignment", protocol_name="range"))

    async def Heartbeat(self, request: Any, context: Any) -> Any:
        return await self._answer("Heartbeat", request, pb.HeartbeatResponse())

    async def LeaveGroup(self, request: Any, context: Any) -> Any:
        code = ErrorCode.UNKNOWN_MEMBER_ID if request.member_id == "gone" else ErrorCode.NONE
        return await self._answer("LeaveGroup", request,
                                  pb.LeaveGroupResponse(error_code=pb_code(code)))

    async def OffsetCommit(self, request: Any, context: Any) -> Any:
        return await self._answer("OffsetCommit", request, pb.OffsetCommitResponse(
            partitions=[pb.OffsetCommitPartitionResponse(topic=p.topic, partition=p.partition)
                        for p in request.partitions]))

    async def OffsetFetch(self, request: Any, context: Any) -> Any:
        return await self._answer("OffsetFetch", request, pb.OffsetFetchResponse(
            partitions=[pb.OffsetFetchPartition(
                topic=p.topic, partition=p.partition, offset=42, leader_epoch=1,
                error_code=(pb_code(ErrorCode.UNSTABLE_OFFSET_COMMIT)
                            if request.require_stable else pb_code(ErrorCode.NONE)))
                for p in request.partitions] or [pb.OffsetFetchPartition(
                    topic="t", partition=0, offset=7, leader_epoch=-1)]))

    async def ListGroups(self, request: Any, context: Any) -> Any:
        return await self._answer("ListGroups", request, pb.ListGroupsResponse(groups=[
            pb.ListedGroup(group_id="a", state="Stable", protocol_type="consumer"),
            pb.ListedGroup(group_id="b", state="Empty", protocol_type="consumer")]))

    async def DescribeGroup(self, request: Any, context: Any) -> Any:
        if request.group_id == "unknown":
            return await self._answer("DescribeGroup", request,
                                      pb.DescribeGroupResponse(state="Dead"))
        return await self._answer("DescribeGroup", request, pb.DescribeGroupResponse(
            state="Stable", protocol_type="consumer", protocol="range", generation_id=2,
            members=[pb.DescribedMember(member_id="m", client_id="c", client_host="h",
                                        metadata=b"s", assignment=b"a")]))

    async def DeleteGroup(self, request: Any, context: Any) -> Any:
        return await self._answer("DeleteGroup", request, pb.DeleteGroupResponse())


def _call(servicer: GroupsServicer, api_key: int, version: int) -> KafkaCall:
    return KafkaCall(api_key=api_key, api_version=version, correlation_id=1,
                     client_id="client", servicer=servicer,  # type: ignore[arg-type]
                     context=KafkaContext("ipv4:127.0.0.1:5000"),
                     advertised_host="gw.example", advertised_port=9092, broker_id=7)


def _request(api_key: int, version: int, class_name: str, /, **values: Any) -> Any:
    return build(load_payload_module(api_key, version, EntityType.request), class_name,
                 **values)


_nested = _request


def _encodes(response: Any) -> None:
    entity_writer(type(response))(io.BytesIO(), response)


def _requests(api_key: int, version: int) -> Any:
    """A typical request of ``api_key`` at ``version``."""
    if api_key == groups.FIND_COORDINATOR:
        return _request(api_key, version, "FindCoordinatorRequest", key="g", key_type=0,
                        coordinator_keys=("g", "h"))
    if api_key == groups.JOIN_GROUP:
        proto = _nested(api_key, version, "JoinGroupRequestProtocol", name="range",
                        metadata=b"subscription")
        return _request(api_key, version, "JoinGroupRequest", group_id="g",
                        session_timeout=SESSION, rebalance_timeout=SESSION, member_id="",
                        group_instance_id=None, protocol_type="consumer",
                        protocols=(proto,), reason=None)
    if api_key == groups.SYNC_GROUP:
        assignment = _nested(api_key, version, "SyncGroupRequestAssignment", member_id="m",
                             assignment=b"assignment")
        return _request(api_key, version, "SyncGroupRequest", group_id="g", generation_id=3,
                        member_id="m", group_instance_id=None, protocol_type="consumer",
                        protocol_name="range", assignments=(assignment,))
    if api_key == groups.HEARTBEAT:
        return _request(api_key, version, "HeartbeatRequest", group_id="g", generation_id=3,
                        member_id="m", group_instance_id=None)
    if api_key == groups.LEAVE_GROUP:
        members = tuple(_nested(api_key, version, "MemberIdentity", member_id=m,
                                group_instance_id=None, reason=None)
                        for m in ("m", "gone")) if version >= 3 else ()
        return _request(api_key, version, "LeaveGroupRequest", group_id="g", member_id="m",
                        members=members)
    if api_key == offsets.OFFSET_COMMIT:
        part = _nested(api_key, version, "OffsetCommitRequestPartition", partition_index=0,
                       committed_offset=5, committed_leader_epoch=1, committed_metadata=None)
        topic = _nested(api_key, version, "OffsetCommitRequestTopic", name="t",
                        partitions=(part,))
        return _request(api_key, version, "OffsetCommitRequest", group_id="g",
                        generation_id_or_member_epoch=3, member_id="m",
                        group_instance_id=None, retention_time=-1, topics=(topic,))
    if api_key == offsets.OFFSET_FETCH:
        if version < 8:
            topic = _nested(api_key, version, "OffsetFetchRequestTopic", name="t",
                            partition_indexes=(0, 1))
            return _request(api_key, version, "OffsetFetchRequest", group_id="g",
                            topics=(topic,), require_stable=False)
        topic = _nested(api_key, version, "OffsetFetchRequestTopics", name="t",
                        partition_indexes=(0,))
        groups_asked = tuple(_nested(api_key, version, "OffsetFetchRequestGroup",
                                     group_id=g, member_id=None, member_epoch=-1,
                                     topics=t) for g, t in (("g", (topic,)), ("h", None)))
        return _request(api_key, version, "OffsetFetchRequest", groups=groups_asked,
                        require_stable=False)
    if api_key == group_admin.LIST_GROUPS:
        return _request(api_key, version, "ListGroupsRequest", states_filter=(),
                        types_filter=())
    if api_key == group_admin.DESCRIBE_GROUPS:
        return _request(api_key, version, "DescribeGroupsRequest", groups=("g", "unknown"),
                        include_authorized_operations=True)
    assert api_key == group_admin.DELETE_GROUPS
    return _request(api_key, version, "DeleteGroupsRequest", groups_names=("g", "h"))


SERVED = [(module, key, version)
          for module in (groups, offsets, group_admin)
          for key, (low, high) in module.VERSIONS.items()
          for version in range(low, high + 1)]


@pytest.mark.parametrize(("module", "api_key", "version"), SERVED,
                         ids=[f"{k}-v{v}" for _, k, v in SERVED])
@pytest.mark.parametrize("refused", [False, True], ids=["answered", "refused"])
async def test_every_served_version_translates_and_encodes(module: Any, api_key: int,
                                                           version: int, refused: bool) -> None:
    servicer = GroupsServicer()
    if refused:
        servicer.refuse = CallRefused(ErrorCode.GROUP_AUTHORIZATION_FAILED, "no")
    response = await module.HANDLERS[api_key](_requests(api_key, version),
                                              _call(servicer, api_key, version))
    assert type(response).__version__ == version
    assert type(response).__api_key__ == api_key
    _encodes(response)


async def test_join_before_v4_gets_its_member_id_in_one_round() -> None:
    servicer = GroupsServicer()
    response = await groups.join_group(_requests(groups.JOIN_GROUP, 3),
                                       _call(servicer, groups.JOIN_GROUP, 3))
    assert response.error_code is KafkaError.none
    assert response.member_id == "m-1" and response.generation_id == 3
    assert [r.member_id for _, r in servicer.asked] == ["", "m-1"]
    # The rebalance timeout of v0 is the session timeout, as in Kafka.
    await groups.join_group(_requests(groups.JOIN_GROUP, 0),
                            _call(servicer, groups.JOIN_GROUP, 0))
    assert servicer.asked[-1][1].rebalance_timeout_ms == 10_000


async def test_join_from_v4_is_told_its_member_id_is_required() -> None:
    servicer = GroupsServicer()
    response = await groups.join_group(_requests(groups.JOIN_GROUP, 9),
                                       _call(servicer, groups.JOIN_GROUP, 9))
    assert response.error_code is KafkaError.member_id_required
    assert response.member_id == "m-1"
    assert response.protocol_type is None and response.protocol_name is None
    assert len(servicer.asked) == 1
    joined = servicer.asked[0][1]
    assert joined.client_id == "client" and joined.protocols[0].metadata == b"subscription"


async def test_find_coordinator_names_this_gateway_or_refuses_per_key() -> None:
    servicer = GroupsServicer()
    servicer.denied = {"h"}
    response = await groups.find_coordinator(_requests(groups.FIND_COORDINATOR, 4),
                                             _call(servicer, groups.FIND_COORDINATOR, 4))
    by_key = {c.key: c for c in response.coordinators}
    assert (by_key["g"].node_id, by_key["g"].host, by_key["g"].port) == (7, "gw.example", 9092)
    assert by_key["h"].error_code is KafkaError.group_authorization_failed
    assert by_key["h"].node_id == -1
    old = await groups.find_coordinator(
        _request(groups.FIND_COORDINATOR, 1, "FindCoordinatorRequest", key="g", key_type=2),
        _call(servicer, groups.FIND_COORDINATOR, 1))
    assert old.error_code is KafkaError.invalid_request


async def test_leave_names_each_member_and_a_refusal_is_the_groups() -> None:
    servicer = GroupsServicer()
    response = await groups.leave_group(_requests(groups.LEAVE_GROUP, 5),
                                        _call(servicer, groups.LEAVE_GROUP, 5))
    assert response.error_code is KafkaError.none
    assert [(m.member_id, m.error_code) for m in response.members] == [
        ("m", KafkaError.none), ("gone", KafkaError.unknown_member_id)]
    servicer.refuse = CallRefused(ErrorCode.GROUP_AUTHORIZATION_FAILED, "no")
    refused = await groups.leave_group(_requests(groups.LEAVE_GROUP, 5),
                                       _call(servicer, groups.LEAVE_GROUP, 5))
    assert refused.error_code is KafkaError.group_authorization_failed


async def test_commit_refused_whole_answers_every_partition() -> None:
    servicer = GroupsServicer()
    servicer.refuse = CallRefused(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "no")
    response = await offsets.offset_commit(_requests(offsets.OFFSET_COMMIT, 9),
                                           _call(servicer, offsets.OFFSET_COMMIT, 9))
    codes = [p.error_code for t in response.topics for p in t.partitions]
    assert codes == [KafkaError.topic_authorization_failed]
    asked = servicer.asked[0][1]
    assert (asked.generation_id, asked.member_id) == (3, "m")
    assert (asked.partitions[0].offset, asked.partitions[0].leader_epoch) == (5, 1)


async def test_offset_fetch_answers_every_group_of_a_batch() -> None:
    servicer = GroupsServicer()
    response = await offsets.offset_fetch(_requests(offsets.OFFSET_FETCH, 8),
                                          _call(servicer, offsets.OFFSET_FETCH, 8))
    by_group = {g.group_id: g for g in response.groups}
    assert by_group["g"].topics[0].partitions[0].committed_offset == 42
    # No topics named: every committed partition of the group.
    assert by_group["h"].topics[0].partitions[0].committed_offset == 7
    assert [r.partitions for _, r in servicer.asked][1] == []


async def test_offset_fetch_passes_require_stable_and_its_answer() -> None:
    servicer = GroupsServicer()
    request = _request(offsets.OFFSET_FETCH, 7, "OffsetFetchRequest", group_id="g",
                       topics=(_nested(offsets.OFFSET_FETCH, 7, "OffsetFetchRequestTopic",
                                       name="t", partition_indexes=(0,)),),
                       require_stable=True)
    response = await offsets.offset_fetch(request, _call(servicer, offsets.OFFSET_FETCH, 7))
    assert servicer.asked[0][1].require_stable
    assert response.topics[0].partitions[0].error_code is KafkaError.unstable_offset_commit


async def test_group_admin_filters_and_unknown_groups() -> None:
    servicer = GroupsServicer()
    listed = await group_admin.list_groups(
        _request(group_admin.LIST_GROUPS, 5, "ListGroupsRequest", states_filter=("stable",),
                 types_filter=()), _call(servicer, group_admin.LIST_GROUPS, 5))
    assert [(g.group_id, g.group_state, g.group_type) for g in listed.groups] == [
        ("a", "Stable", "classic")]
    consumer_only = await group_admin.list_groups(
        _request(group_admin.LIST_GROUPS, 5, "ListGroupsRequest", states_filter=(),
                 types_filter=("consumer",)), _call(servicer, group_admin.LIST_GROUPS, 5))
    assert consumer_only.groups == ()
    described = await group_admin.describe_groups(
        _requests(group_admin.DESCRIBE_GROUPS, 6), _call(servicer, group_admin.DESCRIBE_GROUPS, 6))
    known, unknown = described.groups
    assert known.members[0].member_assignment == b"a"
    assert known.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
    assert unknown.error_code is KafkaError.group_id_not_found
    old = await group_admin.describe_groups(
        _requests(group_admin.DESCRIBE_GROUPS, 5), _call(servicer, group_admin.DESCRIBE_GROUPS, 5))
    assert (old.groups[1].error_code, old.groups[1].group_state) == (KafkaError.none, "Dead")
