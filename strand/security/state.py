"""The cluster's users and ACLs as etcd holds them, kept in memory by every process
that watches the metadata (the gateway checks every request against it).

Fed key by key by :class:`strand.cluster.cache.MetadataCache`: a value, or None for a
deletion. A value that does not parse (only a hand-written etcd key can hold one) is
logged and left out; it is never half-applied.
"""

from __future__ import annotations

import logging

from strand.security.acl import AclBinding, AclIndex, InvalidAclError
from strand.security.quotas import InvalidQuotaError, QuotaEntity, QuotaStore, QuotaValues
from strand.security.scram import ScramCredential

__all__ = ["SecurityState"]

log = logging.getLogger(__name__)


class SecurityState:
    def __init__(self) -> None:
        self.users: dict[str, ScramCredential] = {}
        self.acls = AclIndex()
        self._bindings: dict[str, AclBinding] = {}
        self.quotas = QuotaStore()

    def apply_user(self, name: str, value: bytes | None) -> None:
        if value is None:
            self.users.pop(name, None)
            return
        try:
            credential = ScramCredential.from_json(value)
            credential.validate()
        except ValueError as exc:
            self.users.pop(name, None)
            log.error("ignoring an unreadable SCRAM credential in etcd",
                      extra={"user": name, "error": str(exc)})
            return
        self.users[name] = credential

    def apply_acl(self, key: str, value: bytes | None) -> None:
        if key in self._bindings:
            del self._bindings[key]
            self.acls.remove(key)
        if value is None:
            return
        try:
            binding = AclBinding.from_json(value)
            binding.validate()
        except InvalidAclError as exc:
            log.error("ignoring an unreadable ACL binding in etcd",
                      extra={"key": key, "error": str(exc)})
            return
        self._bindings[key] = binding
        self.acls.put(key, binding)

    def apply_quota(self, key: str, value: bytes | None) -> None:
        try:
            entity = QuotaEntity.parse_key(key)
        except InvalidQuotaError as exc:
            log.error("ignoring a client quota under an unreadable key in etcd",
                      extra={"key": key, "error": str(exc)})
            return
        if value is None:
            self.quotas.remove(entity)
            return
        try:
            values = QuotaValues.from_json(value)
        except InvalidQuotaError as exc:
            self.quotas.remove(entity)
            log.error("ignoring an unreadable client quota in etcd",
                      extra={"entity": str(entity), "error": str(exc)})
            return
        self.quotas.put(entity, values)

    def acl_keys(self) -> list[str]:
        return list(self._bindings)

    def copy(self) -> SecurityState:
        other = SecurityState()
        other.users = dict(self.users)
        for key, binding in self._bindings.items():
            other._bindings[key] = binding
            other.acls.put(key, binding)
        for entity, values in self.quotas.items():
            other.quotas.put(entity, values)
        return other
