"""Kafka's ACL APIs on the gateway's Kafka listener: DescribeAcls, CreateAcls and
DeleteAcls, as the gateway servicer's own calls (the caller's rights to change ACLs,
validation and the write by the active controller apply unchanged).

Kafka sends resource types, pattern types, operations and permissions as numbers;
Strand's wire names them (:mod:`strand.security.acl_fields`). Kafka's cluster resource
is named ``kafka-cluster``, Strand's ``strand-cluster``: either is accepted, and
``kafka-cluster`` is what Kafka clients are shown. A number Kafka does not define for
ACLs, or UNKNOWN, is answered INVALID_REQUEST naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.gateway.kafka.call import CallRefused, Handler, KafkaCall
from services.gateway.kafka.messages import build, kafka_error
from services.gateway.kafka.replies import NO_THROTTLE, ask, module_of
from strand.errors import ErrorCode, InvalidRequestError
from strand.security.acl import CLUSTER_RESOURCE_NAME
from strand.v1 import security_pb2 as pb

__all__ = ["HANDLERS", "VERSIONS", "entry_of", "kafka_fields"]

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
KAFKA_CLUSTER = "kafka-cluster"

# Kafka's numbers (ResourceType, PatternType, AclOperation, AclPermissionType) and
# Strand's names; numbers Strand has no such thing for are absent.
RESOURCE_TYPES = {1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID"}
PATTERN_TYPES = {1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
OPERATIONS = {1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE",
              7: "ALTER", 8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS",
              11: "ALTER_CONFIGS", 12: "IDEMPOTENT_WRITE"}
PERMISSIONS = {1: "ANY", 2: "DENY", 3: "ALLOW"}
_TABLES: dict[str, Mapping[int, str]] = {
    "resource_type": RESOURCE_TYPES, "pattern_type": PATTERN_TYPES,
    "operation": OPERATIONS, "permission": PERMISSIONS}
_NUMBERS = {field: {name: code for code, name in table.items()}
            for field, table in _TABLES.items()}


def _named(field: str, code: int) -> str:
    name = _TABLES[field].get(code)
    if name is None:
        choices = ", ".join(f"{c} ({n})" for c, n in _TABLES[field].items())
        raise InvalidRequestError(f"ACL {field.replace('_', ' ')} {code} is not one Strand "
                                  f"knows: expected {choices}")
    return name


def entry_of(resource_type: int, resource_name: str | None, pattern_type: int,
             principal: str | None, host: str | None, operation: int,
             permission: int) -> pb.AclEntry:
    """The wire entry of a Kafka binding or filter (None: matches anything)."""
    type_name = _named("resource_type", resource_type)
    name = resource_name or ""
    if type_name == "CLUSTER" and name == KAFKA_CLUSTER:
        name = CLUSTER_RESOURCE_NAME
    return pb.AclEntry(resource_type=type_name, resource_name=name,
                       pattern_type=_named("pattern_type", pattern_type),
                       principal=principal or "", host=host or "",
                       operation=_named("operation", operation),
                       permission=_named("permission", permission))


def kafka_fields(entry: pb.AclEntry) -> dict[str, Any]:
    """A wire entry's fields as Kafka's numbers (the names of describe answers)."""
    name = entry.resource_name
    if entry.resource_type == "CLUSTER" and name == CLUSTER_RESOURCE_NAME:
        name = KAFKA_CLUSTER
    return {"resource_type": _NUMBERS["resource_type"].get(entry.resource_type, 0),
            "resource_name": name,
            "pattern_type": _NUMBERS["pattern_type"].get(entry.pattern_type, 0),
            "principal": entry.principal, "host": entry.host,
            "operation": _NUMBERS["operation"].get(entry.operation, 0),
            "permission_type": _NUMBERS["permission"].get(entry.permission, 0)}


def _filter_of(kafka_filter: Any) -> pb.AclEntry:
    return entry_of(kafka_filter.resource_type_filter, kafka_filter.resource_name_filter,
                    kafka_filter.pattern_type_filter, kafka_filter.principal_filter,
                    kafka_filter.host_filter, kafka_filter.operation,
                    kafka_filter.permission_type)


# -- DescribeAcls ------------------------------------------------------------------------------

async def describe_acls(request: Any, call: KafkaCall) -> Any:
    module = module_of(request)
    try:
        acl_filter = _filter_of(request)
    except InvalidRequestError as exc:
        answer = pb.DescribeAclsResponse(error_code=exc.code.name, error_message=str(exc))
    else:
        answer = await ask(call.servicer.DescribeAcls, pb.DescribeAclsRequest(filter=acl_filter),
                           call, lambda exc: pb.DescribeAclsResponse(
                               error_code=exc.code.name, error_message=exc.message))
    resources: dict[tuple[int, str, int], list[Any]] = {}
    for entry in answer.acls:
        fields = kafka_fields(entry)
        key = (fields["resource_type"], fields["resource_name"], fields["pattern_type"])
        resources.setdefault(key, []).append(build(
            module, "AclDescription", principal=fields["principal"], host=fields["host"],
            operation=fields["operation"], permission_type=fields["permission_type"]))
    return build(module, "DescribeAclsResponse", throttle_time=NO_THROTTLE,
                 error_code=kafka_error(answer.error_code),
                 error_message=answer.error_message or None,
                 resources=tuple(build(module, "DescribeAclsResource", resource_type=key[0],
                                       resource_name=key[1], pattern_type=key[2],
                                       acls=tuple(acls))
                                 for key, acls in resources.items()))


# -- CreateAcls --------------------------------------------------------------------------------

async def create_acls(request: Any, call: KafkaCall) -> Any:
    module = module_of(request)
    results: list[tuple[int, str | None] | None] = []
    sent: list[pb.AclEntry] = []
    for creation in request.creations:
        try:
            sent.append(entry_of(creation.resource_type, creation.resource_name,
                                 creation.resource_pattern_type, creation.principal,
                                 creation.host, creation.operation, creation.permission_type))
            results.append(None)
        except InvalidRequestError as exc:
            results.append((int(exc.code), str(exc)))
    if sent:
        answer = await ask(call.servicer.CreateAcls, pb.CreateAclsRequest(creations=sent),
                           call, lambda exc: _all_refused(exc, len(sent)))
        answered = iter(answer.results)
        results = [result or _outcome(next(answered)) for result in results]
    return build(module, "CreateAclsResponse", throttle_time=NO_THROTTLE, results=tuple(
        build(module, "AclCreationResult", error_code=kafka_error(code), error_message=why)
        for code, why in (result or (int(ErrorCode.NONE), None) for result in results)))


def _all_refused(exc: CallRefused, count: int) -> pb.CreateAclsResponse:
    return pb.CreateAclsResponse(results=[
        pb.AclResult(error_code=exc.code.name, error_message=exc.message)
        for _ in range(count)])


def _outcome(result: pb.AclResult) -> tuple[int, str | None]:
    return int(result.error_code), result.error_message or None


# -- DeleteAcls --------------------------------------------------------------------------------

async def delete_acls(request: Any, call: KafkaCall) -> Any:
    module = module_of(request)
    filters: list[pb.AclEntry | InvalidRequestError] = []
    for kafka_filter in request.filters:
        try:
            filters.append(_filter_of(kafka_filter))
        except InvalidRequestError as exc:
            filters.append(exc)
    sent = [f for f in filters if isinstance(f, pb.AclEntry)]
    answered: list[pb.DeleteAclsResponse.FilterResult] = []
    if sent:
        answer = await ask(call.servicer.DeleteAcls, pb.DeleteAclsRequest(filters=sent), call,
                           lambda exc: pb.DeleteAclsResponse(results=[
                               pb.DeleteAclsResponse.FilterResult(
                                   error_code=exc.code.name, error_message=exc.message)
                               for _ in sent]))
        answered = list(answer.results)
    remaining = iter(answered)
    results = []
    for item in filters:
        if isinstance(item, InvalidRequestError):
            results.append(build(module, "DeleteAclsFilterResult",
                                 error_code=kafka_error(item.code), error_message=str(item),
                                 matching_acls=()))
            continue
        result = next(remaining)
        results.append(build(
            module, "DeleteAclsFilterResult", error_code=kafka_error(result.error_code),
            error_message=result.error_message or None, matching_acls=tuple(
                build(module, "DeleteAclsMatchingAcl", error_code=kafka_error(ErrorCode.NONE),
                      error_message=None, **kafka_fields(deleted))
                for deleted in result.deleted)))
    return build(module, "DeleteAclsResponse", throttle_time=NO_THROTTLE,
                 filter_results=tuple(results))


HANDLERS: dict[int, Handler] = {DESCRIBE_ACLS: describe_acls, CREATE_ACLS: create_acls,
                                DELETE_ACLS: delete_acls}
VERSIONS: dict[int, tuple[int, int]] = {DESCRIBE_ACLS: (1, 3), CREATE_ACLS: (1, 3),
                                        DELETE_ACLS: (1, 3)}
