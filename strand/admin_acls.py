"""The admin client's security calls (Kafka's Admin names): ACLs, SCRAM users and
client quotas.

::

    from strand import Admin
    from strand.security.acl import (AccessControlEntry, AclBinding, AclBindingFilter,
                                     AclPermissionType, Operation, PatternType,
                                     ResourcePattern, ResourceType)

    with Admin("127.0.0.1:7070", security_protocol="SASL_PLAINTEXT",
               sasl_plain_username="admin", sasl_plain_password="...") as admin:
        admin.upsert_scram_user("alice", "alice-secret")
        admin.create_acls([AclBinding(
            ResourcePattern(ResourceType.TOPIC, "orders.", PatternType.PREFIXED),
            AccessControlEntry("User:alice", "*", Operation.WRITE, AclPermissionType.ALLOW))])

A password never leaves the client: its salted SCRAM form is computed here and only
that is sent (Kafka's AlterUserScramCredentials does the same).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from strand.errors import ErrorCode, error_for
from strand.security.acl import AclBinding, AclBindingFilter
from strand.security.acl_fields import binding_from_fields, fields_of, read_fields
from strand.security.quota_fields import FilterComponent, entity_from_parts, parts_of
from strand.security.quotas import QuotaEntity, QuotaValues
from strand.security.scram import DEFAULT_ITERATIONS, MECHANISM, make_credential
from strand.v1 import security_pb2 as pb

__all__ = ["AclAdmin", "ScramUserDescription"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ScramUserDescription:
    name: str
    mechanism: str
    iterations: int


def _entry(binding: AclBinding) -> pb.AclEntry:
    return pb.AclEntry(**fields_of(binding))


def _filter_entry(acl_filter: AclBindingFilter) -> pb.AclEntry:
    return pb.AclEntry(
        resource_type=acl_filter.resource_type.value, resource_name=acl_filter.name or "",
        pattern_type=acl_filter.pattern_type.value, principal=acl_filter.principal or "",
        host=acl_filter.host or "", operation=acl_filter.operation.value,
        permission=acl_filter.permission.value)


def _binding(entry: pb.AclEntry) -> AclBinding:
    return binding_from_fields(read_fields(entry))


def _quota_entity(entity: QuotaEntity) -> pb.QuotaEntity:
    return pb.QuotaEntity(parts=[pb.QuotaEntityPart(entity_type=kind, name=name,
                                                    is_default=default)
                                 for kind, name, default in parts_of(entity)])


def _raise_first(failures: list[tuple[str, int, str]], what: str) -> None:
    """(the thing, its error code, message) of each failure: raise the first's typed
    error, naming the others."""
    if not failures:
        return
    (thing, code, message), *others = failures
    text = f"{what} {thing}: {message or ErrorCode(code).name}"
    if others:
        text += " [also failed: " + ", ".join(f"{t} ({m})" for t, _, m in others) + "]"
    raise error_for(code, text)


class AclAdmin:
    """Mixed into :class:`strand.admin.Admin`: its stub and its call plumbing."""

    _stub: Any

    def _call(self, method: Callable[..., T], request: Any, what: str,
              timeout_ms: float | None = None) -> T:
        raise NotImplementedError

    # ---------------------------------------------------------------- ACLs

    def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Add the bindings (adding one that exists changes nothing)."""
        for binding in bindings:
            binding.validate()
        if not bindings:
            return
        response: pb.CreateAclsResponse = self._call(
            self._stub.CreateAcls, pb.CreateAclsRequest(
                creations=[_entry(b) for b in bindings]), "CreateAcls")
        _raise_first([(str(b), r.error_code, r.error_message)
                      for b, r in zip(bindings, response.results, strict=True)
                      if r.error_code], "cannot create ACL")

    def describe_acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """The bindings ``acl_filter`` matches (default: every one)."""
        response: pb.DescribeAclsResponse = self._call(
            self._stub.DescribeAcls,
            pb.DescribeAclsRequest(filter=_filter_entry(acl_filter or AclBindingFilter())),
            "DescribeAcls")
        if response.error_code:
            raise error_for(response.error_code, response.error_message)
        return [_binding(entry) for entry in response.acls]

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclBinding]:
        """Delete every binding one of ``filters`` matches; the deleted bindings."""
        if not filters:
            return []
        response: pb.DeleteAclsResponse = self._call(
            self._stub.DeleteAcls,
            pb.DeleteAclsRequest(filters=[_filter_entry(f) for f in filters]), "DeleteAcls")
        _raise_first([(str(f), r.error_code, r.error_message)
                      for f, r in zip(filters, response.results, strict=True)
                      if r.error_code], "cannot delete ACLs matching")
        return [_binding(entry) for result in response.results for entry in result.deleted]

    # ---------------------------------------------------------------- SCRAM users

    def upsert_scram_user(self, name: str, password: str,
                          iterations: int = DEFAULT_ITERATIONS) -> None:
        """Create user ``name`` or change its password (SCRAM-SHA-512)."""
        credential = make_credential(password, iterations)
        self._alter_users(pb.AlterUserScramCredentialsRequest(upsertions=[
            pb.ScramCredentialUpsertion(
                user=name, mechanism=credential.mechanism, iterations=credential.iterations,
                salt=credential.salt, stored_key=credential.stored_key,
                server_key=credential.server_key)]))

    def delete_scram_user(self, name: str) -> None:
        """Remove user ``name``'s credential (ResourceNotFoundError if it has none);
        its sessions end with it."""
        self._alter_users(pb.AlterUserScramCredentialsRequest(deletions=[
            pb.ScramCredentialDeletion(user=name, mechanism=MECHANISM)]))

    def describe_scram_users(self, names: Sequence[str] = ()) -> list[ScramUserDescription]:
        """The users with a credential (``names``: only these; one without a
        credential raises ResourceNotFoundError)."""
        response: pb.DescribeUserScramCredentialsResponse = self._call(
            self._stub.DescribeUserScramCredentials,
            pb.DescribeUserScramCredentialsRequest(users=list(names)),
            "DescribeUserScramCredentials")
        _raise_first([(repr(u.user), u.error_code, u.error_message)
                      for u in response.users if u.error_code], "cannot describe user")
        return [ScramUserDescription(u.user, u.mechanism, u.iterations)
                for u in response.users]

    # ---------------------------------------------------------------- client quotas

    def alter_client_quotas(self, entity: QuotaEntity, set: Mapping[str, float] | None = None,
                            remove: Sequence[str] = (), validate_only: bool = False) -> None:
        """Set (``set``: producer_byte_rate, consumer_byte_rate in bytes/s,
        request_percentage) and remove quotas of one entity (a user, a client id, both;
        DEFAULT for the default of a type)."""
        ops = [(key, float(value)) for key, value in (set or {}).items()]
        QuotaValues().altered([*ops, *((key, None) for key in remove)])  # checked here first
        request = pb.AlterClientQuotasRequest(validate_only=validate_only, entries=[
            pb.AlterClientQuotasRequest.Entry(
                entity=_quota_entity(entity),
                ops=[*(pb.AlterClientQuotasRequest.Op(key=k, value=v) for k, v in ops),
                     *(pb.AlterClientQuotasRequest.Op(key=k, remove=True) for k in remove)])])
        response: pb.AlterClientQuotasResponse = self._call(
            self._stub.AlterClientQuotas, request, "AlterClientQuotas")
        _raise_first([(str(entity), e.error_code, e.error_message)
                      for e in response.entries if e.error_code], "cannot alter quotas of")

    def describe_client_quotas(self, components: Sequence[FilterComponent] = (),
                               strict: bool = False
                               ) -> list[tuple[QuotaEntity, dict[str, float]]]:
        """The entities with quotas the filter matches (default: all), and their quotas."""
        response: pb.DescribeClientQuotasResponse = self._call(
            self._stub.DescribeClientQuotas, pb.DescribeClientQuotasRequest(
                strict=strict, components=[
                    pb.DescribeClientQuotasRequest.Component(
                        entity_type=c.entity_type, match=c.match, name=c.name)
                    for c in components]), "DescribeClientQuotas")
        if response.error_code:
            raise error_for(response.error_code, response.error_message)
        return [(entity_from_parts((p.entity_type, p.name, p.is_default)
                                   for p in e.entity.parts),
                 {v.key: v.value for v in e.values}) for e in response.entries]

    def _alter_users(self, request: pb.AlterUserScramCredentialsRequest) -> None:
        response: pb.AlterUserScramCredentialsResponse = self._call(
            self._stub.AlterUserScramCredentials, request, "AlterUserScramCredentials")
        _raise_first([(repr(r.user), r.error_code, r.error_message)
                      for r in response.results if r.error_code], "cannot change user")
