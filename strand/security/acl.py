"""Kafka's access control lists: bindings, the filters that find and delete them, and
an in-memory index of them.

A binding says that a principal is allowed (or denied) an operation on the resources
a pattern names, from a host, exactly as Kafka's ``AclBinding``. Bindings are stored
in etcd one key each (``AclBinding.key``: the same binding added twice is one key)
as canonical JSON; the index answers "which bindings apply to this resource" without
scanning them all, for the authorizer.
"""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Self

from strand.security.principal import WILDCARD_PRINCIPAL, Principal

__all__ = [
    "CLUSTER_RESOURCE_NAME", "VALID_OPERATIONS", "WILDCARD_HOST", "WILDCARD_RESOURCE",
    "AccessControlEntry", "AclBinding", "AclBindingFilter", "AclIndex",
    "AclPermissionType", "InvalidAclError", "Operation", "PatternType",
    "ResourcePattern", "ResourceType",
]

CLUSTER_RESOURCE_NAME = "strand-cluster"
"""The name of the one CLUSTER resource (Kafka's ``kafka-cluster``)."""
WILDCARD_RESOURCE = "*"
"""A LITERAL pattern with this name applies to every resource of its type."""
WILDCARD_HOST = "*"
"""An entry with this host applies from every host."""


class InvalidAclError(ValueError):
    """A binding, filter or name that cannot be an ACL: the message says what is wrong
    and what would be right."""


def _squash(text: str) -> str:
    return text.strip().upper().replace("-", "").replace("_", "")


class _KafkaName(enum.Enum):
    """An enum whose values are Kafka's names, parsed as leniently as Kafka's tools:
    any case, words joined by ``-``, ``_`` or nothing (``describe-configs``,
    ``DescribeConfigs``)."""

    @classmethod
    def parse(cls, text: str) -> Self:
        wanted = _squash(text)
        for member in cls:
            if _squash(member.value) == wanted:
                return member
        choices = ", ".join(member.value for member in cls)
        raise InvalidAclError(f"unknown {_NOUNS.get(cls.__name__, cls.__name__)} {text!r}: "
                              f"expected one of {choices} (any case, '-' or '_' "
                              "between words)")


class ResourceType(_KafkaName):
    ANY = "ANY"
    TOPIC = "TOPIC"
    GROUP = "GROUP"
    CLUSTER = "CLUSTER"
    TRANSACTIONAL_ID = "TRANSACTIONAL_ID"


class PatternType(_KafkaName):
    ANY = "ANY"
    MATCH = "MATCH"
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Operation(_KafkaName):
    ANY = "ANY"
    ALL = "ALL"
    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DELETE = "DELETE"
    ALTER = "ALTER"
    DESCRIBE = "DESCRIBE"
    CLUSTER_ACTION = "CLUSTER_ACTION"
    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"
    ALTER_CONFIGS = "ALTER_CONFIGS"
    IDEMPOTENT_WRITE = "IDEMPOTENT_WRITE"


class AclPermissionType(_KafkaName):
    ANY = "ANY"
    DENY = "DENY"
    ALLOW = "ALLOW"


_NOUNS = {"ResourceType": "resource type", "PatternType": "pattern type",
          "Operation": "operation", "AclPermissionType": "permission type"}

_O = Operation
VALID_OPERATIONS: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset({_O.READ, _O.WRITE, _O.CREATE, _O.DELETE, _O.ALTER,
                                   _O.DESCRIBE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
                                   _O.ALL}),
    ResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE, _O.ALL}),
    ResourceType.CLUSTER: frozenset({_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS,
                                     _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE, _O.ALTER,
                                     _O.DESCRIBE, _O.ALL}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE, _O.ALL}),
}
"""The operations an ACL may name for each resource type (Kafka's table)."""


