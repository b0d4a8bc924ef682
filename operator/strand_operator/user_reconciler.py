"""One reconciliation of a StrandUser, and its deletion: the SCRAM credential and the
Secret holding its password, the ACLs of its principal and its client quotas made
what the StrandUser says (user_plan.py decides), and the outcome as data (a status
to merge and Events to record), which the kopf handlers (user_handlers.py) apply.

Steps run in an order that a failure between two of them leaves repairable by the
next pass: the credential is written before the Secret that records its password
(a Secret never holds a password Strand does not have), ACLs before quotas.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from strand.errors import (
    AuthenticationError,
    AuthorizationError,
    SecurityDisabledError,
    StrandError,
)
from strand.security.acl import AclBinding
from strand_operator.conflicts import UserClaim, owner_of
from strand_operator.status import ready_condition
from strand_operator.strand_gateway import StrandGateway
from strand_operator.user_plan import (
    CredentialPlan,
    acl_changes,
    plan_credential,
    quota_change,
)
from strand_operator.user_secret import (
    Ownership,
    SecretOwner,
    SecretStoreError,
    generate_password,
    ownership,
    password_in,
    user_secret,
)
from strand_operator.user_spec import (
    DesiredUser,
    InvalidUserSpec,
    PasswordRef,
    desired_user,
    principal_of,
)

__all__ = ["SecretStore", "UserEvent", "UserOutcome", "UserResource", "delete_user",
           "reconcile_user"]

log = logging.getLogger(__name__)


class SecretStore(Protocol):
    """Secrets in the StrandUser's namespace (kube_secrets.py in the operator)."""

    async def read(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...

    async def create(self, namespace: str, body: Mapping[str, Any]) -> None: ...

    async def replace(self, namespace: str, name: str, body: Mapping[str, Any]) -> None: ...

    async def delete(self, namespace: str, name: str) -> None: ...


@dataclass(frozen=True, slots=True)
class UserEvent:
    type: str  # Normal or Warning
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class UserResource:
    """The parts of a StrandUser resource reconciliation reads."""

    namespace: str
    name: str
    uid: str
    cluster: str  # its strand.io/cluster label
    spec: Mapping[str, Any]
    status: Mapping[str, Any] = field(default_factory=dict)
    generation: int | None = None

    @property
    def owner(self) -> SecretOwner:
        return SecretOwner(self.namespace, self.name, self.uid, self.cluster)

    def owned_by_other(self, claims: Iterable[UserClaim]) -> UserClaim | None:
        """The owning claim when it is another StrandUser's, else None."""
        owner = owner_of(claims)
        if owner is None or (owner.namespace, owner.name) == (self.namespace, self.name):
            return None
        return owner


@dataclass(slots=True)
class UserOutcome:
    status: dict[str, Any]  # merged into the StrandUser's status
    events: list[UserEvent] = field(default_factory=list)
    invalid: bool = False  # the spec itself is wrong: retrying cannot help


# Strand's refusals the operator's own setup causes, by condition reason, and what to do.
_CLUSTER_ERRORS: tuple[tuple[type[StrandError], str, str], ...] = (
    (AuthenticationError, "AuthenticationFailed",
     "check the operator's --user and --password-file (STRAND_USER, STRAND_PASSWORD_FILE)"),
    (AuthorizationError, "NotAuthorized",
     "run the operator as a super user of the cluster (the gateways' --super-users)"),
    (SecurityDisabledError, "SecurityDisabled",
     "start the gateways with --authorizer acl, or remove spec.authorization"),
)


class _Pass:
    def __init__(self, resource: UserResource) -> None:
        self.resource = resource
        self.events: list[UserEvent] = []
        self.previous: list[Mapping[str, Any]] = list(resource.status.get("conditions") or [])

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        self.events.append(UserEvent("Warning" if warning else "Normal", reason, message))

    def outcome(self, ready: bool, reason: str, message: str, invalid: bool = False,
                **status: Any) -> UserOutcome:
        """The status, and a Warning Event when the user newly fails for ``reason``."""
        before: Mapping[str, Any] = next(
            (c for c in self.previous if c.get("type") == "Ready"), {})
        if not ready and (before.get("reason"), before.get("message")) != (reason, message):
            self.event(reason, message, warning=True)
        elif ready and before.get("status") == "False":
            self.event("Ready", f"ready again (was {before.get('reason')}): {message}")
        resource = self.resource
        status["conditions"] = [ready_condition(ready, reason, message, resource.generation,
                                                self.previous)]
        status["username"] = resource.name
        status["principal"] = principal_of(resource.name)
        if resource.generation is not None:
            status["observedGeneration"] = resource.generation
        return UserOutcome(status, self.events, invalid)


async def reconcile_user(resource: UserResource, gateway: StrandGateway,
                         secrets: SecretStore, claims: Iterable[UserClaim],
                         reserved: Collection[str] = ()) -> UserOutcome:
    """Make Strand's user ``resource.name`` what ``resource`` asks for; never one of
    ``reserved`` (the operator's own user: a new password would lock it out)."""
    run = _Pass(resource)
    if resource.name in reserved:
        return run.outcome(False, "ReservedUser", f"user {resource.name!r} is the one the "
                           "operator authenticates as (--user): it will not manage it; "
                           "give this StrandUser another name")
    owner = resource.owned_by_other(claims)
    if owner is not None:
        return run.outcome(False, "ResourceConflict",
                           f"user {resource.name!r} is managed by the older "
                           f"{owner.describe()}; delete this StrandUser or rename it")
    try:
        desired = desired_user(resource.name, resource.spec)
    except InvalidUserSpec as exc:
        return run.outcome(False, exc.reason, str(exc), invalid=True)
    secret_name = f"{resource.namespace}/{resource.name}"
    try:
        refusal = await _credential(run, desired, gateway, secrets)
        if refusal is not None:
            return run.outcome(False, *refusal)
        await _acls(run, desired, gateway)
        await _quotas(run, desired, gateway)
    except SecretStoreError as exc:
        return run.outcome(False, "SecretError", f"{exc}; the next pass retries")
    except StrandError as exc:
        reason, advice = next(((r, a) for kind, r, a in _CLUSTER_ERRORS
                               if isinstance(exc, kind)),
                              ("ClusterError", "the next pass retries"))
        log.warning("reconciling user failed", extra={
            "namespace": resource.namespace, "resource": resource.name, "reason": reason,
            "error": str(exc)})
        return run.outcome(False, reason, f"cannot manage user {resource.name!r} in Strand: "
                           f"{exc} ({advice})")
    message = f"user {resource.name!r} matches the StrandUser"
    if desired.uses_password:
        return run.outcome(True, "Reconciled", message + f"; its password is in Secret "
                           f"{secret_name}", secret=resource.name)
    return run.outcome(True, "Reconciled", message + "; it authenticates with a client "
                       f"certificate whose common name is {resource.name!r}", secret=None)


async def _credential(run: _Pass, desired: DesiredUser, gateway: StrandGateway,
                      secrets: SecretStore) -> tuple[str, str] | None:
    """Carry out the credential's plan; (reason, message) when it cannot be."""
    resource = run.resource
    where = f"{resource.namespace}/{resource.name}"
    secret = await secrets.read(resource.namespace, resource.name)
    owned = ownership(secret, resource.owner)
    if desired.uses_password and owned is Ownership.FOREIGN:
        return ("SecretConflict", f"Secret {where} exists and does not belong to this "
                "StrandUser: the operator will not overwrite it; delete or rename it")
    referenced = None
    ref = desired.password_ref
    if ref is not None:
        referenced = password_in(await secrets.read(resource.namespace, ref.secret), ref.key)
        if referenced is None:
            return ("PasswordSecretMissing", f"no password in {ref.describe()} (namespace "
                    f"{resource.namespace}): create it, or fix "
                    "spec.authentication.password.valueFrom.secretKeyRef")
    plan = plan_credential(desired.uses_password, owned, password_in(secret), referenced,
                           await gateway.scram_user_exists(desired.username),
                           generate_password)
    await _carry_out(run, plan, owned, ref, gateway, secrets)
    return None


async def _carry_out(run: _Pass, plan: CredentialPlan, owned: Ownership,
                     ref: PasswordRef | None, gateway: StrandGateway,
                     secrets: SecretStore) -> None:
    resource = run.resource
    name, where = resource.name, f"{resource.namespace}/{resource.name}"
    if plan.upsert is not None:
        await gateway.upsert_scram_user(name, plan.upsert)
    if plan.write_secret is not None:
        body = user_secret(resource.owner, plan.write_secret)
        if owned is Ownership.MISSING:
            await secrets.create(resource.namespace, body)
        else:
            await secrets.replace(resource.namespace, name, body)
    if plan.generated:
        run.event("PasswordGenerated", f"created the SCRAM-SHA-512 credential of user "
                  f"{name!r} with a generated password, kept in Secret {where}")
    elif plan.write_secret is not None and ref is not None:
        run.event("PasswordChanged", f"set the password of user {name!r} from "
                  f"{ref.describe()} and copied it to Secret {where}")
    elif plan.upsert is not None:
        run.event("CredentialRestored", f"user {name!r} had no credential in Strand: "
                  f"created it again with the password in Secret {where}")
    if plan.delete_credential and await gateway.delete_scram_user(name):
        run.event("CredentialDeleted", f"removed the SCRAM credential of user {name!r}: it "
                  "authenticates with a client certificate")
    if plan.delete_secret:
        await secrets.delete(resource.namespace, name)
        run.event("SecretDeleted", f"deleted Secret {where}: a tls user has no password")


async def _held(gateway: StrandGateway, principal: str) -> list[AclBinding]:
    """The principal's ACLs. A cluster without an authorizer refuses to list them and
    has none: that is no failure unless the spec asks for some (creating them then
    fails, saying so)."""
    try:
        return await gateway.acls_of(principal)
    except SecurityDisabledError:
        return []


async def _acls(run: _Pass, desired: DesiredUser, gateway: StrandGateway) -> None:
    changes = acl_changes(desired.acls, await _held(gateway, desired.principal),
                          desired.principal)
    if changes.create:
        await gateway.create_acls(changes.create)
    if changes.delete:
        await gateway.delete_acls(changes.delete)
    if changes:
        run.event("AclsUpdated", f"{desired.principal}: {changes.describe()}")


async def _quotas(run: _Pass, desired: DesiredUser, gateway: StrandGateway) -> None:
    change = quota_change(desired.quotas, await gateway.user_quotas(desired.username))
    if change:
        await gateway.alter_user_quotas(desired.username, change.set, change.remove)
        run.event("QuotasUpdated", f"quotas of user {desired.username!r}: "
                  f"{change.describe()}")


async def delete_user(resource: UserResource, gateway: StrandGateway, secrets: SecretStore,
                      claims: Iterable[UserClaim],
                      reserved: Collection[str] = ()) -> list[UserEvent]:
    """Remove user ``resource.name`` from Strand (credential, ACLs, quotas) and the
    operator's Secret, unless another StrandUser owns the name or it is ``reserved``.
    Errors propagate (the handler retries)."""
    name, principal = resource.name, principal_of(resource.name)
    if name in reserved:
        return [UserEvent("Normal", "NotDeleted", f"user {name!r} is the operator's own: "
                          "left in place")]
    owner = resource.owned_by_other(claims)
    if owner is not None:
        return [UserEvent("Normal", "NotDeleted", f"user {name!r} belongs to the older "
                          f"{owner.describe()}: left in place")]
    removed = []
    if await gateway.delete_scram_user(name):
        removed.append("its credential")
    held = await _held(gateway, principal)
    if held:
        await gateway.delete_acls(held)
        removed.append(f"{len(held)} ACL(s)")
    quotas = await gateway.user_quotas(name)
    if quotas:
        await gateway.alter_user_quotas(name, {}, sorted(quotas))
        removed.append("its quotas")
    secret = await secrets.read(resource.namespace, name)
    if ownership(secret, resource.owner) in (Ownership.OURS, Ownership.STALE):
        await secrets.delete(resource.namespace, name)
        removed.append(f"Secret {resource.namespace}/{name}")
    return [UserEvent("Normal", "Deleted", f"deleted user {name!r}: "
                      + (", ".join(removed) if removed else "nothing was left"))]
