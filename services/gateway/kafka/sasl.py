"""Kafka's SASL handshake and authentication on the gateway's Kafka listener.

A Kafka client names its mechanism (SaslHandshake v1), then sends the mechanism's
messages framed as SaslAuthenticate requests. Strand's gateway offers SCRAM-SHA-512
(:mod:`services.gateway.authenticator`, through the servicer's own SaslAuthenticate):
the client-first message starts an exchange, the client-final one ends it. On success
the connection's principal becomes the user (``call.connection.principal``), which
the listener sets as the caller of every later request; the session lifetime is
answered so clients re-authenticate before it lapses (KIP-368).

PLAIN is offered on TLS connections only (:mod:`.sasl_plain`): on a plaintext one it
would send the password as it is. SaslHandshake v0 (raw SASL tokens after the
handshake, unframed) is not served: clients since Kafka 1.0 use v1.

What Kafka's broker does, this does (its SaslServerAuthenticator):

* the exchange in progress, the mechanism and the session are the connection's
  (:class:`~services.gateway.kafka.call.Connection`);
* a failed authentication is answered (SASL_AUTHENTICATION_FAILED and why) and the
  connection closed;
* a connection re-authenticates (KIP-368: a SaslHandshake then SaslAuthenticate on the
  authenticated connection, before its session lapses) as the same principal with the
  same mechanism, or is refused and closed ("cannot change principals");
* the listener closes a connection whose session lapsed, or whose user's credential
  changed or was removed, at its next request other than a re-authentication.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode

from services.gateway.kafka.call import Connection, Handler, KafkaCall, SaslExchange
from services.gateway.kafka.messages import build, kafka_error, timedelta_ms
from services.gateway.kafka.replies import module_of, pb_code
from services.gateway.kafka.sasl_plain import PLAIN, authenticate_plain
from strand.errors import AuthenticationError, ErrorCode, StrandError
from strand.security.scram import MECHANISM
from strand.v1 import security_pb2 as pb

__all__ = ["HANDLERS", "MECHANISMS", "VERSIONS", "offered"]

log = logging.getLogger(__name__)

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
MECHANISMS = (MECHANISM, PLAIN)


def offered(connection: Connection) -> tuple[str, ...]:
    """The mechanisms a connection may use: PLAIN only over TLS."""
    return MECHANISMS if connection.tls else (MECHANISM,)

# Kafka's code for a SASL message out of order (Strand's own calls have no such state).
ILLEGAL_SASL_STATE = int(KafkaErrorCode.illegal_sasl_state)


def _connection(call: KafkaCall) -> Connection:
    if call.connection is None:  # the listener always gives one
        raise RuntimeError("a SASL request served without its connection")
    return call.connection


async def sasl_handshake(request: Any, call: KafkaCall) -> Any:
    module = module_of(request)
    connection = _connection(call)
    mechanism = str(request.mechanism).upper()
    mechanisms = offered(connection)
    if mechanism not in mechanisms:
        connection.sasl = None
        log.info("kafka client asked for a SASL mechanism not offered",
                 extra={"peer": call.context.peer(), "mechanism": request.mechanism,
                        "tls": connection.tls})
        return build(module, "SaslHandshakeResponse",
                     error_code=kafka_error(ErrorCode.UNSUPPORTED_SASL_MECHANISM),
                     mechanisms=mechanisms)
    if connection.mechanism is not None and mechanism != connection.mechanism:
        # Kafka: a re-authentication keeps the mechanism the connection began with.
        connection.closing = "re-authentication with another SASL mechanism"
        log.warning("kafka client re-authenticating with another SASL mechanism: closing "
                    "the connection", extra={"peer": call.context.peer(),
                                             "was": connection.mechanism,
                                             "mechanism": mechanism})
        return build(module, "SaslHandshakeResponse",
                     error_code=kafka_error(ErrorCode.UNSUPPORTED_SASL_MECHANISM),
                     mechanisms=(connection.mechanism,))
    connection.sasl = SaslExchange(mechanism)
    return build(module, "SaslHandshakeResponse", error_code=kafka_error(ErrorCode.NONE),
                 mechanisms=mechanisms)


async def _step(exchange: SaslExchange, auth_bytes: bytes,
                call: KafkaCall) -> pb.SaslAuthenticateResponse:
    """The gateway's answer to one message: SCRAM through the servicer (as for gRPC
    clients), PLAIN here (one message, the session at once)."""
    if exchange.mechanism != PLAIN:
        answer: pb.SaslAuthenticateResponse = await call.servicer.SaslAuthenticate(
            pb.SaslAuthenticateRequest(mechanism=exchange.mechanism,
                                       exchange_id=exchange.exchange_id,
                                       auth_bytes=auth_bytes), call.context)
        return answer
    try:
        session = await authenticate_plain(call.servicer.authenticator, auth_bytes)
    except AuthenticationError as exc:
        return pb.SaslAuthenticateResponse(error_code=pb_code(exc.code), error_message=str(exc))
    return pb.SaslAuthenticateResponse(session_token=session.session_token,
                                       session_lifetime_ms=session.lifetime_ms)


def _failed(module: Any, code: int, message: str) -> Any:
    return build(module, "SaslAuthenticateResponse", error_code=kafka_error(code),
                 error_message=message, auth_bytes=b"", session_lifetime=timedelta_ms(0))


def _refuse(module: Any, call: KafkaCall, code: int, message: str) -> Any:
    """Answer a failed authentication; the connection closes once it is sent."""
    connection = _connection(call)
    connection.sasl = None
    connection.closing = "failed SASL authentication"
    log.info("kafka client failed SASL authentication: closing the connection",
             extra={"peer": call.context.peer(), "error": message})
    return _failed(module, code, message)


async def sasl_authenticate(request: Any, call: KafkaCall) -> Any:
    module = module_of(request)
    connection = _connection(call)
    exchange = connection.sasl
    if exchange is None:
        return _failed(module, ILLEGAL_SASL_STATE,
                       "SaslAuthenticate before a SaslHandshake naming the mechanism "
                       f"({', '.join(offered(connection))})")
    answer = await _step(exchange, bytes(request.auth_bytes), call)
    if answer.error_code:
        return _refuse(module, call, answer.error_code, answer.error_message)
    exchange.exchange_id = answer.exchange_id
    if answer.session_token:  # the final message: the exchange is done
        connection.sasl = None
        try:
            principal = call.servicer.authenticator.principal(answer.session_token, ())
        except StrandError as exc:  # the credential changed in between
            return _refuse(module, call, exc.code, str(exc))
        if connection.session_token is not None and principal != connection.principal:
            # Kafka (KIP-368): a connection never changes hands on re-authentication.
            return _refuse(module, call, ErrorCode.SASL_AUTHENTICATION_FAILED,
                           f"cannot change principals during re-authentication from "
                           f"{connection.principal} to {principal}: open a new "
                           "connection for another user")
        reauthenticated = connection.session_token is not None
        connection.principal = principal
        connection.mechanism = exchange.mechanism
        connection.session_token = answer.session_token
        log.info("kafka client authenticated", extra={
            "peer": call.context.peer(), "principal": str(principal),
            "reauthentication": reauthenticated})
    return build(module, "SaslAuthenticateResponse", error_code=kafka_error(ErrorCode.NONE),
                 error_message=None, auth_bytes=answer.auth_bytes,
                 session_lifetime=timedelta_ms(answer.session_lifetime_ms))


HANDLERS: dict[int, Handler] = {SASL_HANDSHAKE: sasl_handshake,
                                SASL_AUTHENTICATE: sasl_authenticate}
VERSIONS: dict[int, tuple[int, int]] = {SASL_HANDSHAKE: (1, 1), SASL_AUTHENTICATE: (0, 2)}
