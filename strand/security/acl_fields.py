"""ACL bindings and filters to and from the seven text fields of the wire's
``AclEntry`` (and the CLI's options): Kafka's names, one module that knows them all,
so the gateway, the controller and the SDK read and write entries alike."""

from __future__ import annotations

from collections.abc import Mapping

from strand.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    Operation,
    PatternType,
    ResourcePattern,
    ResourceType,
)

__all__ = ["FIELDS", "binding_from_fields", "fields_of", "filter_from_fields", "read_fields"]

FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host",
          "operation", "permission")


def read_fields(entry: object) -> dict[str, str]:
    """The seven fields of anything that has them as attributes (a wire ``AclEntry``)."""
    return {name: str(getattr(entry, name)) for name in FIELDS}


def binding_from_fields(fields: Mapping[str, str]) -> AclBinding:
    """A binding, validated (InvalidAclError says what is wrong). A missing pattern
    type is LITERAL, a missing host ``*``, as with Kafka's tools."""
    binding = AclBinding(
        ResourcePattern(ResourceType.parse(fields.get("resource_type", "")),
                        fields.get("resource_name", ""),
                        PatternType.parse(fields.get("pattern_type") or "LITERAL")),
        AccessControlEntry(fields.get("principal", ""), fields.get("host") or "*",
                           Operation.parse(fields.get("operation", "")),
                           AclPermissionType.parse(fields.get("permission") or "ALLOW")))
    binding.validate()
    return binding


def filter_from_fields(fields: Mapping[str, str]) -> AclBindingFilter:
    """A filter: an empty field matches anything."""
    acl_filter = AclBindingFilter(
        resource_type=ResourceType.parse(fields.get("resource_type") or "ANY"),
        name=fields.get("resource_name") or None,
        pattern_type=PatternType.parse(fields.get("pattern_type") or "ANY"),
        principal=fields.get("principal") or None,
        host=fields.get("host") or None,
        operation=Operation.parse(fields.get("operation") or "ANY"),
        permission=AclPermissionType.parse(fields.get("permission") or "ANY"))
    acl_filter.validate()
    return acl_filter


def fields_of(binding: AclBinding) -> dict[str, str]:
    pattern, entry = binding.pattern, binding.entry
    return {"resource_type": pattern.resource_type.value, "resource_name": pattern.name,
            "pattern_type": pattern.pattern_type.value, "principal": entry.principal,
            "host": entry.host, "operation": entry.operation.value,
            "permission": entry.permission.value}
