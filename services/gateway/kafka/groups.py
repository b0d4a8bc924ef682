"""Kafka's classic group membership APIs on the gateway's Kafka listener:
FindCoordinator, JoinGroup, SyncGroup, Heartbeat and LeaveGroup.

Each request becomes the gateway servicer's own call (ACLs, routing to the group's
coordinator shard apply unchanged) and its answer the response of the version the
client sent. The consumer protocol's bytes (subscriptions, assignments) pass through
untouched: the group's leader assigns, as in Kafka.

Version differences handled here: JoinGroup below v4 predates KIP-394, so a first join
is completed at once with the member id the coordinator names (the client never sees
MEMBER_ID_REQUIRED); v0 has no rebalance timeout (the session timeout serves, as in
Kafka); LeaveGroup from v3 names several members (each left in turn).
The coordinator of every group and transactional id is this gateway: it forwards to
the owning coordinator shard itself.
"""

from __future__ import annotations

import logging
from typing import Any

from services.gateway.kafka.call import CallRefused, Handler, KafkaCall
from services.gateway.kafka.messages import build, kafka_error, milliseconds
from services.gateway.kafka.replies import NO_THROTTLE, ask, module_of, pb_code, strand_code
from strand.errors import ErrorCode
from strand.security.acl import Operation, ResourceType
from strand.v1 import groups_pb2 as pb

__all__ = ["GROUP_LEVEL_ERRORS", "HANDLERS", "VERSIONS"]

log = logging.getLogger(__name__)

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
GROUP_KEY, TRANSACTION_KEY = 0, 1

# Errors about the whole group (or call), not one member or partition of it.
GROUP_LEVEL_ERRORS = frozenset({
    ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.INVALID_GROUP_ID, ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ErrorCode.REQUEST_TIMED_OUT,
})


def _instance(value: str | None) -> str:
    return value or ""


def _nullable(value: str) -> str | None:
    return value or None


# -- FindCoordinator ---------------------------------------------------------------------------

_KEY_RESOURCES = {GROUP_KEY: ResourceType.GROUP, TRANSACTION_KEY: ResourceType.TRANSACTIONAL_ID}


def _find_one(call: KafkaCall, key_type: int, key: str) -> tuple[ErrorCode, str | None]:
    """Whether this gateway coordinates ``key`` for the caller (it coordinates every
    key: it forwards to the coordinator shard), or why not."""
    resource = _KEY_RESOURCES.get(key_type)
    if resource is None:
        return ErrorCode.INVALID_REQUEST, (
            f"key type {key_type} is not served: 0 (group) and 1 (transaction) are")
    if not key:
        what = "group id" if key_type == GROUP_KEY else "transactional id"
        return (ErrorCode.INVALID_GROUP_ID if key_type == GROUP_KEY
                else ErrorCode.INVALID_REQUEST), f"the {what} must not be empty"
    refused = call.servicer.access.refusal(Operation.DESCRIBE, resource, key)
    if refused is not None:
        return refused.code, str(refused)
    return ErrorCode.NONE, None


async def find_coordinator(request: Any, call: KafkaCall) -> Any:
    module = module_of(request)
    key_type = getattr(request, "key_type", GROUP_KEY)
    node_id, host, port = call.broker_id, call.advertised_host, call.advertised_port
    if request.__version__ < 4:
        code, why = _find_one(call, key_type, request.key)
        found = code is ErrorCode.NONE
        return build(module, "FindCoordinatorResponse", throttle_time=NO_THROTTLE,
                     error_code=kafka_error(code), error_message=why,
                     node_id=node_id if found else -1, host=host if found else "",
                     port=port if found else -1)
    coordinators = []
    for key in request.coordinator_keys:
        code, why = _find_one(call, key_type, key)
        found = code is ErrorCode.NONE
        coordinators.append(build(
            module, "Coordinator", key=key, node_id=node_id if found else -1,
            host=host if found else "", port=port if found else -1,
            error_code=kafka_error(code), error_message=why))
    return build(module, "FindCoordinatorResponse", throttle_time=NO_THROTTLE,
                 coordinators=tuple(coordinators))


# -- JoinGroup -----------------------------------------------------------------------------------

def join_request(request: Any, call: KafkaCall, member_id: str) -> pb.JoinGroupRequest:
    session_ms = milliseconds(request.session_timeout)
    rebalance = getattr(request, "rebalance_timeout", None)
    return pb.JoinGroupRequest(
        group_id=request.group_id, member_id=member_id,
        group_instance_id=_instance(getattr(request, "group_instance_id", None)),
        client_id=call.client_id or "", protocol_type=request.protocol_type,
        protocols=[pb.GroupProtocol(name=p.name, metadata=p.metadata)
                   for p in request.protocols],
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=milliseconds(rebalance) if rebalance is not None else session_ms)


def join_response(request: Any, answer: pb.JoinGroupResponse) -> Any:
    module = module_of(request)
    failed = strand_code(answer.error_code) is not ErrorCode.NONE
    # From v7 the protocol type and name are null on errors; before, empty strings.
    nullable = request.__version__ >= 7
    protocol_name = answer.protocol_name or (None if nullable else "")
    return build(
        module, "JoinGroupResponse", throttle_time=NO_THROTTLE,
        error_code=kafka_error(answer.error_code),
        generation_id=answer.generation_id if not failed else -1,
        protocol_type=None if failed else request.protocol_type,
        protocol_name=protocol_name, leader=answer.leader_id, skip_assignment=False,
        member_id=answer.member_id,
        members=tuple(build(module, "JoinGroupResponseMember", member_id=m.member_id,
                            group_instance_id=_nullable(m.group_instance_id),
                            metadata=m.metadata) for m in answer.members))


