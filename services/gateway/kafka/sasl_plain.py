"""SASL/PLAIN (RFC 4616) on the Kafka listener, offered over TLS only.

PLAIN sends the password itself, so the listener offers it only on a TLS connection
(SASL_SSL), never on a plaintext one (where it would cross the network readable), as
a Kafka operator enables PLAIN on SASL_SSL listeners only. The password is checked
against the user's SCRAM-SHA-512 credential, the one Strand keeps (it never stores a
password): a SCRAM exchange is run in-process, client and server side, with the
password given — the server side is the one SCRAM clients meet, so an unknown user and
a wrong password fail alike. Success issues the same session as SCRAM.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from services.gateway.authenticator import Authenticator
from strand.errors import AuthenticationError
from strand.security.scram import (
    AuthenticationFailed,
    ScramClientExchange,
    ScramServerExchange,
)

__all__ = ["PLAIN", "PlainSession", "authenticate_plain"]

PLAIN = "PLAIN"
# RFC 4616: authzid, authcid and passwd of at most 255 octets each.
_MAX_MESSAGE = 3 * 255 + 2


@dataclass(frozen=True, slots=True)
class PlainSession:
    username: str
    session_token: str
    lifetime_ms: int


def _parse(message: bytes) -> tuple[str, str]:
    """(username, password) of a PLAIN message ``[authzid] NUL authcid NUL passwd``."""
    if len(message) > _MAX_MESSAGE:
        raise AuthenticationError("PLAIN authentication failed: the message is too long")
    parts = message.split(b"\0")
    if len(parts) != 3:
        raise AuthenticationError("PLAIN authentication failed: expected "
                                  "[authzid] NUL username NUL password")
    try:
        authzid, username, password = (part.decode() for part in parts)
    except UnicodeDecodeError:
        raise AuthenticationError("PLAIN authentication failed: the message is not "
                                  "UTF-8") from None
    if not username or not password:
        raise AuthenticationError("PLAIN authentication failed: empty username or password")
    if authzid and authzid != username:
        # Kafka's PlainSaslServer: acting for another user is not supported.
        raise AuthenticationError(f"PLAIN authentication failed: authorization id "
                                  f"{authzid!r} is not the user {username!r}")
    return username, password


def _verify(authenticator: Authenticator, username: str, password: str) -> PlainSession:
    try:
        client = ScramClientExchange(username, password)
    except ValueError:
        raise AuthenticationError("PLAIN authentication failed: invalid username or "
                                  "password") from None
    server = ScramServerExchange(authenticator.security.users.get)
    try:
        server.final(client.final(server.first(client.first())))
    except AuthenticationFailed as exc:
        raise AuthenticationError(f"PLAIN {exc}") from None
    token, _ = authenticator.issuer.issue(server.username, server.credential.fingerprint())
    return PlainSession(server.username, token, authenticator.lifetime_ms)


async def authenticate_plain(authenticator: Authenticator, message: bytes) -> PlainSession:
    """The session of a PLAIN message's user; AuthenticationError if refused. The
    key derivation (the credential's iterations, twice) runs off the event loop."""
    username, password = _parse(message)
    return await asyncio.to_thread(_verify, authenticator, username, password)
