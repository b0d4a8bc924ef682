"""strand.security.tls on a real gRPC listener (the services' own server: health
service, telemetry interceptors): TLS served and verified, plaintext refused, mutual
TLS refusing a client without a certificate of the CA, certificates rotated on disk
served to the next connection without a restart (and a half-done rotation never
served), and settings that cannot work refused before anything starts."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from strand.client.channel import open_aio_channel
from strand.launcher import free_port, port_open
from strand.security.tls import ClientTls, ServerTls, ServiceTls, TlsError
from strand.service.grpc_server import new_server, serve, set_serving
from tests.support.tls import (
    CA,
    OTHER_CA,
    cert,
    client_tls,
    key,
    presented_name,
    rotate,
    service_files,
)

Check = Callable[[ClientTls | None], Awaitable[grpc.StatusCode | None]]


async def _listener(tls: ServerTls) -> tuple[grpc.aio.Server, str]:
    server, health = new_server()
    port = await serve(server, "127.0.0.1:0", tls)
    await set_serving(health)
    return server, f"127.0.0.1:{port}"


async def _check(address: str, tls: ClientTls | None) -> grpc.StatusCode | None:
    """A health check over a new channel: None when it answers SERVING, else the
    failed call's status."""
    async with open_aio_channel(address, tls=tls) as channel:
        try:
            answer = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=3)
        except grpc.aio.AioRpcError as exc:
            return exc.code()
    assert answer.status == health_pb2.HealthCheckResponse.SERVING
    return None


def _run(tls: ServerTls, scenario: Callable[[str, Check], Awaitable[None]]) -> None:
    async def main() -> None:
        server, address = await _listener(tls)
        try:
            await scenario(address, lambda client: _check(address, client))
        finally:
            await server.stop(None)

    asyncio.run(main())


def test_tls_is_served_and_plaintext_refused(tmp_path: Path) -> None:
    certificate, private_key = service_files(tmp_path)

    async def scenario(address: str, check: Check) -> None:
        assert await check(client_tls(None)) is None  # the server verified with the CA
        assert await check(None) is grpc.StatusCode.UNAVAILABLE  # plaintext: no answer
        # A client that does not trust the CA refuses the server.
        assert await check(ClientTls(OTHER_CA)) is grpc.StatusCode.UNAVAILABLE

    _run(ServerTls(certificate, private_key), scenario)


def test_mutual_tls_refuses_a_client_without_a_certificate_of_the_ca(tmp_path: Path) -> None:
    certificate, private_key = service_files(tmp_path)

    async def scenario(address: str, check: Check) -> None:
        assert await check(client_tls("client")) is None
        assert await check(client_tls(None)) is grpc.StatusCode.UNAVAILABLE
        assert await check(client_tls("stranger")) is grpc.StatusCode.UNAVAILABLE
        assert presented_name(address, "client") == "strand-service"

    _run(ServerTls(certificate, private_key, CA, require_client_cert=True), scenario)


def test_rotated_files_are_served_to_the_next_connection(tmp_path: Path) -> None:
    certificate, private_key = service_files(tmp_path)

    async def scenario(address: str, check: Check) -> None:
        async with open_aio_channel(address, tls=client_tls(None)) as kept:
            stub = health_pb2_grpc.HealthStub(kept)
            await stub.Check(health_pb2.HealthCheckRequest(), timeout=3)
            assert presented_name(address, None) == "strand-service"
            # Half a rotation (the new certificate, the old key): not served.
            shutil.copyfile(cert("service-rotated"), certificate)
            assert presented_name(address, None) == "strand-service"
            assert await check(client_tls(None)) is None
            rotate(tmp_path)
            assert presented_name(address, None) == "strand-service-rotated"
            assert await check(client_tls(None)) is None
            # The connection made before the rotation goes on.
            await stub.Check(health_pb2.HealthCheckRequest(), timeout=3)

    _run(ServerTls(certificate, private_key), scenario)


