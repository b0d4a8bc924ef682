"""The Secret the operator keeps for a SCRAM StrandUser: named after it, in its
namespace, holding ``username`` and ``password`` (what a client passes as
``sasl_plain_username`` and ``sasl_plain_password``), owned by the StrandUser so that
Kubernetes deletes it with it. Also: reading a password out of a Secret, whose it
is, and a new password."""

from __future__ import annotations

import base64
import binascii
import enum
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strand_operator.user_spec import GROUP, KIND, VERSION

__all__ = [
    "MANAGED_BY",
    "PASSWORD_KEY",
    "USERNAME_KEY",
    "Ownership",
    "SecretOwner",
    "SecretStoreError",
    "generate_password",
    "ownership",
    "password_in",
    "user_secret",
]

USERNAME_KEY = "username"
PASSWORD_KEY = "password"
MANAGED_BY = "strand-operator"
_PASSWORD_BYTES = 32  # token_urlsafe: 43 characters, 256 bits


class SecretStoreError(Exception):
    """A Secret could not be read or written; the message says which and why."""


class Ownership(enum.Enum):
    MISSING = "missing"
    OURS = "ours"  # owned by this StrandUser (same uid)
    STALE = "stale"  # owned by an earlier StrandUser of the same name, deleted since
    FOREIGN = "foreign"  # someone else's Secret: never touched


@dataclass(frozen=True, slots=True)
class SecretOwner:
    """The StrandUser a Secret belongs to."""

    namespace: str
    name: str
    uid: str
    cluster: str  # its strand.io/cluster label, copied onto the Secret


def generate_password() -> str:
    return secrets.token_urlsafe(_PASSWORD_BYTES)


def user_secret(owner: SecretOwner, password: str) -> dict[str, Any]:
    """The whole Secret for ``owner`` (a merge patch of it replaces its keys and owner)."""
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {
            "name": owner.name, "namespace": owner.namespace,
            "labels": {"strand.io/cluster": owner.cluster,
                       "app.kubernetes.io/managed-by": MANAGED_BY},
            # No blockOwnerDeletion: with the OwnerReferencesPermissionEnforcement
            # admission plugin it would need update on strandusers/finalizers too.
            "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
                                 "name": owner.name, "uid": owner.uid,
                                 "controller": True}]},
        "data": {USERNAME_KEY: _encode(owner.name), PASSWORD_KEY: _encode(password)},
    }


def ownership(secret: Mapping[str, Any] | None, owner: SecretOwner) -> Ownership:
    if secret is None:
        return Ownership.MISSING
    refs = (secret.get("metadata") or {}).get("ownerReferences") or []
    ours = [r for r in refs if r.get("kind") == KIND and r.get("name") == owner.name
            and str(r.get("apiVersion", "")).startswith(f"{GROUP}/")]
    if any(r.get("uid") == owner.uid for r in ours):
        return Ownership.OURS
    return Ownership.STALE if ours and len(ours) == len(refs) else Ownership.FOREIGN


def password_in(secret: Mapping[str, Any] | None, key: str = PASSWORD_KEY) -> str | None:
    """The value of ``key`` (base64 ``data`` as the API server returns it, or
    ``stringData``), one trailing line break dropped as the CLI's --password-file
    reads it; None when missing, empty or not text."""
    if secret is None:
        return None
    raw = (secret.get("data") or {}).get(key)
    if isinstance(raw, str):
        try:
            text = base64.b64decode(raw, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    else:
        given = (secret.get("stringData") or {}).get(key)
        if not isinstance(given, str):
            return None
        text = given
    text = text.removesuffix("\n").removesuffix("\r")
    return text or None


def _encode(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")
