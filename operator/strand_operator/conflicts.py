"""Two Topics for one Strand topic: the older one owns it, the others are refused.

Age is the resource's creationTimestamp (RFC 3339, which sorts as text in UTC); equal
ages, possible at one-second resolution, fall back to namespace and name so every
operator pass picks the same owner.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Claim", "owner_of"]


@dataclass(frozen=True, slots=True, order=True)
class Claim:
    """A managed Topic resource naming a Strand topic (ordered oldest first)."""

    created: str  # metadata.creationTimestamp; "" sorts first (never seen in practice)
    namespace: str
    name: str
    topic: str

    def describe(self) -> str:
        return f"Topic {self.namespace}/{self.name} (created {self.created or 'unknown'})"


def owner_of(claims: Iterable[Claim]) -> Claim | None:
    """The claim that owns the topic: the oldest."""
    return min(claims, default=None)
