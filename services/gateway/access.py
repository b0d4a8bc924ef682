"""Who may do what at the gateway: the caller of each request (its principal and
host) and the ACL checks each API needs, with Kafka's rules and errors.

The gateway serves every client request, so this is where ACLs are enforced; the
storage nodes, the controller and the coordinators serve only service identities
(``--tls-service-names``), so nothing reaches them around these checks.

Two kinds of check: a whole call refused (a group, a transactional id, the cluster:
:meth:`AccessControl.check_call`, raising the typed error), and topics refused one by
one inside a call that names many (produce, fetch, topic admin: :meth:`topic_refusal`),
so the allowed ones go on, as Kafka answers per topic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from strand.errors import (
    AuthorizationError,
    ClusterAuthorizationFailedError,
    ErrorCode,
    GroupAuthorizationFailedError,
    SecurityDisabledError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from strand.security.acl import (
    CLUSTER_RESOURCE_NAME,
    AclPermissionType,
    Operation,
    ResourceType,
)
from strand.security.authorizer import Authorizer
from strand.security.principal import Principal
from strand.security.state import SecurityState

__all__ = ["CALLER", "AccessControl", "Caller", "SecuritySettings", "caller"]


@dataclass(frozen=True, slots=True)
class SecuritySettings:
    """The gateway's authentication and authorization settings (its flags)."""

    # Refuse callers with neither a session nor a client certificate (else anonymous).
    authentication_required: bool = False
    # Enforce ACLs (Kafka's authorizer.class.name set); off: everyone may do anything.
    authorizer: bool = False
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False
    session_lifetime_s: float = 3600.0

G, T, C, X = (ResourceType.GROUP, ResourceType.TOPIC, ResourceType.CLUSTER,
              ResourceType.TRANSACTIONAL_ID)


@dataclass(frozen=True, slots=True)
class Caller:
    principal: Principal
    host: str
    # A service of the cluster (its certificate matches --tls-service-names): the
    # coordinators write their internal topics through the gateway. Like Kafka's
    # inter-broker principal, it is a super user.
    service: bool = False
    client_id: str = ""  # the client's client.id (its user agent), for quotas


# No default: a handler reached without the authentication step is a bug.
CALLER: ContextVar[Caller] = ContextVar("strand_gateway_caller")


def caller() -> Caller:
    """The caller of the request being served (set by the authentication step)."""
    return CALLER.get()


_ERRORS: dict[ResourceType, type[AuthorizationError]] = {
    T: TopicAuthorizationFailedError, G: GroupAuthorizationFailedError,
    C: ClusterAuthorizationFailedError, X: TransactionalIdAuthorizationFailedError,
}

Names = Callable[[Any], Iterable[str]]


def _group(request: Any) -> Iterable[str]:
    return (request.group_id,)


def _txn_id(request: Any) -> Iterable[str]:
    return (request.transactional_id,) if request.transactional_id else ()


def _next_topics(request: Any) -> Iterable[str]:
    return sorted({entry.topic for entry in request.next_topics})


def _topics(request: Any) -> Iterable[str]:
    """The topics a request names: by topic (``topics``) or by partition
    (``partitions``, the group calls)."""
    entries = request.topics if hasattr(request, "topics") else request.partitions
    return sorted({entry.topic for entry in entries})


def _cluster(request: Any) -> Iterable[str]:
    return (CLUSTER_RESOURCE_NAME,)


Rule = tuple[Operation, ResourceType, Names]

# Whole-call checks per API (Kafka's, from its request handlers). Topics of group
# calls are checked whole too: one unauthorised topic refuses the commit.
CALL_RULES: dict[str, tuple[Rule, ...]] = {
    "JoinGroup": ((Operation.READ, G, _group),),
    "SyncGroup": ((Operation.READ, G, _group),),
    "Heartbeat": ((Operation.READ, G, _group),),
    "LeaveGroup": ((Operation.READ, G, _group),),
    "OffsetCommit": ((Operation.READ, G, _group), (Operation.READ, T, _topics)),
    "OffsetFetch": ((Operation.DESCRIBE, G, _group), (Operation.DESCRIBE, T, _topics)),
    "DescribeGroup": ((Operation.DESCRIBE, G, _group),),
    "DeleteGroup": ((Operation.DELETE, G, _group),),
    "TxnOffsetCommit": ((Operation.WRITE, X, _txn_id), (Operation.READ, G, _group),
                        (Operation.READ, T, _topics)),
    "AddPartitionsToTxn": ((Operation.WRITE, X, _txn_id), (Operation.WRITE, T, _topics)),
    "AddOffsetsToTxn": ((Operation.WRITE, X, _txn_id), (Operation.READ, G, _group)),
    # The next transaction's partitions it opens are added as AddPartitionsToTxn's.
    "EndTxn": ((Operation.WRITE, X, _txn_id), (Operation.WRITE, T, _next_topics)),
    "DescribeTransactions": ((Operation.DESCRIBE, X, _txn_id),),
    "DescribeProducers": ((Operation.READ, T, _topics),),
    "WriteTxnMarkers": ((Operation.CLUSTER_ACTION, C, _cluster),),
    "AlterPartitionReassignments": ((Operation.ALTER, C, _cluster),),
    "ListPartitionReassignments": ((Operation.DESCRIBE, C, _cluster),),
    "CreateAcls": ((Operation.ALTER, C, _cluster),),
    "DeleteAcls": ((Operation.ALTER, C, _cluster),),
    "DescribeAcls": ((Operation.DESCRIBE, C, _cluster),),
    "AlterUserScramCredentials": ((Operation.ALTER, C, _cluster),),
    "DescribeUserScramCredentials": ((Operation.DESCRIBE, C, _cluster),),
    "AlterClientQuotas": ((Operation.ALTER_CONFIGS, C, _cluster),),
    "DescribeClientQuotas": ((Operation.DESCRIBE_CONFIGS, C, _cluster),),
}

