"""Session tokens: what a client sends on every call after one SCRAM exchange.

Kafka authenticates a connection once (and again after ``connections.max.reauth.ms``);
gRPC is stateless per call. So the gateway runs the exchange once and issues a
short-lived token that carries its claim (user, credential fingerprint, expiry), signed
with HMAC-SHA-256 under the gateway's own key: verifying needs no lookup, and the key is
random per process by default (a client that reaches another gateway, or a restarted
one, authenticates again). The fingerprint lets the gateway end the sessions of a user
whose password changed or who was deleted.

Token: ``v1.<payload>.<signature>``, both parts base64url without padding (canonical
encoding only, so no two strings verify as one token). Payload: expires_at (IEEE-754
double, big-endian), fingerprint length (one byte), fingerprint, username (UTF-8). The
signature is HMAC-SHA-256 over a domain tag and the payload.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import re
import secrets
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["DEFAULT_LIFETIME_S", "InvalidSession", "SessionClaim", "SessionIssuer"]

DEFAULT_LIFETIME_S = 3600.0
MIN_KEY_BYTES = 16
MAX_TOKEN_CHARS = 4096
MAX_USERNAME_BYTES = 1024

SessionFailure = Literal["malformed", "signature", "expired"]

_VERSION = "v1"
_DOMAIN = b"strand-session-v1\0"
_HEAD = struct.Struct(">dB")  # expires_at, fingerprint length
_B64URL = re.compile(r"[A-Za-z0-9_-]*")
_ADVICE: dict[SessionFailure, str] = {
    "malformed": "the session token is malformed: authenticate again for a new one",
    "signature": "the session token was not issued by this gateway or was altered: "
                 "authenticate again for a new one",
    "expired": "the session expired: authenticate again for a new one",
}


class InvalidSession(Exception):
    """The token cannot be used; ``reason`` is "malformed", "signature" or "expired",
    and the message tells the client what to do (authenticate again)."""

    def __init__(self, reason: SessionFailure) -> None:
        super().__init__(_ADVICE[reason])
        self.reason: SessionFailure = reason


@dataclass(frozen=True, slots=True)
class SessionClaim:
    username: str
    fingerprint: bytes     # the credential's fingerprint when the session began
    expires_at: float      # unix seconds


class SessionIssuer:
    """Issues and verifies the tokens of one gateway process."""

    def __init__(self, lifetime_s: float = DEFAULT_LIFETIME_S, key: bytes | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        if not (math.isfinite(lifetime_s) and lifetime_s > 0):
            raise ValueError(f"session lifetime must be a positive number of seconds, "
                             f"not {lifetime_s!r}")
        if key is None:
            key = secrets.token_bytes(32)
        elif len(key) < MIN_KEY_BYTES:
            raise ValueError(f"session key must be at least {MIN_KEY_BYTES} bytes")
        self.lifetime_s = lifetime_s
        self._key = bytes(key)
        self._clock = clock

    def issue(self, username: str, fingerprint: bytes) -> tuple[str, float]:
        """A token for ``username`` (token, expires_at): url-safe ASCII."""
        if not username:
            raise ValueError("a session needs a username")
        name = username.encode("utf-8")  # UnicodeEncodeError (a ValueError) for surrogates
        if len(name) > MAX_USERNAME_BYTES:
            raise ValueError(f"username is longer than {MAX_USERNAME_BYTES} bytes")
        if len(fingerprint) > 255:
            raise ValueError("credential fingerprint is longer than 255 bytes")
        expires_at = float(self._clock() + self.lifetime_s)
        payload = _HEAD.pack(expires_at, len(fingerprint)) + bytes(fingerprint) + name
        token = f"{_VERSION}.{_b64(payload)}.{_b64(self._sign(payload))}"
        return token, expires_at

    def verify(self, token: str) -> SessionClaim:
        """The claim of a token this issuer made that has not expired; InvalidSession
        otherwise. The signature is checked (in constant time) before the payload is
        read."""
        if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS:
            raise InvalidSession("malformed")
        parts = token.split(".")
        if len(parts) != 3 or parts[0] != _VERSION:
            raise InvalidSession("malformed")
        payload, signature = _unb64(parts[1]), _unb64(parts[2])
        if payload is None or signature is None or len(signature) != hashlib.sha256().digest_size:
            raise InvalidSession("malformed")
        if not hmac.compare_digest(signature, self._sign(payload)):
            raise InvalidSession("signature")
        claim = _parse(payload)
        if self._clock() >= claim.expires_at:
            raise InvalidSession("expired")
        return claim

    def _sign(self, payload: bytes) -> bytes:
        return hmac.new(self._key, _DOMAIN + payload, hashlib.sha256).digest()


def _parse(payload: bytes) -> SessionClaim:
    if len(payload) < _HEAD.size:
        raise InvalidSession("malformed")
    expires_at, length = _HEAD.unpack_from(payload)
    fingerprint = payload[_HEAD.size:_HEAD.size + length]
    try:
        username = payload[_HEAD.size + length:].decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidSession("malformed") from None
    if len(fingerprint) != length or not username or not math.isfinite(expires_at):
        raise InvalidSession("malformed")
    return SessionClaim(username, fingerprint, expires_at)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes | None:
    """The bytes of canonical unpadded base64url text; None for anything else."""
    if not _B64URL.fullmatch(text):
        return None
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    return data if _b64(data) == text else None
