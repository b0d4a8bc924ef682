"""Whether a principal may perform an operation on a resource: Kafka's authorizer
(``StandardAuthorizer``) over the ACLs of an ``AclIndex``.

The rules, in order: super users may do anything; a DENY that matches wins over any
ALLOW; an ALLOW that matches (with Kafka's implied operations) allows; when no ACL at
all applies to the resource, ``allow.everyone.if.no.acl.found`` decides; otherwise
the answer is no. ``explain`` says which rule decided, for logs and the CLI.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from strand.security.acl import (
    WILDCARD_HOST,
    AclBinding,
    AclIndex,
    AclPermissionType,
    Operation,
    ResourceType,
)
from strand.security.principal import WILDCARD_PRINCIPAL, Principal

__all__ = ["Authorizer"]

_IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE,
                                   Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS,
                                           Operation.ALTER_CONFIGS}),
}
"""For an operation asked for, the operations whose ALLOW also allows it (ALL aside).
Only ALLOWs imply: a DENY of READ does not deny DESCRIBE."""


@dataclass(frozen=True, slots=True)
class _Decision:
    allowed: bool
    reason: str


class Authorizer:
    """Decides with the ACLs the index holds at the moment of the call (the index is
    kept current from etcd by its owner)."""

    def __init__(self, index: AclIndex, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self._index = index
        # Parsed so that a super user that cannot be a principal fails here, not never.
        self._super_users = frozenset(str(Principal.parse(user)) for user in super_users)
        self._allow_if_no_acl = allow_everyone_if_no_acl_found

    def authorize(self, principal: Principal, host: str, operation: Operation,
                  resource_type: ResourceType, name: str) -> bool:
        """Whether ``principal``, connected from ``host``, may perform ``operation`` on
        the resource ``name`` of ``resource_type``."""
        return self._decide(principal, host, operation, resource_type, name).allowed

    def explain(self, principal: Principal, host: str, operation: Operation,
                resource_type: ResourceType, name: str) -> str:
        """``authorize``'s answer and the rule that gave it, in a sentence."""
        return self._decide(principal, host, operation, resource_type, name).reason

    def _decide(self, principal: Principal, host: str, operation: Operation,
                resource_type: ResourceType, name: str) -> _Decision:
        if operation is Operation.ANY:
            raise ValueError("operation ANY is for filters; authorize a concrete operation")
        if resource_type is ResourceType.ANY:
            raise ValueError("resource type ANY is for filters; authorize a concrete "
                             "resource")
        who = str(principal)
        asked = f"{who} {operation.value} on {resource_type.value}:{name} from host {host}"
        if who in self._super_users:
            return _Decision(True, f"ALLOWED {asked}: {who} is a super user")
        acls = self._index.matching(resource_type, name)
        if not acls:
            setting = "true" if self._allow_if_no_acl else "false"
            verdict = "ALLOWED" if self._allow_if_no_acl else "DENIED"
            return _Decision(self._allow_if_no_acl,
                             f"{verdict} {asked}: no ACL applies to the resource and "
                             f"allow.everyone.if.no.acl.found is {setting}")
        mine = [acl for acl in acls
                if acl.entry.principal in (who, WILDCARD_PRINCIPAL)
                and acl.entry.host in (host, WILDCARD_HOST)]
        for acl in mine:
            if acl.entry.permission is AclPermissionType.DENY \
                    and acl.entry.operation in (operation, Operation.ALL):
                return _Decision(False, f"DENIED {asked}: denied by {acl}")
        for acl in mine:
            if acl.entry.permission is AclPermissionType.ALLOW \
                    and _allows(acl, operation):
                return _Decision(True, f"ALLOWED {asked}: allowed by {acl}")
        return _Decision(False, f"DENIED {asked}: {len(acls)} ACL(s) apply to the "
                                "resource but none matched; deny by default")


def _allows(acl: AclBinding, operation: Operation) -> bool:
    granted = acl.entry.operation
    return granted is Operation.ALL or granted in _IMPLIED_BY.get(operation, {operation})