# Per-topic operations of the calls that answer topic by topic.
TOPIC_OPERATIONS: dict[str, Operation] = {
    "Produce": Operation.WRITE,
    "Fetch": Operation.READ,
    "ListOffsets": Operation.DESCRIBE,
    "OffsetForLeaderEpoch": Operation.DESCRIBE,
    "Metadata": Operation.DESCRIBE,
    "DescribeConfigs": Operation.DESCRIBE_CONFIGS,
    "DeleteTopics": Operation.DELETE,
    "CreatePartitions": Operation.ALTER,
    "AlterConfigs": Operation.ALTER_CONFIGS,
}


class AccessControl:
    """The gateway's authorizer over the cluster's ACLs; ``enabled`` False lets every
    caller do everything (no authorizer configured, Kafka's default)."""

    def __init__(self, security: SecurityState, enabled: bool = False,
                 super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.security = security
        self.enabled = enabled
        self.authorizer = Authorizer(security.acls, super_users, allow_everyone_if_no_acl_found)

    def allowed(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        if not self.enabled:
            return True
        who = caller()
        if who.service:
            return True
        return self.authorizer.authorize(who.principal, who.host, operation, resource_type,
                                         name)

    def refusal(self, operation: Operation, resource_type: ResourceType,
                name: str) -> AuthorizationError | None:
        """The typed error refusing this, naming principal, operation and resource."""
        if self.allowed(operation, resource_type, name):
            return None
        who = caller()
        where = f" from host {who.host}" if who.host else ""
        option = "--" + resource_type.value.lower().replace("_", "-")
        resource = option if resource_type is C else f"{option} {name}"
        return _ERRORS[resource_type](
            f"principal {who.principal}{where} is not authorized to {operation.value} "
            f"{resource_type.value} {name!r}: ask an administrator for an ACL "
            f"(strand acl add --allow-principal {who.principal} --operation "
            f"{operation.value.lower().replace('_', '-')} {resource})")

    def check_call(self, method: str, request: Any) -> None:
        """Raise the first refusal of ``method``'s whole-call rules, if any."""
        if method in ("CreateAcls", "DeleteAcls", "DescribeAcls") and not self.enabled:
            raise SecurityDisabledError(
                "this cluster runs no authorizer: start the gateways with --authorizer acl")
        for operation, resource_type, names in CALL_RULES.get(method, ()):
            for name in names(request):
                refused = self.refusal(operation, resource_type, name)
                if refused is not None:
                    raise refused

    def topic_refusal(self, method: str, topic: str) -> tuple[ErrorCode, str] | None:
        """Why ``topic`` is refused in a per-topic call (None: allowed)."""
        refused = self.refusal(TOPIC_OPERATIONS[method], T, topic)
        return None if refused is None else (refused.code, str(refused))

    def may_create_topic(self, topic: str) -> AuthorizationError | None:
        """CREATE on the cluster, or on the topic (Kafka's rule)."""
        if self.allowed(Operation.CREATE, C, CLUSTER_RESOURCE_NAME):
            return None
        return self.refusal(Operation.CREATE, T, topic)

    def may_init_producer_id(self, transactional_id: str) -> AuthorizationError | None:
        """WRITE on the transactional id; without one, IDEMPOTENT_WRITE on the cluster
        or an ALLOW of WRITE on some topic (KIP-679)."""
        if transactional_id:
            return self.refusal(Operation.WRITE, X, transactional_id)
        if not self.enabled or self._may_write_some_topic():
            return None
        return self.refusal(Operation.IDEMPOTENT_WRITE, C, CLUSTER_RESOURCE_NAME)

    def _may_write_some_topic(self) -> bool:
        who = caller()
        if self.authorizer.authorize(who.principal, who.host, Operation.IDEMPOTENT_WRITE, C,
                                     CLUSTER_RESOURCE_NAME):
            return True
        principals = {str(who.principal), "User:*"}
        for binding in self.security.acls.bindings():
            entry, pattern = binding.entry, binding.pattern
            if (pattern.resource_type is T and entry.principal in principals
                    and entry.permission is AclPermissionType.ALLOW
                    and entry.operation in (Operation.WRITE, Operation.ALL)
                    and entry.host in ("*", who.host)
                    # the pattern's own name is a topic it covers: no DENY takes it back
                    and self.allowed(Operation.WRITE, T, pattern.name)):
                return True
        return False

    def may_describe(self, resource_type: ResourceType, name: str) -> bool:
        """For listings: what a caller does not see (groups, transactional ids)."""
        return (self.allowed(Operation.DESCRIBE, C, CLUSTER_RESOURCE_NAME)
                if resource_type is C else self.allowed(Operation.DESCRIBE, resource_type,
                                                        name))

