"""Kafka's SASL handshake and authentication on the gateway's Kafka listener.

A Kafka client names its mechanism (SaslHandshake v1), then sends the mechanism's
messages framed as SaslAuthenticate requests. Strand's gateway offers SCRAM-SHA-512
(:mod:`services.gateway.authenticator`, through the servicer's own SaslAuthenticate):
the client-first message starts an exchange, the client-final one ends it. On success
the connection's principal becomes the user (``call.connection.principal``), which
the listener sets as the caller of every later request; the session lifetime is
answered so clients re-authenticate before it lapses (KIP-368).

PLAIN is not offered: the listener is plaintext, and PLAIN would send the password as
it is. SaslHandshake v0 (raw SASL tokens after the handshake, unframed) is not served:
clients since Kafka 1.0 use v1.

The exchange in progress is per connection; it is kept against the connection's
:class:`~services.gateway.kafka.call.KafkaContext` (one per connection, alive as long
as it is), weakly, so a closed connection takes its state with it.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode

from services.gateway.kafka.call import Handler, KafkaCall, KafkaContext
from services.gateway.kafka.messages import build, kafka_error, timedelta_ms
from services.gateway.kafka.replies import module_of
from strand.errors import ErrorCode, StrandError
from strand.security.scram import MECHANISM
from strand.v1 import security_pb2 as pb

__all__ = ["HANDLERS", "MECHANISMS", "VERSIONS"]

log = logging.getLogger(__name__)

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
MECHANISMS = (MECHANISM,)
# Kafka's code for a SASL message out of order (Strand's own calls have no such state).
ILLEGAL_SASL_STATE = int(KafkaErrorCode.illegal_sasl_state)


@dataclass(slots=True)
class _Exchange:
    """A connection's SASL state: the mechanism it chose, the exchange under way."""

    mechanism: str
    exchange_id: str = ""


_EXCHANGES: weakref.WeakKeyDictionary[KafkaContext, _Exchange] = weakref.WeakKeyDictionary()


async def sasl_handshake(request: Any, call: KafkaCall) -> Any:
    module = module_of(request)
    mechanism = str(request.mechanism).upper()
    if mechanism not in MECHANISMS:
        _EXCHANGES.pop(call.context, None)
        log.info("kafka client asked for a SASL mechanism not offered",
                 extra={"peer": call.context.peer(), "mechanism": request.mechanism})
        return build(module, "SaslHandshakeResponse",
                     error_code=kafka_error(ErrorCode.UNSUPPORTED_SASL_MECHANISM),
                     mechanisms=MECHANISMS)
    _EXCHANGES[call.context] = _Exchange(mechanism)
    return build(module, "SaslHandshakeResponse", error_code=kafka_error(ErrorCode.NONE),
                 mechanisms=MECHANISMS)


def _failed(module: Any, code: int, message: str) -> Any:
    return build(module, "SaslAuthenticateResponse", error_code=kafka_error(code),
                 error_message=message, auth_bytes=b"", session_lifetime=timedelta_ms(0))


async def sasl_authenticate(request: Any, call: KafkaCall) -> Any:
    module = module_of(request)
    exchange = _EXCHANGES.get(call.context)
    if exchange is None or call.connection is None:
        return _failed(module, ILLEGAL_SASL_STATE,
                       "SaslAuthenticate before a SaslHandshake naming the mechanism "
                       f"({', '.join(MECHANISMS)})")
    answer: pb.SaslAuthenticateResponse = await call.servicer.SaslAuthenticate(
        pb.SaslAuthenticateRequest(mechanism=exchange.mechanism,
                                   exchange_id=exchange.exchange_id,
                                   auth_bytes=bytes(request.auth_bytes)), call.context)
    if answer.error_code:
        del _EXCHANGES[call.context]
        log.info("kafka client failed SASL authentication",
                 extra={"peer": call.context.peer(), "error": answer.error_message})
        return _failed(module, answer.error_code, answer.error_message)
    exchange.exchange_id = answer.exchange_id
    if answer.session_token:  # the final message: the exchange is done
        del _EXCHANGES[call.context]
        try:
            call.connection.principal = call.servicer.authenticator.principal(
                answer.session_token, ())
        except StrandError as exc:  # the credential changed in between
            return _failed(module, exc.code, str(exc))
        log.info("kafka client authenticated", extra={
            "peer": call.context.peer(), "principal": str(call.connection.principal)})
    return build(module, "SaslAuthenticateResponse", error_code=kafka_error(ErrorCode.NONE),
                 error_message=None, auth_bytes=answer.auth_bytes,
                 session_lifetime=timedelta_ms(answer.session_lifetime_ms))


HANDLERS: dict[int, Handler] = {SASL_HANDSHAKE: sasl_handshake,
                                SASL_AUTHENTICATE: sasl_authenticate}
VERSIONS: dict[int, tuple[int, int]] = {SASL_HANDSHAKE: (1, 1), SASL_AUTHENTICATE: (0, 2)}
