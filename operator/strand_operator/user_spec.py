"""What a StrandUser resource asks for: a principal ``User:<name>``, how it
authenticates (a SCRAM-SHA-512 password, or a TLS client certificate), its ACLs and
its client quotas, read and checked into values the reconciliation compares with
what Strand has."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from strand.security.acl import (
    CLUSTER_RESOURCE_NAME,
    WILDCARD_HOST,
    AccessControlEntry,
    AclBinding,
    AclPermissionType,
    InvalidAclError,
    Operation,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from strand.security.quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE
from strand.security.scram import validate_username
from strand_operator.topic_spec import GROUP, VERSION

__all__ = [
    "GROUP",
    "KIND",
    "PLURAL",
    "VERSION",
    "Authentication",
    "DesiredUser",
    "InvalidUserSpec",
    "PasswordRef",
    "desired_user",
    "principal_of",
]

KIND = "StrandUser"
PLURAL = "strandusers"

# The CRD's names for what Strand calls ResourceType and PatternType (Strimzi's).
_RESOURCE_TYPES = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP,
                   "cluster": ResourceType.CLUSTER,
                   "transactionalId": ResourceType.TRANSACTIONAL_ID}
_PATTERN_TYPES = {"literal": PatternType.LITERAL, "prefix": PatternType.PREFIXED}
_PERMISSIONS = {"allow": AclPermissionType.ALLOW, "deny": AclPermissionType.DENY}
_INT64_MAX = (1 << 63) - 1
_QUOTAS = {"producerByteRate": PRODUCER_BYTE_RATE, "consumerByteRate": CONSUMER_BYTE_RATE,
           "requestPercentage": REQUEST_PERCENTAGE}


class Authentication(enum.Enum):
    SCRAM_SHA_512 = "scram-sha-512"  # a password; the credential is the operator's to keep
    TLS = "tls"  # a client certificate of the cluster's CA, common name = the user's name


class InvalidUserSpec(ValueError):
    """A StrandUser's spec that cannot be carried out; ``reason`` is the Ready
    condition's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class PasswordRef:
    """The key of a Secret (in the StrandUser's namespace) holding the password."""

    secret: str
    key: str

    def describe(self) -> str:
        return f"key {self.key!r} of Secret {self.secret!r}"


@dataclass(frozen=True, slots=True)
class DesiredUser:
    username: str
    authentication: Authentication
    # SCRAM only: where the password comes from; None: the operator generates one.
    password_ref: PasswordRef | None = None
    acls: frozenset[AclBinding] = frozenset()
    quotas: Mapping[str, float] = field(default_factory=dict)  # Strand's quota keys

    @property
    def principal(self) -> str:
        return principal_of(self.username)

    @property
    def uses_password(self) -> bool:
        return self.authentication is Authentication.SCRAM_SHA_512


def principal_of(username: str) -> str:
    return f"User:{username}"


def desired_user(metadata_name: str, spec: Mapping[str, Any]) -> DesiredUser:
    """The user ``spec`` asks for; InvalidUserSpec saying which field is wrong.

    The CRD's schema checks shapes and enums before a StrandUser is stored; this
    checks again (a schema can be bypassed, e.g. by an older CRD) and adds what the
    schema cannot say: Strand's own rules for a username and for an ACL (an operation
    the resource type has, the cluster's one name).
    """
    try:
        validate_username(metadata_name)
    except ValueError as exc:
        raise InvalidUserSpec("InvalidSpec", f"metadata.name {metadata_name!r} cannot be a "
                              f"Strand username: {exc}") from None
    authentication, password_ref = _authentication(spec.get("authentication"))
    if password_ref is not None and password_ref.secret == metadata_name:
        raise InvalidUserSpec("InvalidSpec", f"spec.authentication.password names Secret "
                              f"{metadata_name!r}, which the operator writes itself (the "
                              "user's Secret); keep the password in another Secret")
    return DesiredUser(metadata_name, authentication, password_ref,
                       _acls(principal_of(metadata_name), spec.get("authorization")),
                       _quotas(spec.get("quotas")))


def _mapping(value: object, where: str, reason: str = "InvalidSpec") -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidUserSpec(reason, f"{where} must be a map, got {value!r}")
    return value


def _text(value: object, where: str, reason: str = "InvalidSpec") -> str:
    if not isinstance(value, str) or not value:
        raise InvalidUserSpec(reason, f"{where} must be a non-empty string, got {value!r}")
    return value


