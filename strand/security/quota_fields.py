"""Quota entities to and from the wire's parts (entity type, name, is default), and
Kafka's DescribeClientQuotas filter: the one place the gateway, the controller and
the SDK read and write them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from strand.security.quotas import CLIENT_ID, USER, Absent, InvalidQuotaError, QuotaEntity

__all__ = ["MATCHES", "FilterComponent", "entity_from_parts", "filter_matches", "parts_of"]

MATCHES = ("EXACT", "DEFAULT", "ANY")

Part = tuple[str, str, bool]  # (entity type, name, is default)


def entity_from_parts(parts: Iterable[Part]) -> QuotaEntity:
    """InvalidQuotaError for an unknown or repeated type, or no part at all."""
    return QuotaEntity.from_fields((kind, None if is_default else name)
                                   for kind, name, is_default in parts)


def parts_of(entity: QuotaEntity) -> list[Part]:
    return [(kind, name or "", name is None) for kind, name in entity.to_fields()]


@dataclass(frozen=True, slots=True)
class FilterComponent:
    """One entity type matched by exact name, its default, or any name."""

    entity_type: str
    match: str = "ANY"
    name: str = ""

    def validate(self) -> None:
        if self.entity_type not in (USER, CLIENT_ID):
            raise InvalidQuotaError(f"unknown quota entity type {self.entity_type!r}: use "
                                    f"{USER!r} or {CLIENT_ID!r}")
        if self.match not in MATCHES:
            raise InvalidQuotaError(f"unknown match {self.match!r}: one of {', '.join(MATCHES)}")
        if self.match == "EXACT" and not self.name:
            raise InvalidQuotaError("an EXACT match needs a name")


def filter_matches(entity: QuotaEntity, components: Sequence[FilterComponent],
                   strict: bool = False) -> bool:
    """Kafka's filter: every component matches its part of the entity; with
    ``strict`` the entity has no other part."""
    named = {USER: entity.user, CLIENT_ID: entity.client_id}
    for component in components:
        value = named[component.entity_type]
        if isinstance(value, Absent):
            return False
        if component.match == "EXACT" and value != component.name:
            return False
        if component.match == "DEFAULT" and value is not None:
            return False
    if strict:
        wanted = {c.entity_type for c in components}
        return all(isinstance(value, Absent) or kind in wanted for kind, value in named.items())
    return True
