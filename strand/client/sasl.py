"""SASL for the SDK's channels: a SCRAM-SHA-512 exchange with the gateway
(SaslAuthenticate), then the session token on every call (``authorization: Bearer``
metadata). When the gateway refuses a session (it lapsed, the gateway restarted, the
password changed) the client authenticates again once and repeats the call: the call
was refused before anything was done, so repeating it is safe.

Kafka's client settings: ``security_protocol`` SASL_PLAINTEXT or SASL_SSL,
``sasl_mechanism="SCRAM-SHA-512"``, ``sasl_plain_username``, ``sasl_plain_password``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from strand.errors import AuthenticationError, UnsupportedSaslMechanismError, error_for
from strand.security.scram import MECHANISM, AuthenticationFailed, ScramClientExchange
from strand.security.settings import SASL_PROTOCOLS, TlsError
from strand.v1 import security_pb2 as pb

__all__ = ["AioSaslInterceptor", "SaslCredentials", "SessionToken", "gateway_sasl",
           "sasl_channel"]

AUTHENTICATE = "/strand.v1.Gateway/SaslAuthenticate"
AUTH_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    mechanism: str
    username: str
    password: str

    @classmethod
    def from_settings(cls, security_protocol: str, sasl_mechanism: str | None,
                      username: str | None, password: str | None) -> SaslCredentials | None:
        """None without SASL; a setting that cannot work raises TlsError (ValueError)."""
        if security_protocol not in SASL_PROTOCOLS:
            if username or password or sasl_mechanism:
                raise TlsError(
                    f"SASL settings given with security_protocol={security_protocol!r}: set "
                    "security_protocol='SASL_PLAINTEXT' or 'SASL_SSL' to authenticate")
            return None
        mechanism = (sasl_mechanism or MECHANISM).upper()
        if mechanism != MECHANISM:
            raise UnsupportedSaslMechanismError(
                f"sasl_mechanism {sasl_mechanism!r}: Strand offers {MECHANISM}")
        if not username or not password:
            raise TlsError(f"security_protocol={security_protocol!r} needs "
                           "sasl_plain_username and sasl_plain_password")
        return cls(mechanism, username, password)

    def as_settings(self, tls: bool) -> dict[str, str]:
        """The SDK clients' keywords that give this (beside the TLS ones)."""
        return {"security_protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
                "sasl_mechanism": self.mechanism, "sasl_plain_username": self.username,
                "sasl_plain_password": self.password}


def gateway_sasl(bootstrap: str, user: SaslCredentials | None
                 ) -> dict[str, SaslCredentials] | None:
    """A service's :class:`~strand.client.channel.AioChannels` ``sasl``: ``user`` at
    its gateway (the address its channels open for ``bootstrap``)."""
    from strand.client.bootstrap import resolve_bootstrap

    return None if user is None else {resolve_bootstrap(bootstrap): user}


def _serialize(message: Any) -> bytes:
    return bytes(message.SerializeToString())


def _step(send: Callable[[pb.SaslAuthenticateRequest], pb.SaslAuthenticateResponse],
          request: pb.SaslAuthenticateRequest) -> pb.SaslAuthenticateResponse:
    response = send(request)
    if response.error_code:
        raise error_for(response.error_code, response.error_message)
    return response


class SessionToken:
    """The channel's current session; one exchange at a time, shared by its calls."""

    def __init__(self, credentials: SaslCredentials) -> None:
        self.credentials = credentials
        self.value: str | None = None
        self._lock = threading.Lock()

    def exchange(self, send: Callable[[pb.SaslAuthenticateRequest],
                                      pb.SaslAuthenticateResponse]) -> str:
        """Run a SCRAM exchange through ``send`` (one SaslAuthenticate call)."""
        creds = self.credentials
        client = ScramClientExchange(creds.username, creds.password)
        try:
            first = _step(send, pb.SaslAuthenticateRequest(
                mechanism=creds.mechanism, auth_bytes=client.first().encode()))
            final = _step(send, pb.SaslAuthenticateRequest(
                mechanism=creds.mechanism, exchange_id=first.exchange_id,
                auth_bytes=client.final(first.auth_bytes.decode()).encode()))
            client.verify(final.auth_bytes.decode())
        except AuthenticationFailed as exc:
            raise AuthenticationError(
                f"{creds.mechanism} authentication of user {creds.username!r} failed: "
                f"{exc}") from None
        except UnicodeDecodeError:
            raise AuthenticationError("the gateway's SCRAM message is not UTF-8") from None
        if not final.session_token:
            raise AuthenticationError("the gateway ended the exchange without a session")
        return final.session_token

    def current(self, send: Callable[[pb.SaslAuthenticateRequest],
                                     pb.SaslAuthenticateResponse]) -> str:
        with self._lock:
            if self.value is None:
                self.value = self.exchange(send)
            return self.value

    def refused(self, token: str) -> None:
        """The gateway refused ``token``: the next call authenticates again."""
        with self._lock:
            if self.value == token:
                self.value = None