def _authentication(raw: object) -> tuple[Authentication, PasswordRef | None]:
    where = "spec.authentication"
    if raw is None:
        raise InvalidUserSpec("InvalidSpec", f"{where} is missing: give type scram-sha-512 "
                              "(a password) or tls (a client certificate)")
    spec = _mapping(raw, where)
    kind = spec.get("type")
    try:
        authentication = Authentication(kind)
    except ValueError:
        raise InvalidUserSpec("InvalidSpec", f"{where}.type must be scram-sha-512 or tls, "
                              f"got {kind!r}") from None
    password = spec.get("password")
    if password is None:
        return authentication, None
    if authentication is Authentication.TLS:
        raise InvalidUserSpec("InvalidSpec", f"{where}.password is for scram-sha-512 only: "
                              "a tls user proves itself with its certificate")
    ref = _mapping(_mapping(_mapping(password, f"{where}.password").get("valueFrom"),
                            f"{where}.password.valueFrom").get("secretKeyRef"),
                   f"{where}.password.valueFrom.secretKeyRef")
    return authentication, PasswordRef(
        _text(ref.get("name"), f"{where}.password.valueFrom.secretKeyRef.name"),
        _text(ref.get("key"), f"{where}.password.valueFrom.secretKeyRef.key"))


def _acls(principal: str, raw: object) -> frozenset[AclBinding]:
    """Every (rule, operation) as one binding of ``principal``, checked as Strand
    checks a new ACL."""
    if raw is None:
        return frozenset()
    spec = _mapping(raw, "spec.authorization", "InvalidAcl")
    if spec.get("type") != "simple":
        raise InvalidUserSpec("InvalidAcl", "spec.authorization.type must be simple (ACLs "
                              f"enforced by the gateways), got {spec.get('type')!r}")
    rules = spec.get("acls") or []
    if not isinstance(rules, list):
        raise InvalidUserSpec("InvalidAcl", f"spec.authorization.acls must be a list, "
                              f"got {rules!r}")
    bindings: set[AclBinding] = set()
    for index, rule in enumerate(rules):
        bindings.update(_rule(principal, rule, f"spec.authorization.acls[{index}]"))
    return frozenset(bindings)


def _choice(table: Mapping[str, Any], value: object, where: str) -> Any:
    if not isinstance(value, str) or value not in table:
        raise InvalidUserSpec("InvalidAcl", f"{where} must be one of "
                              f"{', '.join(table)}, got {value!r}")
    return table[value]


def _rule(principal: str, raw: object, where: str) -> list[AclBinding]:
    rule = _mapping(raw, where, "InvalidAcl")
    resource = _mapping(rule.get("resource"), f"{where}.resource", "InvalidAcl")
    resource_type: ResourceType = _choice(_RESOURCE_TYPES, resource.get("type"),
                                          f"{where}.resource.type")
    pattern_type: PatternType = _choice(_PATTERN_TYPES, resource.get("patternType", "literal"),
                                        f"{where}.resource.patternType")
    default_name = CLUSTER_RESOURCE_NAME if resource_type is ResourceType.CLUSTER else None
    name = _text(resource.get("name", default_name), f"{where}.resource.name", "InvalidAcl")
    permission: AclPermissionType = _choice(_PERMISSIONS, rule.get("type", "allow"),
                                            f"{where}.type")
    host = _text(rule.get("host", WILDCARD_HOST), f"{where}.host", "InvalidAcl")
    operations = rule.get("operations")
    if not isinstance(operations, list) or not operations:
        raise InvalidUserSpec("InvalidAcl", f"{where}.operations must be a non-empty list "
                              f"of operations (Read, Write, Describe, ...), got {operations!r}")
    bindings = []
    for text in operations:
        try:
            operation = Operation.parse(str(text))
            binding = AclBinding(ResourcePattern(resource_type, name, pattern_type),
                                 AccessControlEntry(principal, host, operation, permission))
            binding.validate()
        except InvalidAclError as exc:
            raise InvalidUserSpec("InvalidAcl", f"{where}: {exc}") from None
        bindings.append(binding)
    return bindings


def _quotas(raw: object) -> dict[str, float]:
    if raw is None:
        return {}
    spec = _mapping(raw, "spec.quotas", "InvalidQuota")
    unknown = sorted(set(spec) - set(_QUOTAS))
    if unknown:
        raise InvalidUserSpec("InvalidQuota", f"spec.quotas has unknown keys {unknown}: "
                              f"expected {', '.join(_QUOTAS)}")
    quotas = {}
    for key, value in spec.items():
        if value is None:
            continue
        if type(value) is not int or value < 1:
            raise InvalidUserSpec("InvalidQuota", f"spec.quotas.{key} must be an integer of "
                                  f"at least 1, got {value!r}")
        if value > _INT64_MAX:  # the CRD's int64 (and float() overflows past ~1e308)
            raise InvalidUserSpec("InvalidQuota", f"spec.quotas.{key} must be at most "
                                  f"{_INT64_MAX}, got {value!r}")
        quotas[_QUOTAS[key]] = float(value)
    return quotas
