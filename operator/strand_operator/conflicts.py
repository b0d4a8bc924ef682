"""Two resources for one Strand name (two Topics for a topic, two StrandUsers in two
namespaces for a user): the older one owns it, the others are refused.

Age is the resource's creationTimestamp (RFC 3339, which sorts as text in UTC); equal
ages, possible at one-second resolution, fall back to namespace and name so every
operator pass picks the same owner.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Claim", "UserClaim", "owner_of"]


@dataclass(frozen=True, slots=True, order=True)
class Claim:
    """A managed Topic resource naming a Strand topic (ordered oldest first)."""

    created: str  # metadata.creationTimestamp; "" sorts first (never seen in practice)
    namespace: str
    name: str
    topic: str

    def describe(self) -> str:
        return f"Topic {self.namespace}/{self.name} (created {self.created or 'unknown'})"


@dataclass(frozen=True, slots=True, order=True)
class UserClaim:
    """A StrandUser resource naming a Strand user (ordered oldest first)."""

    created: str
    namespace: str
    name: str
    user: str

    def describe(self) -> str:
        return f"StrandUser {self.namespace}/{self.name} (created {self.created or 'unknown'})"


C = TypeVar("C", Claim, UserClaim)


def owner_of(claims: Iterable[C]) -> C | None:
    """The claim that owns the name: the oldest."""
    return min(claims, default=None)
