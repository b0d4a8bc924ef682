"""The launcher's two gRPC questions to a running cluster (its transport module):
does a service serve (the standard gRPC health check), and how many storage nodes
has the gateway registered.

gRPC and the stubs are imported on the first question, not with the launcher:
``strand dev status`` without a cluster, and every ``--help``, never need them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import grpc

    from strand.security.tls import ClientTls

T = TypeVar("T")


def _ask(address: str, call: Callable[[grpc.Channel], T],
         tls: ClientTls | None = None, user: tuple[str, str] | None = None) -> T | None:
    """``call`` on a channel of its own to ``address`` (TLS with ``tls``, as SCRAM
    ``user`` (name, password) if given); None when the call fails."""
    import grpc

    from strand.client.channel import open_channel
    from strand.client.sasl import SaslCredentials
    from strand.errors import StrandError
    from strand.security.scram import MECHANISM

    sasl = None if user is None else SaslCredentials(MECHANISM, *user)
    with open_channel(address, tls=tls, sasl=sasl) as channel:
        try:
            return call(channel)
        except (grpc.RpcError, StrandError):  # StrandError: authentication refused
            return None


def healthy(address: str, timeout: float = 0.5, tls: ClientTls | None = None) -> bool:
    """Whether the service at ``address`` answers its health check with SERVING."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    response = _ask(address, lambda channel: health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(), timeout=timeout), tls)
    return response is not None and response.status == health_pb2.HealthCheckResponse.SERVING


def registered_brokers(gateway: str, timeout: float = 2.0, tls: ClientTls | None = None,
                       user: tuple[str, str] | None = None) -> int:
    """How many storage nodes the gateway's metadata lists (0 when it does not answer)."""
    from strand.v1 import common_pb2, gateway_pb2_grpc

    response = _ask(gateway, lambda channel: gateway_pb2_grpc.GatewayStub(channel).Metadata(
        common_pb2.MetadataRequest(), timeout=timeout), tls, user)
    return len(response.brokers) if response is not None else 0
