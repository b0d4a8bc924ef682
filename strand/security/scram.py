"""SCRAM-SHA-512 password authentication (RFC 5802/7677), as Kafka's SASL/SCRAM.

What: the stored credential (:class:`ScramCredential`: salt, StoredKey, ServerKey and
iterations, never the password), its derivation on the client (:func:`make_credential`:
Kafka's AlterUserScramCredentials sends only the salted form) and one exchange on each
side (:class:`ScramServerExchange`, :class:`ScramClientExchange`).

Why this shape: the protocol mechanics (message grammar, saslname escaping, SASLprep,
proofs and signatures) are scramp's; this module puts Strand's policy around them:
SHA-512 only, 4096..16384 iterations on both sides, one exception type
(:class:`AuthenticationFailed`) for whatever a peer sends that does not authenticate,
and an unknown user indistinguishable from a wrong password (a decoy credential, so the
exchange fails at the same step on the same path). Secrets are compared in constant
time: scramp checks the client proof and the server signature with
``hmac.compare_digest`` (``scramp.core._check_client_key`` and ``_set_server_final``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scramp import ScramClient, ScramException, ScramMechanism  # type: ignore[import-untyped]
from scramp.utils import ServerError, saslprep  # type: ignore[import-untyped]

__all__ = ["DEFAULT_ITERATIONS", "MAX_ITERATIONS", "MECHANISM", "MIN_ITERATIONS",
           "AuthenticationFailed", "ScramClientExchange", "ScramCredential",
           "ScramServerExchange", "make_credential", "validate_username"]

MECHANISM = "SCRAM-SHA-512"
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
KEY_BYTES = 64          # SHA-512 output: StoredKey and ServerKey
SALT_BYTES = 32         # a new credential's salt (and a decoy's)
MIN_SALT_BYTES = 12     # scramp refuses shorter salts
MAX_SALT_BYTES = 1024   # a credential is stored and read by every gateway: keep it small
MAX_USERNAME_CHARS = 256
MAX_MESSAGE_CHARS = 4096  # no legitimate SCRAM message comes near this

_MECH: Any = ScramMechanism(MECHANISM)
# Per process: decoys look alike for repeated attempts, and nothing outside can derive them.
_DECOY_KEY = secrets.token_bytes(32)
_FIELDS = frozenset({"mechanism", "salt", "stored_key", "server_key", "iterations"})

_BAD_CREDENTIALS = "authentication failed: invalid username or password"
_BAD_MESSAGE = ("authentication failed: malformed or out-of-order SCRAM message; "
                "start a new exchange")


class AuthenticationFailed(Exception):
    """The exchange did not authenticate. Raised by the server side with a message safe
    to show the client (it never says whether the user exists); raised by the client
    side with the reason (a garbled server message, a server that cannot prove it
    holds the credential)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the cluster stores for a user: enough to verify a password, not to use one."""

    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_json(self) -> bytes:
        fields = {"mechanism": self.mechanism, "salt": _b64(self.salt),
                  "stored_key": _b64(self.stored_key), "server_key": _b64(self.server_key),
                  "iterations": self.iterations}
        return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode("ascii")

    @classmethod
    def from_json(cls, data: bytes) -> ScramCredential:
        try:
            obj = json.loads(data)
        except (ValueError, TypeError, RecursionError) as exc:
            raise ValueError(f"SCRAM credential is not JSON: {exc}") from None
        if not isinstance(obj, dict) or set(obj) != _FIELDS:
            raise ValueError(f"SCRAM credential must be an object with exactly the fields "
                             f"{sorted(_FIELDS)}")
        credential = cls(obj["mechanism"], _unb64(obj["salt"], "salt"),
                         _unb64(obj["stored_key"], "stored_key"),
                         _unb64(obj["server_key"], "server_key"), obj["iterations"])
        credential.validate()  # the mechanism's and iterations' types too
        return credential

    def fingerprint(self) -> bytes:
        """SHA-256 over every field (length-prefixed): equal for equal credentials,
        different after any password change (a new salt and keys)."""
        digest = hashlib.sha256(b"strand-scram-credential-v1")
        for part in (self.mechanism.encode("utf-8", "surrogatepass"), self.salt,
                     self.stored_key, self.server_key, str(self.iterations).encode("ascii")):
            digest.update(len(part).to_bytes(4, "big"))
            digest.update(part)
        return digest.digest()

    def validate(self) -> None:
        if self.mechanism != MECHANISM:
            raise ValueError(f"unsupported SCRAM mechanism {self.mechanism!r}: only "
                             f"{MECHANISM} is supported")
        _check_iterations(self.iterations)
        _check_salt(self.salt)
        for name, key in (("stored_key", self.stored_key), ("server_key", self.server_key)):
            if not isinstance(key, bytes) or len(key) != KEY_BYTES:
                size = len(key) if isinstance(key, bytes) else type(key).__name__
                raise ValueError(f"SCRAM credential: {name} must be {KEY_BYTES} bytes for "
                                 f"{MECHANISM}, not {size}")


def make_credential(password: str, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """The credential for ``password``, computed where the password is (the client)."""
    _check_iterations(iterations)
    _check_password(password)
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    _check_salt(salt)
    try:
        out_salt, stored_key, server_key, out_iterations = _MECH.make_auth_info(
            password, iteration_count=iterations, salt=salt)
    except ScramException as exc:
        raise ValueError(f"cannot make a SCRAM credential: {exc}") from exc
    credential = ScramCredential(MECHANISM, bytes(out_salt), bytes(stored_key),
                                 bytes(server_key), int(out_iterations))
    credential.validate()
    return credential


def validate_username(name: str) -> None:
    """A name that can authenticate: not empty, at most 256 characters, no control or
    invisible characters, and unchanged by SASLprep (RFC 4013; SCRAM prepares the name
    the client sends, so any other name could never log in)."""
    if not isinstance(name, str) or not name:
        raise ValueError("username must be a non-empty string")
    if len(name) > MAX_USERNAME_CHARS:
        raise ValueError(f"username is longer than {MAX_USERNAME_CHARS} characters")
    for ch in name:
        if unicodedata.category(ch).startswith("C"):
            raise ValueError(f"username has a control or invisible character "
                             f"(U+{ord(ch):04X})")
    try:
        prepared = saslprep(name)
    except ScramException as exc:
        raise ValueError(f"username is not allowed by SASLprep (RFC 4013): {exc}") from None
    if prepared != name:
        raise ValueError(f"username changes under SASLprep (RFC 4013) to {prepared!r}: "
                         f"use that form")


class ScramServerExchange:
    """One exchange on the server. lookup(username) -> credential or None.

    An unknown user (or a stored credential that does not validate) goes on with a decoy
    credential, so the exchange fails in :meth:`final` exactly as for a wrong password.
    An exception from ``lookup`` (a store outage) propagates unchanged: it is not a
    failed authentication. Any failure ends the exchange."""

    def __init__(self, lookup: Callable[[str], ScramCredential | None]) -> None:
        self._lookup = lookup
        self._server: Any = _MECH.make_server(self._auth_info)
        self._state = "start"
        self._decoy = False
        self._name: str | None = None
        self._credential: ScramCredential | None = None
        self._lookup_error: Exception | None = None

    def first(self, client_first: str) -> str:
        self._advance("start")
        _check_message(client_first, _BAD_MESSAGE)
        try:
            self._server.set_client_first(client_first)
            server_first: str = self._server.get_server_first()
        except Exception as exc:
            if self._lookup_error is not None:
                raise self._lookup_error from None
            raise AuthenticationFailed(_BAD_MESSAGE) from exc
        self._state = "first"
        return server_first

    def final(self, client_final: str) -> str:
        self._advance("first")
        _check_message(client_final, _BAD_MESSAGE)
        try:
            self._server.set_client_final(client_final)
            server_final: str = self._server.get_server_final()
        except ScramException as exc:
            bad_proof = exc.server_error == ServerError.INVALID_PROOF
            raise AuthenticationFailed(_BAD_CREDENTIALS if bad_proof else _BAD_MESSAGE
                                       ) from exc
        except Exception as exc:
            raise AuthenticationFailed(_BAD_MESSAGE) from exc
        if self._decoy:  # unreachable short of a preimage of the decoy's StoredKey
            raise AuthenticationFailed(_BAD_CREDENTIALS)
        self._state = "done"
        return server_final

    @property
    def username(self) -> str:
        """The authenticated user (SASLprep'd, unescaped), once :meth:`final` succeeded."""
        if self._state != "done" or self._name is None:
            raise AuthenticationFailed("not authenticated: the exchange has not succeeded")
        return self._name

    @property
    def credential(self) -> ScramCredential:
        """The credential the user authenticated with, once :meth:`final` succeeded."""
        if self._state != "done" or self._credential is None:
            raise AuthenticationFailed("not authenticated: the exchange has not succeeded")
        return self._credential

    def _advance(self, expected: str) -> None:
        state, self._state = self._state, "failed"  # until the step succeeds
        if state != expected:
            raise AuthenticationFailed(_BAD_MESSAGE)

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        """scramp's auth_fn: the credential's parts, a decoy's for an unknown user."""
        credential = None
        if _valid(lambda: validate_username(username)):  # else no such user: no lookup
            try:
                credential = self._lookup(username)
            except Exception as exc:
                self._lookup_error = exc
                raise
        if not isinstance(credential, ScramCredential) or not _valid(credential.validate):
            credential, self._decoy = _decoy(username), True
        self._name, self._credential = username, credential
        return (credential.salt, credential.stored_key, credential.server_key,
                credential.iterations)


class ScramClientExchange:
    """One exchange on the client: :meth:`first`, :meth:`final`, :meth:`verify` in
    that order. ValueError at construction for a name or password that cannot work."""

    def __init__(self, username: str, password: str) -> None:
        validate_username(username)
        _check_password(password)
        try:
            self._client: Any = ScramClient([MECHANISM], username, password)
        except ScramException as exc:
            raise ValueError(f"cannot start a SCRAM exchange: {exc}") from exc
        self._state = "start"

    def first(self) -> str:
        self._advance("start", "first() called twice")
        client_first: str = self._client.get_client_first()
        self._state = "first"
        return client_first

    def final(self, server_first: str) -> str:
        self._advance("first", "final() must follow first(), once")
        _check_message(server_first, "the server-first message is too long or not text")
        try:
            self._client.set_server_first(server_first)
            iterations = int(self._client.iterations)
        except Exception as exc:
            raise AuthenticationFailed(f"malformed server-first message: {exc}") from exc
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise AuthenticationFailed(
                f"the server asks for {iterations} iterations, outside "
                f"{MIN_ITERATIONS}..{MAX_ITERATIONS}: refused")
        try:
            client_final: str = self._client.get_client_final()
        except Exception as exc:
            raise AuthenticationFailed(f"cannot answer the server-first message: {exc}"
                                       ) from exc
        self._state = "final"
        return client_final

    def verify(self, server_final: str) -> None:
        """Check the server's signature: only a server holding this user's credential
        (its ServerKey) can make it."""
        self._advance("final", "verify() must follow final(), once")
        _check_message(server_final, "the server-final message is too long or not text")
        try:
            self._client.set_server_final(server_final)
        except Exception as exc:
            raise AuthenticationFailed(
                f"the server did not prove it holds this user's credential: {exc}") from exc
        self._state = "done"

    def _advance(self, expected: str, message: str) -> None:
        state, self._state = self._state, "failed"
        if state != expected:
            raise AuthenticationFailed(f"SCRAM exchange out of order: {message}")


def _valid(check: Callable[[], None]) -> bool:
    try:
        check()
    except ValueError:
        return False
    return True


def _decoy(username: str) -> ScramCredential:
    """A credential no password matches, the same for the same name in this process."""
    name = username.encode("utf-8", "surrogatepass")

    def part(label: bytes, size: int) -> bytes:
        return hmac.new(_DECOY_KEY, label + b"\0" + name, hashlib.sha512).digest()[:size]

    return ScramCredential(MECHANISM, part(b"salt", SALT_BYTES), part(b"stored", KEY_BYTES),
                           part(b"server", KEY_BYTES), DEFAULT_ITERATIONS)


def _check_message(message: object, failure: str) -> None:
    if not isinstance(message, str) or len(message) > MAX_MESSAGE_CHARS:
        raise AuthenticationFailed(failure)
    try:
        message.encode("utf-8")
    except UnicodeEncodeError:
        raise AuthenticationFailed(failure) from None


def _check_iterations(iterations: int) -> None:
    if type(iterations) is not int or not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"SCRAM iterations must be an integer in "
                         f"{MIN_ITERATIONS}..{MAX_ITERATIONS}, not {iterations!r}")


def _check_salt(salt: bytes) -> None:
    if not isinstance(salt, bytes) or not MIN_SALT_BYTES <= len(salt) <= MAX_SALT_BYTES:
        size = len(salt) if isinstance(salt, bytes) else type(salt).__name__
        raise ValueError(f"SCRAM salt must be {MIN_SALT_BYTES}..{MAX_SALT_BYTES} bytes "
                         f"(never empty), not {size}")


def _check_password(password: str) -> None:
    if not isinstance(password, str) or not password:
        raise ValueError("password must be a non-empty string")
    try:
        prepared = saslprep(password)
    except ScramException as exc:
        raise ValueError(f"password is not allowed by SASLprep (RFC 4013): {exc}") from None
    if not prepared:
        raise ValueError("password is empty once prepared (SASLprep, RFC 4013)")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(value: object, name: str) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"SCRAM credential: {name!r} must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"SCRAM credential: {name!r} is not valid base64") from None
