"""The controller's side of users and ACLs: what each admin call writes to etcd.

Users and ACLs live under ``security/`` (:class:`strand.cluster.keys.KeySpace`), one
key per user and per binding (its stable key, so creating a binding twice is one
key). Every process that watches the metadata sees them; the gateway enforces them.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.controller.writer import MetadataWriter
from strand.cluster.cache import MetadataCache
from strand.errors import InvalidRequestError, ResourceNotFoundError
from strand.security.acl import AclBinding, AclBindingFilter
from strand.security.quotas import InvalidQuotaError, QuotaEntity, QuotaValues
from strand.security.scram import MECHANISM, ScramCredential, make_credential, validate_username

__all__ = ["BootstrapUser", "SecurityAdmin"]


@dataclass(frozen=True, slots=True)
class BootstrapUser:
    """A SCRAM user the active controller creates when it is missing: the first
    super user of a cluster that requires authentication (as Kafka's
    ``kafka-storage format --add-scram``)."""

    name: str
    password: str


class SecurityAdmin:
    def __init__(self, cache: MetadataCache) -> None:
        self.cache = cache

    async def create_acls(self, writer: MetadataWriter, bindings: list[AclBinding]) -> int:
        keys = self.cache.keys
        return await writer.write_security([(keys.acl(b.key()), b.to_json()) for b in bindings])

    def matching(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self.cache.security.acls.bindings() if acl_filter.matches(b)]

    async def delete_acls(self, writer: MetadataWriter, bindings: list[AclBinding]) -> int:
        keys = self.cache.keys
        return await writer.write_security([], [keys.acl(b.key()) for b in bindings])

    async def upsert_user(self, writer: MetadataWriter, name: str,
                          credential: ScramCredential) -> int:
        try:
            validate_username(name)
            credential.validate()
        except ValueError as exc:
            raise InvalidRequestError(f"SCRAM credential of user {name!r}: {exc}") from exc
        return await writer.write_security([(self.cache.keys.user(name),
                                             credential.to_json())])

    async def delete_user(self, writer: MetadataWriter, name: str, mechanism: str) -> int:
        if mechanism != MECHANISM:
            raise InvalidRequestError(f"unsupported SCRAM mechanism {mechanism!r}: this "
                                      f"cluster stores {MECHANISM} credentials only")
        if name not in self.cache.security.users:
            raise ResourceNotFoundError(
                f"user {name!r} has no {MECHANISM} credential to delete")
        return await writer.write_security([], [self.cache.keys.user(name)])

    async def alter_quotas(self, writer: MetadataWriter, entity: QuotaEntity,
                           ops: list[tuple[str, float | None]], validate_only: bool) -> int:
        """Set (a value) or remove (None) the entity's quotas; an entity left without
        any quota loses its key. The revision written (0: nothing written)."""
        current = dict(self.cache.security.quotas.items()).get(entity, QuotaValues())
        try:
            altered = current.altered(ops)
        except InvalidQuotaError as exc:
            raise InvalidRequestError(f"quotas of {entity}: {exc}") from exc
        if validate_only:
            return 0
        key = self.cache.keys.quota(entity.key())
        if altered.is_empty():
            return await writer.write_security([], [key])
        return await writer.write_security([(key, altered.to_json())])

    async def ensure_bootstrap_user(self, writer: MetadataWriter, user: BootstrapUser) -> bool:
        """Create ``user`` if it has no credential; whether it was created (a password
        changed since through the Admin API is kept)."""
        if user.name in self.cache.security.users:
            return False
        await self.upsert_user(writer, user.name, make_credential(user.password))
        return True
