"""strand.service.peer_identity on a real mutual-TLS listener: an internal service
serves callers whose certificate names a service identity (unary and streaming
calls), refuses the others with PERMISSION_DENIED naming the certificate, and keeps
its health service open; the flags that set it are checked together."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from strand.client.channel import open_aio_channel
from strand.security.tls import ClientTls, TlsError
from strand.service.entry import new_parser, service_tls
from strand.service.grpc_server import new_server, serve, set_serving
from strand.service.peer_identity import ServiceIdentityInterceptor
from tests.support.tls import CA, SERVICE_NAMES, cert, client_tls, key
from tests.support.tls import service_tls as fixture_tls


async def _echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return request


async def _echo_twice(request: bytes, context: grpc.aio.ServicerContext
                      ) -> AsyncIterator[bytes]:
    yield request
    yield request


async def _calls(address: str, client: ClientTls) -> tuple[Any, ...]:
    """A unary call, a streaming call and a health check; each answer or the status."""
    async with open_aio_channel(address, tls=client) as channel:
        outcomes: list[Any] = []
        try:
            outcomes.append(await channel.unary_unary("/test.Echo/Say")(b"hi", timeout=5))
        except grpc.aio.AioRpcError as exc:
            outcomes.append((exc.code(), exc.details()))
        try:
            outcomes.append([a async for a in channel.unary_stream("/test.Echo/Twice")(
                b"ho", timeout=5)])
        except grpc.aio.AioRpcError as exc:
            outcomes.append((exc.code(), exc.details()))
        health = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5)
        outcomes.append(health.status == health_pb2.HealthCheckResponse.SERVING)
    return tuple(outcomes)


def test_an_internal_service_serves_only_service_certificates(tmp_path: Path) -> None:
    tls = fixture_tls(tmp_path, require_client_cert=True, service_names=SERVICE_NAMES)

    async def main() -> None:
        server, health = new_server(("storage node", tls))
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("test.Echo", {
            "Say": grpc.unary_unary_rpc_method_handler(_echo),
            "Twice": grpc.unary_stream_rpc_method_handler(_echo_twice)})])
        port = await serve(server, "127.0.0.1:0", tls)
        await set_serving(health)
        address = f"127.0.0.1:{port}"
        try:
            assert await _calls(address, tls.client) == (b"hi", [b"ho", b"ho"], True)
            unary, streaming, healthy = await _calls(address, client_tls("client"))
            for code, details in (unary, streaming):
                assert code is grpc.StatusCode.PERMISSION_DENIED
                assert "certificate 'alice' is not a service identity" in details
                assert "on the storage node" in details and "through the gateway" in details
            assert healthy
        finally:
            await server.stop(None)

    asyncio.run(main())


def test_names_match_the_common_name_or_a_subject_alternative_name() -> None:
    check = ServiceIdentityInterceptor(["strand-*", "*.strand.svc"], "controller")
    assert check.allowed(["strand-service"])
    assert check.allowed(["someone", "storage-0.storage.strand.svc"])
    assert not check.allowed(["alice", "127.0.0.1"])
    assert not check.allowed([])
    with pytest.raises(ValueError, match="every call would be refused"):
        ServiceIdentityInterceptor([], "controller")


def test_service_names_need_client_certificates(tmp_path: Path) -> None:
    with pytest.raises(TlsError, match="needs --tls-client-auth required"):
        fixture_tls(tmp_path, service_names=SERVICE_NAMES)
    parser = new_parser("strand-test", None, "127.0.0.1:1")
    files = ["--tls-cert", str(cert("service")), "--tls-key", str(key("service")),
             "--tls-ca", str(CA)]
    args = parser.parse_args([*files, "--tls-client-auth", "required",
                              "--tls-service-names", "strand-*, *.strand.svc"])
    parsed = service_tls(parser, args)
    assert parsed is not None and parsed.service_names == ("strand-*", "*.strand.svc")
    with pytest.raises(SystemExit):
        service_tls(parser, parser.parse_args([*files, "--tls-service-names", "strand-*"]))
    with pytest.raises(SystemExit):
        service_tls(parser, parser.parse_args(["--tls-service-names", "strand-*"]))
