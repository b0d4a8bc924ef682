"""The gRPC server every Strand service runs: telemetry interceptors, the standard
health service, room for 64 MiB messages (fetch answers, replica batches), and a
clear error when the address cannot be bound. With TLS, the health service alone
may also be served in plaintext on a port of its own, for probes that cannot speak
TLS (``ServiceTls.plaintext_health_port``)."""

from __future__ import annotations

import asyncio
import weakref
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

# The health servicer of each server new_server made: serve() serves it in plaintext
# too when the TLS settings ask for it.
_HEALTH: weakref.WeakKeyDictionary[grpc.aio.Server, health.aio.HealthServicer] = \
    weakref.WeakKeyDictionary()
# The tasks that stop a plaintext health listener with its server (kept referenced).
_HEALTH_STOPPERS: set[asyncio.Task[None]] = set()


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
    _HEALTH[server] = health_servicer
    return server, health_servicer


async def serve(server: grpc.aio.Server, listen: str,
                tls: ServerTls | ServiceTls | None = None) -> int:
    """Bind ``listen`` (host:port), with TLS when ``tls`` is given (certificates
    followed on disk), and start; returns the bound port. A service's TLS with a
    ``plaintext_health_port`` also starts the health service alone on that port, in
    plaintext, until the server stops."""
    health_port = 0
    if isinstance(tls, ServiceTls):
        health_port = tls.plaintext_health_port
        tls = tls.server
    if tls is not None:
        tls.check()
        port: int = server.add_secure_port(listen, server_credentials(tls))
    else:
        port = server.add_insecure_port(listen)
    if port == 0:
        raise RuntimeError(f"cannot listen on {listen}")
    await server.start()
    if health_port:
        await _serve_health_in_plaintext(server, f"{listen.rsplit(':', 1)[0]}:{health_port}")
    return port


async def _serve_health_in_plaintext(server: grpc.aio.Server, listen: str) -> None:
    """The server's health service (the same servicer: the same answers, graceful
    shutdown included) on a plaintext listener of its own that serves nothing else,
    stopped when ``server`` stops."""
    health_servicer = _HEALTH.get(server)
    if health_servicer is None:
        raise RuntimeError("a plaintext health port needs a server made by new_server")
    plaintext = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, plaintext)
    if plaintext.add_insecure_port(listen) == 0:
        raise RuntimeError(f"cannot listen on {listen} (the plaintext health port)")
    await plaintext.start()

    async def stop_with_server() -> None:
        try:
            await server.wait_for_termination()
        finally:
            await plaintext.stop(None)

    stopper = asyncio.create_task(stop_with_server(), name="plaintext-health-stopper")
    _HEALTH_STOPPERS.add(stopper)
    stopper.add_done_callback(_HEALTH_STOPPERS.discard)


async def set_serving(health_servicer: health.aio.HealthServicer, *services: str) -> None:
    """Health checks of the whole server ("") and of ``services`` answer SERVING."""
    for service in ("", *services):
        await health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
