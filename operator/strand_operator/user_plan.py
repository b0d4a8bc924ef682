"""Desired against actual for a StrandUser, decided without doing it: its SCRAM
credential and Secret, its ACLs, its quotas.

The StrandUser is the whole truth for its principal: ACLs of ``User:<name>`` and
quotas of user ``<name>`` that it does not list are removed, as Strimzi's user
operator does. Strand keeps only a password's salted form, so a credential cannot
be compared with the Secret: the Secret records the password last applied, and a
credential is (re)written only when it is missing or that password changes (a
rewrite ends the user's sessions, so never on every pass).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from strand.security.acl import AclBinding
from strand_operator.user_secret import Ownership

__all__ = ["AclChanges", "CredentialPlan", "QuotaChange", "acl_changes", "plan_credential",
           "quota_change"]


@dataclass(frozen=True, slots=True)
class CredentialPlan:
    upsert: str | None = None  # the password to set on the SCRAM credential
    write_secret: str | None = None  # the password to put in the user's Secret
    generated: bool = False  # write_secret is a new password of the operator's
    delete_credential: bool = False
    delete_secret: bool = False

    def __bool__(self) -> bool:
        return bool(self.upsert is not None or self.write_secret is not None
                    or self.delete_credential or self.delete_secret)


def plan_credential(uses_password: bool, secret: Ownership, secret_password: str | None,
                    referenced: str | None, credential_exists: bool,
                    new_password: Callable[[], str]) -> CredentialPlan:
    """What to do with the credential and the Secret.

    ``secret`` and ``secret_password``: the user's Secret and the password in it;
    ``referenced``: the password the spec points at (None: the operator's own). A
    FOREIGN Secret is the caller's refusal to make, before planning.
    """
    if not uses_password:  # tls: no password may open this principal
        return CredentialPlan(delete_credential=credential_exists,
                              delete_secret=secret in (Ownership.OURS, Ownership.STALE))
    kept = secret_password if secret is Ownership.OURS else None
    if referenced is not None:
        if kept == referenced:
            return CredentialPlan(upsert=None if credential_exists else referenced)
        return CredentialPlan(upsert=referenced, write_secret=referenced)
    if kept is not None:
        return CredentialPlan(upsert=None if credential_exists else kept)
    password = new_password()
    return CredentialPlan(upsert=password, write_secret=password, generated=True)


def _order(binding: AclBinding) -> bytes:
    return binding.to_json()


@dataclass(frozen=True, slots=True)
class AclChanges:
    create: tuple[AclBinding, ...] = ()
    delete: tuple[AclBinding, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.create or self.delete)

    def describe(self) -> str:
        parts = [f"added {len(self.create)}"] if self.create else []
        parts += [f"removed {len(self.delete)}"] if self.delete else []
        shown = [f"+{b}" for b in self.create[:5]] + [f"-{b}" for b in self.delete[:5]]
        more = len(self.create) + len(self.delete) - len(shown)
        return (" and ".join(parts) + " ACL(s): " + "; ".join(shown)
                + (f"; and {more} more" if more > 0 else ""))


def acl_changes(desired: frozenset[AclBinding], actual: Iterable[AclBinding],
                principal: str) -> AclChanges:
    """The bindings to create and to delete; only ``principal``'s are ever deleted,
    whatever ``actual`` holds."""
    held = {binding for binding in actual if binding.entry.principal == principal}
    return AclChanges(tuple(sorted(desired - held, key=_order)),
                      tuple(sorted(held - desired, key=_order)))


@dataclass(frozen=True, slots=True)
class QuotaChange:
    set: Mapping[str, float] = field(default_factory=dict)
    remove: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.set or self.remove)

    def describe(self) -> str:
        parts = [f"{k}={v:g}" for k, v in sorted(self.set.items())]
        return ", ".join(parts + [f"{k} removed" for k in self.remove])


def quota_change(desired: Mapping[str, float], actual: Mapping[str, float]) -> QuotaChange:
    return QuotaChange({k: v for k, v in desired.items() if actual.get(k) != v},
                       tuple(sorted(k for k in actual if k not in desired)))
