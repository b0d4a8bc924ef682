"""Kafka's group admin APIs on the gateway's Kafka listener: ListGroups,
DescribeGroups and DeleteGroups.

A gateway answers for the whole cluster (it is every group's coordinator to Kafka
clients), so ListGroups lists every shard, through the servicer. Strand's groups are
Kafka's classic groups: ListGroups v5's type filter keeps them only for "classic".
"""

from __future__ import annotations

import asyncio
from typing import Any

from services.gateway.kafka.call import Handler, KafkaCall
from services.gateway.kafka.messages import build, kafka_error
from services.gateway.kafka.replies import NO_THROTTLE, ask, module_of, pb_code, strand_code
from strand.errors import ErrorCode
from strand.security.acl import Operation, ResourceType
from strand.v1 import groups_pb2 as pb

__all__ = ["HANDLERS", "VERSIONS", "group_operations"]

LIST_GROUPS, DESCRIBE_GROUPS, DELETE_GROUPS = 16, 15, 42
CLASSIC = "classic"
# Kafka's "not asked for" authorized operations (DescribeGroups v3+).
OPERATIONS_NOT_ASKED = -(2**31)
# Kafka's AclOperation codes of the operations a group has.
_GROUP_OPERATIONS = {Operation.READ: 3, Operation.DELETE: 6, Operation.DESCRIBE: 8}


def group_operations(call: KafkaCall, group_id: str) -> int:
    """The caller's operations on a group, as Kafka's bit field (bit = AclOperation)."""
    bits = 0
    for operation, code in _GROUP_OPERATIONS.items():
        if call.servicer.access.allowed(operation, ResourceType.GROUP, group_id):
            bits |= 1 << code
    return bits


async def list_groups(request: Any, call: KafkaCall) -> Any:
    module = module_of(request)
    answer = await ask(call.servicer.ListGroups, pb.ListGroupsRequest(), call, lambda exc:
                       pb.ListGroupsResponse(error_code=pb_code(exc.code),
                                             error_message=exc.message))
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    listed = []
    if not types or CLASSIC in types:
        for group in answer.groups:
            if states and group.state.lower() not in states:
                continue
            listed.append(build(module, "ListedGroup", group_id=group.group_id,
                                protocol_type=group.protocol_type, group_state=group.state,
                                group_type=CLASSIC))
    return build(module, "ListGroupsResponse", throttle_time=NO_THROTTLE,
                 error_code=kafka_error(answer.error_code), groups=tuple(listed))


async def _describe_one(request: Any, call: KafkaCall, group_id: str) -> Any:
    module = module_of(request)
    answer = await ask(call.servicer.DescribeGroup, pb.DescribeGroupRequest(group_id=group_id),
                       call, lambda exc: pb.DescribeGroupResponse(
                           error_code=pb_code(exc.code), error_message=exc.message,
                           state="Dead"))
    code = strand_code(answer.error_code)
    if code is ErrorCode.NONE and answer.state == "Dead" and request.__version__ >= 6:
        # From v6 (KIP-1043) an unknown group is an error; before, a dead group.
        code = ErrorCode.GROUP_ID_NOT_FOUND
        answer.error_message = f"group {group_id!r} does not exist"
    asked = getattr(request, "include_authorized_operations", False)
    return build(
        module, "DescribedGroup", error_code=kafka_error(code),
        error_message=answer.error_message or None, group_id=group_id,
        group_state=answer.state or "Dead", protocol_type=answer.protocol_type,
        protocol_data=answer.protocol,
        members=tuple(build(module, "DescribedGroupMember", member_id=m.member_id,
                            group_instance_id=m.group_instance_id or None,
                            client_id=m.client_id, client_host=m.client_host,
                            member_metadata=m.metadata, member_assignment=m.assignment)
                      for m in answer.members),
        authorized_operations=group_operations(call, group_id) if asked and
        code is ErrorCode.NONE else OPERATIONS_NOT_ASKED)


async def describe_groups(request: Any, call: KafkaCall) -> Any:
    described = await asyncio.gather(*(_describe_one(request, call, group_id)
                                       for group_id in request.groups))
    return build(module_of(request), "DescribeGroupsResponse", throttle_time=NO_THROTTLE,
                 groups=tuple(described))


async def delete_groups(request: Any, call: KafkaCall) -> Any:
    module = module_of(request)

    async def delete(group_id: str) -> Any:
        answer = await ask(call.servicer.DeleteGroup, pb.DeleteGroupRequest(group_id=group_id),
                           call, lambda exc: pb.DeleteGroupResponse(
                               error_code=pb_code(exc.code), error_message=exc.message))
        return build(module, "DeletableGroupResult", group_id=group_id,
                     error_code=kafka_error(answer.error_code))

    results = await asyncio.gather(*(delete(g) for g in request.groups_names))
    return build(module, "DeleteGroupsResponse", throttle_time=NO_THROTTLE,
                 results=tuple(results))


HANDLERS: dict[int, Handler] = {
    LIST_GROUPS: list_groups,
    DESCRIBE_GROUPS: describe_groups,
    DELETE_GROUPS: delete_groups,
}

VERSIONS: dict[int, tuple[int, int]] = {
    LIST_GROUPS: (0, 5),
    DESCRIBE_GROUPS: (0, 6),
    DELETE_GROUPS: (0, 2),
}