@pytest.mark.parametrize(("settings", "message"), [
    ({"security_protocol": "TLS"},
     "security_protocol 'TLS': use PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ({"ssl_cafile": str(CA)}, "ssl_cafile given with security_protocol='PLAINTEXT'"),
    ({"security_protocol": "SSL", "ssl_certfile": str(cert("client"))},
     "give both ssl_certfile and ssl_keyfile"),
    ({"security_protocol": "SSL", "ssl_certfile": str(cert("client")),
      "ssl_keyfile": str(key("service"))}, "do not load as a pair"),
    ({"security_protocol": "SSL", "ssl_cafile": "/nonexistent/ca.pem"},
     "the CA bundle '/nonexistent/ca.pem' does not load"),
    ({"security_protocol": "SSL", "ssl_cafile": str(key("client"))}, "does not load"),
])
def test_client_settings_that_cannot_work_are_refused(settings: dict[str, str],
                                                       message: str) -> None:
    with pytest.raises(TlsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ClientTls.from_settings(**settings)


def test_client_settings() -> None:
    assert ClientTls.from_settings() is None
    tls = ClientTls.from_settings("SSL", str(CA), str(cert("client")), str(key("client")))
    assert tls == client_tls("client")
    assert tls is not None and tls.as_settings() == {
        "security_protocol": "SSL", "ssl_cafile": str(CA),
        "ssl_certfile": str(cert("client")), "ssl_keyfile": str(key("client"))}
    assert ClientTls.from_settings("SSL") == ClientTls()  # the system's roots


def test_a_listener_with_files_that_cannot_work_does_not_start(tmp_path: Path) -> None:
    with pytest.raises(TlsError, match="mutual TLS needs the CA bundle"):
        ServerTls(cert("service"), key("service"), require_client_cert=True)

    async def main() -> None:
        server, _ = new_server()
        with pytest.raises(TlsError, match="do not load as a pair"):
            await serve(server, "127.0.0.1:0", ServerTls(cert("service"), key("client")))
        with pytest.raises(TlsError, match="cannot read"):
            await serve(server, "127.0.0.1:0", ServerTls(tmp_path / "none.pem",
                                                         key("service")))
        await server.stop(None)

    asyncio.run(main())


def test_the_health_service_alone_is_served_in_plaintext_on_its_own_port(
        tmp_path: Path) -> None:
    """The kubelet's gRPC probes cannot speak TLS: a service's plaintext health port
    answers its health checks (the same servicer: NOT_SERVING once the service shuts
    down), serves no other method, and closes when the server stops; the TLS port is
    unchanged."""
    certificate, private_key = service_files(tmp_path)
    health_port = free_port()
    tls = ServiceTls.from_files(certificate, private_key, CA, require_client_cert=True,
                                plaintext_health_port=health_port)

    async def main() -> None:
        server, health = new_server(("storage node", tls))
        port = await serve(server, "127.0.0.1:0", tls)
        plaintext = f"127.0.0.1:{health_port}"
        try:
            await set_serving(health)
            assert await _serving(plaintext)
            # Mutual TLS on the service's port all the same.
            assert await _check(f"127.0.0.1:{port}", None) is grpc.StatusCode.UNAVAILABLE
            assert await _check(f"127.0.0.1:{port}", client_tls("client")) is None
            async with open_aio_channel(plaintext) as channel:
                other = channel.unary_unary("/strand.v1.Storage/Produce")
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await other(b"", timeout=3)
            assert refused.value.code() is grpc.StatusCode.UNIMPLEMENTED
            await health.enter_graceful_shutdown()
            assert not await _serving(plaintext)
        finally:
            await server.stop(None)
        await asyncio.sleep(0.1)  # the plaintext listener stops with the server
        assert not port_open(health_port)

    asyncio.run(main())


async def _serving(address: str) -> bool:
    async with open_aio_channel(address) as channel:
        answer = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=3)
    return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)
