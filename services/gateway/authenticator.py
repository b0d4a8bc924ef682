"""Who is calling: the gateway's authentication, without gRPC.

A client proves a SCRAM-SHA-512 password in a two-step exchange (Kafka's
SaslAuthenticate; the password never crosses the wire) and gets a session token,
which it then sends with every call; or it presents a client certificate of the
cluster's CA (mutual TLS), whose common name is its principal (``User:<CN>``).
Without either the caller is ``User:ANONYMOUS``, or refused when authentication is
required. A session ends when it lapses or when its user's credential changes or is
removed (its fingerprint is in the token), as Kafka re-authenticates a connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from strand.errors import AuthenticationError, UnsupportedSaslMechanismError
from strand.security.pending import PendingExchanges
from strand.security.principal import ANONYMOUS, Principal
from strand.security.scram import MECHANISM, AuthenticationFailed, ScramServerExchange
from strand.security.sessions import DEFAULT_LIFETIME_S, InvalidSession, SessionIssuer
from strand.security.state import SecurityState

__all__ = ["Authenticator", "SaslStep"]


@dataclass(frozen=True, slots=True)
class SaslStep:
    """The gateway's answer to one message of an exchange."""

    auth_bytes: bytes
    exchange_id: str = ""  # after the first message: send it with the final one
    session_token: str = ""  # after a successful final message
    lifetime_ms: int = 0


class Authenticator:
    def __init__(self, security: SecurityState, required: bool = False,
                 session_lifetime_s: float = DEFAULT_LIFETIME_S) -> None:
        self.security = security
        self.required = required
        self.issuer = SessionIssuer(session_lifetime_s)
        self.lifetime_ms = int(session_lifetime_s * 1000)
        self.pending: PendingExchanges[ScramServerExchange] = PendingExchanges()

    def sasl(self, mechanism: str, exchange_id: str, auth_bytes: bytes) -> SaslStep:
        if mechanism.upper() != MECHANISM:
            raise UnsupportedSaslMechanismError(
                f"SASL mechanism {mechanism!r} is not enabled: this gateway offers "
                f"{MECHANISM}")
        try:
            message = auth_bytes.decode()
        except UnicodeDecodeError:
            raise AuthenticationError(f"{MECHANISM} authentication failed: the message "
                                      "is not UTF-8") from None
        if not exchange_id:
            exchange = ScramServerExchange(self.security.users.get)
            try:
                server_first = exchange.first(message)
            except AuthenticationFailed as exc:
                raise AuthenticationError(f"{MECHANISM} {exc}") from None
            return SaslStep(server_first.encode(), exchange_id=self.pending.add(exchange))
        exchange_or_none = self.pending.take(exchange_id)
        if exchange_or_none is None:
            raise AuthenticationError(
                f"{MECHANISM} authentication failed: the exchange is unknown to this "
                "gateway or took too long; start again with the first message")
        try:
            server_final = exchange_or_none.final(message)
        except AuthenticationFailed as exc:
            raise AuthenticationError(f"{MECHANISM} {exc}") from None
        token, _ = self.issuer.issue(exchange_or_none.username,
                                     exchange_or_none.credential.fingerprint())
        return SaslStep(server_final.encode(), session_token=token,
                        lifetime_ms=self.lifetime_ms)

    def principal(self, token: str | None, certificate_names: Sequence[str]) -> Principal:
        """The caller's principal: its session's user, else its certificate's common
        name, else anonymous (refused when authentication is required)."""
        if token:
            try:
                claim = self.issuer.verify(token)
            except InvalidSession as exc:
                raise AuthenticationError(f"session refused: {exc}") from None
            credential = self.security.users.get(claim.username)
            if credential is None or credential.fingerprint() != claim.fingerprint:
                raise AuthenticationError(
                    f"the session of user {claim.username!r} ended: its credential was "
                    "changed or removed; authenticate again")
            return Principal("User", claim.username)
        if certificate_names:
            return Principal("User", certificate_names[0])
        if self.required:
            raise AuthenticationError(
                "this gateway requires authentication: authenticate with "
                f"{MECHANISM} (sasl_mechanism, sasl_plain_username, sasl_plain_password) "
                "or present a client certificate of the cluster's CA")
        return ANONYMOUS
