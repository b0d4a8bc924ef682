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
           "KafkaContext"]

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
class Connection:
    """One client connection's state across its requests: who it is once
    authenticated (None: not yet; the anonymous principal when the gateway requires
    no authentication). A SASL handler sets ``principal`` when the exchange succeeds."""

    peer_host: str
    principal: Principal | None = None


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