def _join_refused(exc: CallRefused) -> pb.JoinGroupResponse:
    return pb.JoinGroupResponse(error_code=pb_code(exc.code), error_message=exc.message,
                                generation_id=-1)


async def join_group(request: Any, call: KafkaCall) -> Any:
    answer = await ask(call.servicer.JoinGroup, join_request(request, call, request.member_id),
                       call, _join_refused)
    code = strand_code(answer.error_code)
    if (code is ErrorCode.MEMBER_ID_REQUIRED and request.__version__ < 4
            and answer.member_id):
        # Before KIP-394 a first join is answered with its member id and generation in
        # one round: join again at once with the id the coordinator named.
        answer = await ask(call.servicer.JoinGroup,
                           join_request(request, call, answer.member_id), call, _join_refused)
    if strand_code(answer.error_code) is not ErrorCode.NONE:
        log.debug("join refused", extra={"group": request.group_id,
                                         "error": strand_code(answer.error_code).name,
                                         "why": answer.error_message})
    return join_response(request, answer)


# -- SyncGroup -----------------------------------------------------------------------------------

async def sync_group(request: Any, call: KafkaCall) -> Any:
    pb_request = pb.SyncGroupRequest(
        group_id=request.group_id, member_id=request.member_id,
        generation_id=request.generation_id,
        group_instance_id=_instance(getattr(request, "group_instance_id", None)),
        assignments=[pb.SyncGroupAssignment(member_id=a.member_id, assignment=a.assignment)
                     for a in request.assignments])
    answer = await ask(call.servicer.SyncGroup, pb_request, call, lambda exc:
                       pb.SyncGroupResponse(error_code=pb_code(exc.code),
                                            error_message=exc.message))
    code = strand_code(answer.error_code)
    asked_protocol = getattr(request, "protocol_name", None)
    if (code is ErrorCode.NONE and asked_protocol is not None and answer.protocol_name
            and asked_protocol != answer.protocol_name):
        # v5: the member names the protocol it joined with; the group chose another.
        code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    ok = code is ErrorCode.NONE
    return build(module_of(request), "SyncGroupResponse", throttle_time=NO_THROTTLE,
                 error_code=kafka_error(code),
                 protocol_type=getattr(request, "protocol_type", None) if ok else None,
                 protocol_name=(answer.protocol_name or None) if ok else None,
                 assignment=answer.assignment if ok else b"")


# -- Heartbeat -----------------------------------------------------------------------------------

async def heartbeat(request: Any, call: KafkaCall) -> Any:
    pb_request = pb.HeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id,
        generation_id=request.generation_id,
        group_instance_id=_instance(getattr(request, "group_instance_id", None)))
    answer = await ask(call.servicer.Heartbeat, pb_request, call, lambda exc:
                       pb.HeartbeatResponse(error_code=pb_code(exc.code),
                                            error_message=exc.message))
    return build(module_of(request), "HeartbeatResponse", throttle_time=NO_THROTTLE,
                 error_code=kafka_error(answer.error_code))


# -- LeaveGroup ----------------------------------------------------------------------------------

async def _leave_one(call: KafkaCall, group_id: str, member_id: str,
                     instance_id: str | None) -> tuple[ErrorCode, str]:
    if not member_id:
        # Removing a static member by its instance id alone (an admin's
        # removeMembersFromConsumerGroup) needs the member id here.
        return ErrorCode.UNKNOWN_MEMBER_ID, (
            f"group {group_id!r}: a member must be named by its member id to leave "
            f"(instance id {instance_id!r} alone is not enough here)")
    answer = await ask(call.servicer.LeaveGroup,
                       pb.LeaveGroupRequest(group_id=group_id, member_id=member_id), call,
                       lambda exc: pb.LeaveGroupResponse(error_code=pb_code(exc.code),
                                                         error_message=exc.message))
    return strand_code(answer.error_code), answer.error_message


async def leave_group(request: Any, call: KafkaCall) -> Any:
    module = module_of(request)
    if request.__version__ < 3:
        code, _ = await _leave_one(call, request.group_id, request.member_id, None)
        return build(module, "LeaveGroupResponse", throttle_time=NO_THROTTLE,
                     error_code=kafka_error(code))
    results = []
    group_code = ErrorCode.NONE
    for identity in request.members:
        code, _ = await _leave_one(call, request.group_id, identity.member_id,
                                   identity.group_instance_id)
        if code in GROUP_LEVEL_ERRORS:
            group_code = code
        results.append(build(module, "MemberResponse", member_id=identity.member_id,
                             group_instance_id=identity.group_instance_id,
                             error_code=kafka_error(code)))
    return build(module, "LeaveGroupResponse", throttle_time=NO_THROTTLE,
                 error_code=kafka_error(group_code), members=tuple(results))


HANDLERS: dict[int, Handler] = {
    FIND_COORDINATOR: find_coordinator,
    JOIN_GROUP: join_group,
    SYNC_GROUP: sync_group,
    HEARTBEAT: heartbeat,
    LEAVE_GROUP: leave_group,
}

VERSIONS: dict[int, tuple[int, int]] = {
    FIND_COORDINATOR: (0, 5),
    JOIN_GROUP: (0, 9),
    SYNC_GROUP: (0, 5),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 5),
}
