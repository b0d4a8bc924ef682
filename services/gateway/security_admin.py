"""The gateway's security calls: SCRAM authentication, and users and ACLs — listed
from the gateway's own copy of the metadata, changed through the active controller.
No gRPC here: the server module hands each call in with its answer-building."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from services.gateway.access import AccessControl
from services.gateway.authenticator import Authenticator
from strand.cluster.cache import MetadataCache
from strand.errors import ErrorCode, StrandError
from strand.security.acl import InvalidAclError
from strand.security.acl_fields import fields_of, filter_from_fields, read_fields
from strand.security.quota_fields import FilterComponent, filter_matches, parts_of
from strand.security.quotas import InvalidQuotaError
from strand.security.scram import MECHANISM
from strand.v1 import security_pb2 as pb

__all__ = ["SecurityCalls"]

# Forwards (method, request, refusal, the call's context) to the active controller;
# refusal(code, why) builds the answer when no controller takes it.
ToController = Callable[[str, Any, Callable[[Any, str], Any], Any], Awaitable[Any]]


class SecurityCalls:
    def __init__(self, cache: MetadataCache, access: AccessControl,
                 authenticator: Authenticator, to_controller: ToController) -> None:
        self.cache = cache
        self.access = access
        self.authenticator = authenticator
        self.to_controller = to_controller

    def sasl_authenticate(self, request: pb.SaslAuthenticateRequest
                          ) -> pb.SaslAuthenticateResponse:
        try:
            step = self.authenticator.sasl(request.mechanism, request.exchange_id,
                                           request.auth_bytes)
        except StrandError as exc:
            return pb.SaslAuthenticateResponse(error_code=exc.code.name,
                                               error_message=str(exc))
        return pb.SaslAuthenticateResponse(
            exchange_id=step.exchange_id, auth_bytes=step.auth_bytes,
            session_token=step.session_token, session_lifetime_ms=step.lifetime_ms)

    async def create_acls(self, request: pb.CreateAclsRequest,
                          context: Any) -> pb.CreateAclsResponse:
        response: pb.CreateAclsResponse = await self.to_controller(
            "CreateAcls", request, lambda code, why: pb.CreateAclsResponse(results=[
                pb.AclResult(error_code=code, error_message=why)
                for _ in request.creations]), context)
        return response

    async def delete_acls(self, request: pb.DeleteAclsRequest,
                          context: Any) -> pb.DeleteAclsResponse:
        response: pb.DeleteAclsResponse = await self.to_controller(
            "DeleteAcls", request, lambda code, why: pb.DeleteAclsResponse(results=[
                pb.DeleteAclsResponse.FilterResult(error_code=code, error_message=why)
                for _ in request.filters]), context)
        return response

    def describe_acls(self, request: pb.DescribeAclsRequest) -> pb.DescribeAclsResponse:
        try:
            acl_filter = filter_from_fields(read_fields(request.filter))
        except InvalidAclError as exc:
            return pb.DescribeAclsResponse(error_code=ErrorCode.INVALID_REQUEST.name,
                                           error_message=f"invalid ACL filter: {exc}")
        return pb.DescribeAclsResponse(acls=[
            pb.AclEntry(**fields_of(binding))
            for binding in self.cache.security.acls.bindings() if acl_filter.matches(binding)])

    async def alter_users(self, request: pb.AlterUserScramCredentialsRequest, context: Any
                          ) -> pb.AlterUserScramCredentialsResponse:
        users = [d.user for d in request.deletions] + [u.user for u in request.upsertions]
        response: pb.AlterUserScramCredentialsResponse = await self.to_controller(
            "AlterUserScramCredentials", request,
            lambda code, why: pb.AlterUserScramCredentialsResponse(results=[
                pb.UserResult(user=user, error_code=code, error_message=why)
                for user in users]), context)
        return response

    async def alter_quotas(self, request: pb.AlterClientQuotasRequest, context: Any
                           ) -> pb.AlterClientQuotasResponse:
        response: pb.AlterClientQuotasResponse = await self.to_controller(
            "AlterClientQuotas", request,
            lambda code, why: pb.AlterClientQuotasResponse(entries=[
                pb.AlterClientQuotasResponse.Entry(entity=e.entity, error_code=code,
                                                   error_message=why)
                for e in request.entries]), context)
        return response

    def describe_quotas(self, request: pb.DescribeClientQuotasRequest
                        ) -> pb.DescribeClientQuotasResponse:
        components = [FilterComponent(c.entity_type, c.match or "ANY", c.name)
                      for c in request.components]
        try:
            for component in components:
                component.validate()
        except InvalidQuotaError as exc:
            return pb.DescribeClientQuotasResponse(
                error_code=ErrorCode.INVALID_REQUEST.name,
                error_message=f"invalid client quota filter: {exc}")
        response = pb.DescribeClientQuotasResponse()
        for entity, values in self.cache.security.quotas.items():
            if filter_matches(entity, components, request.strict):
                response.entries.add(
                    entity=pb.QuotaEntity(parts=[
                        pb.QuotaEntityPart(entity_type=kind, name=name, is_default=default)
                        for kind, name, default in parts_of(entity)]),
                    values=[pb.QuotaValue(key=k, value=v)
                            for k, v in values.as_dict().items()])
        return response

    def describe_users(self, request: pb.DescribeUserScramCredentialsRequest
                       ) -> pb.DescribeUserScramCredentialsResponse:
        known = self.cache.security.users
        response = pb.DescribeUserScramCredentialsResponse()
        for name in list(request.users) or sorted(known):
            credential = known.get(name)
            if credential is None:
                response.users.add(user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND.name,
                                   error_message=f"user {name!r} has no {MECHANISM} "
                                                 "credential")
            else:
                response.users.add(user=name, mechanism=credential.mechanism,
                                   iterations=credential.iterations)
        return response
