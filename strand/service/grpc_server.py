"""The gRPC server every Strand service runs: telemetry interceptors, the standard
health service, room for 64 MiB messages (fetch answers, replica batches), and a
clear error when the address cannot be bound."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from strand.client.channel import MAX_MESSAGE_BYTES
from strand.security.tls import ServerTls, ServiceTls, server_credentials
from strand.service import telemetry
from strand.service.peer_identity import ServiceIdentityInterceptor

__all__ = ["GRPC_OPTIONS", "MAX_MESSAGE_BYTES", "new_server", "serve", "set_serving"]

GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]


def new_server(internal: tuple[str, ServiceTls | None] | None = None,
               interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
               ) -> tuple[grpc.aio.Server, health.aio.HealthServicer]:
    """A server with the telemetry interceptors and the health service (NOT_SERVING
    until ``set_serving``); add the service's own servicer, then ``serve``.
    ``internal`` (the service's name and TLS) marks a service only the others call:
    with service names in its TLS, it serves only callers presenting one.
    ``interceptors`` run after telemetry's (so what they refuse is counted)."""
    chain = list(telemetry.server_interceptors())
    if internal is not None:
        name, tls = internal
        if tls is not None and tls.service_names:
            chain.insert(0, ServiceIdentityInterceptor(tls.service_names, name))
    server = grpc.aio.server(options=GRPC_OPTIONS, interceptors=[*chain, *interceptors])
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    return server, health_servicer


async def serve(server: grpc.aio.Server, listen: str,
                tls: ServerTls | ServiceTls | None = None) -> int:
    """Bind ``listen`` (host:port), with TLS when ``tls`` is given (certificates
    followed on disk), and start; returns the bound port."""
    if isinstance(tls, ServiceTls):
        tls = tls.server
    if tls is not None:
        tls.check()
        port: int = server.add_secure_port(listen, server_credentials(tls))
    else:
        port = server.add_insecure_port(listen)
    if port == 0:
        raise RuntimeError(f"cannot listen on {listen}")
    await server.start()
    return port


async def set_serving(health_servicer: health.aio.HealthServicer, *services: str) -> None:
    """Health checks of the whole server ("") and of ``services`` answer SERVING."""
    for service in ("", *services):
        await health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
