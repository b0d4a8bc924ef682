"""Who a request comes from: Kafka's principal, ``TYPE:NAME`` (``User:alice``).

ACLs, super users and the authorizer compare principals by this string form, so it
is made in one place and always parses back to the same principal.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ANONYMOUS", "WILDCARD_PRINCIPAL", "Principal"]


@dataclass(frozen=True, slots=True, order=True)
class Principal:
    """A principal: its type (``User``) and its name. The type holds no ``:`` and
    neither part is empty, so ``Principal.parse(str(p)) == p``."""

    type: str
    name: str

    def __post_init__(self) -> None:
        if not self.type:
            raise ValueError(f"principal type is empty in ':{self.name}'; "
                             "expected TYPE:NAME such as 'User:alice'")
        if ":" in self.type:
            raise ValueError(f"principal type {self.type!r} contains ':'; "
                             "the type ends at the first ':' (as in 'User:alice')")
        if not self.name:
            raise ValueError(f"principal name is empty in '{self.type}:'; "
                             "expected TYPE:NAME such as 'User:alice'")

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> Principal:
        """``TYPE:NAME`` split at the first ``:`` (the name may hold more of them, as a
        certificate's distinguished name does)."""
        kind, colon, name = text.partition(":")
        if not colon:
            raise ValueError(f"cannot parse principal {text!r}: no ':' separates the "
                             "type from the name; expected TYPE:NAME such as 'User:alice'")
        if not kind:
            raise ValueError(f"cannot parse principal {text!r}: the type before ':' is "
                             "empty; expected TYPE:NAME such as 'User:alice'")
        if not name:
            raise ValueError(f"cannot parse principal {text!r}: the name after ':' is "
                             "empty; expected TYPE:NAME such as 'User:alice'")
        return cls(kind, name)


ANONYMOUS = Principal("User", "ANONYMOUS")
"""The principal of a connection that did not authenticate (Kafka's name)."""

WILDCARD_PRINCIPAL = "User:*"
"""The principal of an ACL that applies to every principal."""
