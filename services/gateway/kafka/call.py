"""What a Kafka API handler gets: the decoded request and the call it belongs to.

A handler translates one Kafka request (a kio message of the version the client sent)
into the gateway servicer's own calls and their answers back into the kio response of
the same version. It calls the servicer in-process with ``call.context``, whose
``abort`` raises :class:`CallRefused` (carrying the Strand error code the servicer
named) instead of ending a gRPC call; the handler turns that into Kafka's error code.
The caller (principal, host, client id) is set in ``services.gateway.access.CALLER``
for the connection before a handler runs, exactly as the gRPC authentication step does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from strand.errors import ErrorCode
from strand.security.principal import Principal

if TYPE_CHECKING:
    from services.gateway.server import GatewayServicer

__all__ = ["GATEWAY_BROKER_ID", "CallRefused", "Connection", "Handler", "KafkaCall",
           "KafkaContext", "SaslExchange"]

# The one Kafka broker every gateway presents itself as (see services.gateway.kafka.brokers).
GATEWAY_BROKER_ID = 0


class CallRefused(Exception):
    """The servicer refused the whole call (where a gRPC call would be aborted)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class KafkaContext:
    """Stands in for ``grpc.aio.ServicerContext`` when the servicer is called for a
    Kafka client: the peer is the TCP peer, and an abort becomes :class:`CallRefused`."""

    def __init__(self, peer: str) -> None:
        self._peer = peer

    def peer(self) -> str:
        return self._peer

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()

    async def abort(self, code: Any, details: str = "") -> None:
        # The servicer's details start with the Strand error's name: "NAME: why".
        name, _, why = details.partition(": ")
        error = ErrorCode.__members__.get(name, ErrorCode.UNKNOWN_SERVER_ERROR)
        raise CallRefused(error, why if error is not ErrorCode.UNKNOWN_SERVER_ERROR
                          else details)


@dataclass(slots=True)
class SaslExchange:
    """A SASL exchange under way on a connection: the mechanism its SaslHandshake
    named, and the gateway's id of the exchange once its first message is answered."""

    mechanism: str
    exchange_id: str = ""


@dataclass(slots=True)
class Connection:
    """One client connection's state across its requests, as a Kafka broker keeps it
    per channel.

    ``principal``: who it is once authenticated (None: not yet; the anonymous
    principal, or its client certificate's, when the gateway requires no SASL). A
    successful SASL exchange sets ``principal``, ``mechanism`` and ``session_token``
    (the gateway's session: :meth:`Authenticator.principal` tells when it lapsed or its
    user's credential changed, KIP-368). ``closing`` says why the connection ends once
    the answer being written is sent (a failed authentication, as Kafka closes it)."""

    peer_host: str
    principal: Principal | None = None
    tls: bool = False  # the connection is TLS (SSL, SASL_SSL)
    # Its verified client certificate is a service identity of the cluster (a super
    # user while no SASL session replaces the certificate's principal).
    service: bool = False
    sasl: SaslExchange | None = None
    mechanism: str | None = None
    session_token: str | None = None
    closing: str | None = None


@dataclass(frozen=True, slots=True)
class KafkaCall:
    """One Kafka request being served."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    servicer: GatewayServicer
    context: KafkaContext
    # The listener's advertised address: Kafka clients are pointed at gateways.
    advertised_host: str
    advertised_port: int
    # The broker id Metadata and FindCoordinator name for this gateway (every gateway
    # is the same logical broker: services.gateway.kafka.brokers says why).
    broker_id: int = GATEWAY_BROKER_ID
    connection: Connection | None = None


# async handler(request, call) -> response, both kio messages of call.api_version.
Handler = Callable[[Any, KafkaCall], Awaitable[Any]]