def _with_token(details: Any, token: str) -> Any:
    """The call's details (gRPC's named tuples) with the session's metadata."""
    metadata = [(k, v) for k, v in (details.metadata or ()) if k != "authorization"]
    metadata.append(("authorization", f"Bearer {token}"))
    return details._replace(metadata=metadata)


def _aio_with_token(details: Any, token: str) -> Any:
    metadata = grpc.aio.Metadata(*[(k, v) for k, v in (details.metadata or ())
                                   if k != "authorization"])
    metadata.add("authorization", f"Bearer {token}")
    return details._replace(metadata=metadata)


def _session_refused(code: grpc.StatusCode | None) -> bool:
    return bool(code == grpc.StatusCode.UNAUTHENTICATED)


class _SyncSaslInterceptor(grpc.UnaryUnaryClientInterceptor,  # type: ignore[misc]
                           grpc.UnaryStreamClientInterceptor):  # type: ignore[misc]
    def __init__(self, session: SessionToken, raw: grpc.Channel) -> None:
        self.session = session
        authenticate = raw.unary_unary(
            AUTHENTICATE, request_serializer=_serialize,
            response_deserializer=pb.SaslAuthenticateResponse.FromString)
        self._send = lambda request: authenticate(request, timeout=AUTH_TIMEOUT_S)

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        token = self.session.current(self._send)
        outcome = continuation(_with_token(details, token), request)
        if not outcome.done():
            # A future (``stub.Method.future``): never wait for it here (the caller runs
            # calls concurrently). A refused session is dropped when the call ends; the
            # caller's retry authenticates again.
            outcome.add_done_callback(lambda done: self._check(done, token))
            return outcome
        if _session_refused(outcome.code()):
            self.session.refused(token)
            token = self.session.current(self._send)
            outcome = continuation(_with_token(details, token), request)
        return outcome

    def _check(self, call: Any, token: str) -> None:
        if not call.cancelled() and _session_refused(call.code()):
            self.session.refused(token)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(_with_token(details, self.session.current(self._send)),
                            request)


def sasl_channel(raw: grpc.Channel, credentials: SaslCredentials) -> grpc.Channel:
    """``raw`` with every call authenticated (blocking API: Consumer, Admin)."""
    return grpc.intercept_channel(raw, _SyncSaslInterceptor(SessionToken(credentials), raw))


class AioSaslInterceptor(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """The same for an asyncio channel (the producer's sender): the exchange runs in
    a thread over a blocking channel of its own, opened by ``open_blocking``, so a
    token is never fetched through the channel being intercepted."""

    def __init__(self, credentials: SaslCredentials,
                 open_blocking: Callable[[], grpc.Channel]) -> None:
        self.session = SessionToken(credentials)
        self._open_blocking = open_blocking

    def _exchange_blocking(self) -> str:
        channel = self._open_blocking()
        try:
            authenticate = channel.unary_unary(
                AUTHENTICATE, request_serializer=_serialize,
                response_deserializer=pb.SaslAuthenticateResponse.FromString)
            return self.session.current(
                lambda request: authenticate(request, timeout=AUTH_TIMEOUT_S))
        finally:
            channel.close()

    async def _token(self) -> str:
        token = self.session.value
        if token is not None:
            return token
        return await asyncio.to_thread(self._exchange_blocking)

    async def intercept_unary_unary(self, continuation: Any, details: Any,
                                    request: Any) -> Any:
        token = await self._token()
        call = await continuation(_aio_with_token(details, token), request)
        if _session_refused(await call.code()):
            self.session.refused(token)
            token = await self._token()
            call = await continuation(_aio_with_token(details, token), request)
        return call