def _names(operations: frozenset[Operation]) -> str:
    """In the enum's order, ALL last."""
    named = [op for op in Operation if op in operations and op is not Operation.ALL]
    return ", ".join([op.value for op in named] + ["ALL"] * (Operation.ALL in operations))


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """The resources a binding applies to: one name (LITERAL; ``*`` for all of the
    type) or every name starting with a prefix (PREFIXED)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def applies_to(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this pattern applies to the resource ``name`` of ``resource_type``
        (what Kafka's MATCH filter and its authorizer ask)."""
        if self.resource_type is not resource_type:
            return False
        if self.pattern_type is PatternType.LITERAL:
            return self.name in (name, WILDCARD_RESOURCE)
        return self.pattern_type is PatternType.PREFIXED and name.startswith(self.name)

    def __str__(self) -> str:
        return f"{self.resource_type.value}:{self.pattern_type.value}:{self.name}"


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who (``User:alice``, ``User:*``), from where (a host, ``*``), what and whether."""

    principal: str
    host: str
    operation: Operation
    permission: AclPermissionType


_JSON_FIELDS = frozenset({"resource_type", "name", "pattern_type", "principal", "host",
                          "operation", "permission"})


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: an entry bound to a resource pattern."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    def validate(self) -> None:
        """Refuses what Kafka refuses in a new ACL, and what cannot apply to anything
        (a CLUSTER ACL not on the cluster, a PREFIXED ``*``, an operation the resource
        type does not have)."""
        rtype, name, ptype = (self.pattern.resource_type, self.pattern.name,
                              self.pattern.pattern_type)
        entry = self.entry
        if rtype is ResourceType.ANY:
            raise InvalidAclError("resource type ANY is for filters; an ACL names one: "
                                  "TOPIC, GROUP, CLUSTER or TRANSACTIONAL_ID")
        if ptype in (PatternType.ANY, PatternType.MATCH):
            raise InvalidAclError(f"pattern type {ptype.value} is for filters; an ACL's "
                                  "pattern is LITERAL or PREFIXED")
        if entry.operation is Operation.ANY:
            raise InvalidAclError("operation ANY is for filters; an ACL names one "
                                  "operation, or ALL for every operation")
        if entry.permission is AclPermissionType.ANY:
            raise InvalidAclError("permission type ANY is for filters; an ACL is "
                                  "ALLOW or DENY")
        if entry.principal != WILDCARD_PRINCIPAL:
            try:
                Principal.parse(entry.principal)
            except ValueError as exc:
                raise InvalidAclError(f"{exc} (or {WILDCARD_PRINCIPAL!r} for every "
                                      "principal)") from None
        if not entry.host:
            raise InvalidAclError(f"host is empty; name a host, or {WILDCARD_HOST!r} for "
                                  "every host")
        if not name:
            raise InvalidAclError(f"resource name is empty; name a {rtype.value}, or "
                                  f"{WILDCARD_RESOURCE!r} (LITERAL) for every one")
        if rtype is ResourceType.CLUSTER:
            if name != CLUSTER_RESOURCE_NAME or ptype is not PatternType.LITERAL:
                raise InvalidAclError(f"a CLUSTER ACL names the cluster as LITERAL "
                                      f"{CLUSTER_RESOURCE_NAME!r}, not {ptype.value} "
                                      f"{name!r}")
        elif ptype is PatternType.PREFIXED and name == WILDCARD_RESOURCE:
            raise InvalidAclError(f"PREFIXED {WILDCARD_RESOURCE!r} applies only to names "
                                  f"starting with '*'; use LITERAL {WILDCARD_RESOURCE!r} "
                                  f"for every {rtype.value}")
        valid = VALID_OPERATIONS[rtype]
        if entry.operation not in valid:
            raise InvalidAclError(f"operation {entry.operation.value} does not apply to "
                                  f"{rtype.value}; valid: {_names(valid)}")

    def to_json(self) -> bytes:
        """Canonical JSON: one flat object, keys sorted, no spaces, ASCII only."""
        return json.dumps(
            {"resource_type": self.pattern.resource_type.value, "name": self.pattern.name,
             "pattern_type": self.pattern.pattern_type.value,
             "principal": self.entry.principal, "host": self.entry.host,
             "operation": self.entry.operation.value,
             "permission": self.entry.permission.value},
            sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")

    @classmethod
    def from_json(cls, data: bytes) -> AclBinding:
        """Reads what ``to_json`` wrote: the shape and the enum names are checked
        (``validate`` is the caller's step)."""
        try:
            raw: Any = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise InvalidAclError(f"not an ACL binding: not JSON ({exc})") from None
        if not isinstance(raw, dict):
            raise InvalidAclError(f"not an ACL binding: a JSON {type(raw).__name__}, "
                                  "not an object")
        if set(raw) != _JSON_FIELDS:
            missing, extra = sorted(_JSON_FIELDS - set(raw)), sorted(set(raw) - _JSON_FIELDS)
            raise InvalidAclError(f"not an ACL binding: missing fields {missing}, "
                                  f"unknown fields {extra}")
        wrong = sorted(key for key, value in raw.items() if not isinstance(value, str))
        if wrong:
            raise InvalidAclError(f"not an ACL binding: {', '.join(wrong)} not strings")
        try:
            return cls(
                ResourcePattern(ResourceType(raw["resource_type"]), raw["name"],
                                PatternType(raw["pattern_type"])),
                AccessControlEntry(raw["principal"], raw["host"], Operation(raw["operation"]),
                                   AclPermissionType(raw["permission"])))
        except ValueError as exc:
            raise InvalidAclError(f"not an ACL binding: {exc}") from None

    def key(self) -> str:
        """A stable id: the first 32 hex digits of the SHA-256 of the canonical JSON."""
        return hashlib.sha256(self.to_json()).hexdigest()[:32]

    def __str__(self) -> str:
        entry = self.entry
        return (f"{entry.principal} has {entry.permission.value} permission for operation "
                f"{entry.operation.value} on {self.pattern} from host {entry.host}")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Which bindings to describe or delete (Kafka's ``AclBindingFilter``); every field
    left at its default matches anything. Entry fields match exactly (a filter for
    principal ``User:*`` finds the bindings for ``User:*``, not every binding)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        """ANY or an exact pattern type match that type (any, if ANY) and the exact
        name; MATCH matches every binding that applies to the resource ``name``."""
        pattern, entry = binding.pattern, binding.entry
        if self.resource_type is not ResourceType.ANY \
                and self.resource_type is not pattern.resource_type:
            return False
        if self.pattern_type is PatternType.MATCH:
            if self.name is not None \
                    and not pattern.applies_to(pattern.resource_type, self.name):
                return False
        else:
            if self.pattern_type is not PatternType.ANY \
                    and self.pattern_type is not pattern.pattern_type:
                return False
            if self.name is not None and self.name != pattern.name:
                return False
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and self.operation in (Operation.ANY, entry.operation)
                and self.permission in (AclPermissionType.ANY, entry.permission))

    def validate(self) -> None:
        """Refuses a filter that cannot say what it deletes."""
        if self.pattern_type is PatternType.MATCH and self.name is None:
            raise InvalidAclError("pattern type MATCH needs a resource name (the ACLs that "
                                  "apply to it); use ANY to match every name")


def _sort_key(binding: AclBinding) -> tuple[str, ...]:
    pattern, entry = binding.pattern, binding.entry
    return (pattern.resource_type.value, pattern.name, pattern.pattern_type.value,
            entry.principal, entry.host, entry.operation.value, entry.permission.value)


class AclIndex:
    """The bindings in force, fed from etcd key by key, indexed by what they apply to:
    LITERAL names in a dict by (type, name), PREFIXED ones in a dict by (type, prefix)
    probed once per prefix length in use. A binding held under several keys is one
    binding, gone when its last key is."""

    def __init__(self) -> None:
        self._by_key: dict[str, AclBinding] = {}
        self._keys_of: dict[AclBinding, int] = {}
        self._literal: dict[tuple[ResourceType, str], set[AclBinding]] = {}
        self._prefixed: dict[tuple[ResourceType, str], set[AclBinding]] = {}
        # Per type: each length of a prefix in _prefixed, and how many prefixes have it.
        self._prefix_lengths: dict[ResourceType, dict[int, int]] = {}

    def put(self, key: str, binding: AclBinding) -> None:
        """Holds ``binding`` under ``key``, replacing what the key held."""
        if self._by_key.get(key) == binding:
            return
        self.remove(key)
        self._by_key[key] = binding
        held = self._keys_of.get(binding, 0)
        self._keys_of[binding] = held + 1
        if not held:
            self._add(binding)

    def remove(self, key: str) -> None:
        """Drops what ``key`` held (nothing if it held nothing)."""
        binding = self._by_key.pop(key, None)
        if binding is None:
            return
        held = self._keys_of[binding] - 1
        if held:
            self._keys_of[binding] = held
        else:
            del self._keys_of[binding]
            self._discard(binding)

    def __len__(self) -> int:
        """The number of distinct bindings."""
        return len(self._keys_of)

    def bindings(self) -> list[AclBinding]:
        """Every distinct binding, sorted by resource then entry."""
        return sorted(self._keys_of, key=_sort_key)

    def matching(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every binding that applies to the resource ``name`` of ``resource_type``
        (LITERAL equal, LITERAL ``*``, PREFIXED by a prefix of the name), sorted."""
        if resource_type is ResourceType.ANY:
            raise ValueError("resource type ANY names no resource; ask for a concrete type")
        found: set[AclBinding] = set()
        found.update(self._literal.get((resource_type, name), ()))
        found.update(self._literal.get((resource_type, WILDCARD_RESOURCE), ()))
        for length in self._prefix_lengths.get(resource_type, {}):
            if length <= len(name):
                found.update(self._prefixed.get((resource_type, name[:length]), ()))
        return sorted(found, key=_sort_key)

    def _add(self, binding: AclBinding) -> None:
        pattern = binding.pattern
        slot = (pattern.resource_type, pattern.name)
        if pattern.pattern_type is PatternType.LITERAL:
            self._literal.setdefault(slot, set()).add(binding)
        elif pattern.pattern_type is PatternType.PREFIXED:
            if slot not in self._prefixed:
                self._prefixed[slot] = set()
                lengths = self._prefix_lengths.setdefault(pattern.resource_type, {})
                lengths[len(pattern.name)] = lengths.get(len(pattern.name), 0) + 1
            self._prefixed[slot].add(binding)

    def _discard(self, binding: AclBinding) -> None:
        pattern = binding.pattern
        slot = (pattern.resource_type, pattern.name)
        if pattern.pattern_type is PatternType.LITERAL:
            bucket = self._literal[slot]
            bucket.discard(binding)
            if not bucket:
                del self._literal[slot]
        elif pattern.pattern_type is PatternType.PREFIXED:
            bucket = self._prefixed[slot]
            bucket.discard(binding)
            if not bucket:
                del self._prefixed[slot]
                lengths = self._prefix_lengths[pattern.resource_type]
                lengths[len(pattern.name)] -= 1
                if not lengths[len(pattern.name)]:
                    del lengths[len(pattern.name)]
                if not lengths:
                    del self._prefix_lengths[pattern.resource_type]
