"""The Kafka listener: a TCP server speaking Kafka's binary protocol, one connection
per client, serving each connection's requests one at a time, in order (as a Kafka
broker mutes a connection until it has answered).

What a Kafka broker does, this does:

* an ApiVersions request of a version not served is answered (v0, UNSUPPORTED_VERSION,
  with the versions served); any other API or version not served closes the
  connection (Kafka closes on a request it cannot parse), as do malformed frames and
  frames over the size limit (socket.request.max.bytes) — each logged, that
  connection alone;
* while the gateway requires authentication, a connection not yet authenticated (by
  SASL or a client certificate) may send only ApiVersions, SaslHandshake and
  SaslAuthenticate; anything else closes it (Kafka's SASL authenticator does the same);
* a SASL session that lapsed, or whose user's credential changed, closes its connection
  at the next request other than a re-authentication (KIP-368), and a failed
  authentication closes it once answered (:mod:`.sasl`);
* with the gateway's TLS (:mod:`.tls`) the port serves TLS only (SSL, SASL_SSL), a
  verified client certificate naming the connection's principal;
* every request answered is counted and timed as the gRPC ones are
  (``strand_requests_total{service="kafka", request=<Kafka's API name>}``);
* the caller of every request (principal, peer host, the header's client id) is set
  for the servicer's ACL and quota checks (``services.gateway.access.CALLER``), and
  the request-time quota meters the whole request (:mod:`.request_quota`);
* a handler's None (Produce with acks=0) sends no response.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import functools
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kio.index import load_request_schema

from services.gateway.access import CALLER, Caller
from services.gateway.kafka.api_versions import unsupported_version
from services.gateway.kafka.apis import ApiTable, api_table
from services.gateway.kafka.call import Connection, KafkaCall, KafkaContext
from services.gateway.kafka.fetch import install_session_cache
from services.gateway.kafka.fetch_sessions import DEFAULT_SLOTS, FetchSessionCache
from services.gateway.kafka.framing import (
    API_VERSIONS_KEY,
    DEFAULT_MAX_REQUEST_BYTES,
    FrameTooLarge,
    MalformedRequest,
    RequestHeader,
    decode_body,
    encode_response,
    parse_header,
    read_frame,
)
from services.gateway.kafka.request_quota import served
from services.gateway.kafka.tls import KafkaTls, certificate_names
from strand.errors import AuthenticationError
from strand.security.principal import ANONYMOUS, Principal
from strand.security.tls import ServerTls
from strand.service.request_metrics import RequestMeters
from strand.service.telemetry import meter

if TYPE_CHECKING:
    from services.gateway.server import GatewayServicer

__all__ = ["KafkaListener", "KafkaListenerSettings", "parse_address"]

log = logging.getLogger(__name__)

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
# What a connection may send before it is authenticated (Kafka's SASL rule).
_BEFORE_AUTHENTICATION = frozenset({API_VERSIONS_KEY, SASL_HANDSHAKE_KEY,
                                    SASL_AUTHENTICATE_KEY})
# What a connection whose session lapsed may still send: a re-authentication (KIP-368).
_REAUTHENTICATION = frozenset({SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY})
_WILDCARDS = ("", "0.0.0.0", "::", "[::]")
# The request metrics' service of Kafka requests (gRPC's are the gRPC service's name).
METRICS_SERVICE = "kafka"


@functools.cache
def api_name(api_key: int, api_version: int) -> str:
    """Kafka's name of an API ("Produce"), as its request metrics name it."""
    return load_request_schema(api_key, api_version).__name__.removesuffix("Request")


def parse_address(text: str, what: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) as (host, port); ValueError saying ``what``."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{what}: expected HOST:PORT, not {text!r}")
    return host.strip("[]"), int(port)


@dataclass(frozen=True, slots=True)
class KafkaListenerSettings:
    listen: str  # HOST:PORT to bind
    advertise: str  # HOST:PORT Metadata tells clients (the gateways' one broker)
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    fetch_session_slots: int = DEFAULT_SLOTS
    # The gateway's TLS (its --tls-* flags): the port then serves TLS only.
    tls: ServerTls | None = None
    # --tls-service-names: a client certificate matching one is a service of the
    # cluster (a super user), as on the gRPC listener.
    service_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        parse_address(self.listen, "--kafka-listen")
        host, _ = parse_address(self.advertise, "--kafka-advertise")
        if host in _WILDCARDS:
            raise ValueError(f"--kafka-advertise: {self.advertise!r} is no address a client "
                             "can connect to: give the gateways' host name or Service name")
        if self.max_request_bytes < 1:
            raise ValueError("--kafka-max-request-bytes must be positive")


def _peer(address: object) -> tuple[str, str]:
    """(host, gRPC-style peer text) of a socket's peer address."""
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = str(address[0]), address[1]
        return host, (f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}")
    return str(address), f"unix:{address}"


class _Close(Exception):
    """End this connection (logged by whoever raised it)."""


class KafkaListener:
    def __init__(self, servicer: GatewayServicer, settings: KafkaListenerSettings,
                 table: ApiTable | None = None) -> None:
        self.servicer = servicer
        self.settings = settings
        self.table = table or api_table()
        self.advertised = parse_address(settings.advertise, "--kafka-advertise")
        self.port = 0  # the bound port, once started
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.tls = KafkaTls(settings.tls) if settings.tls is not None else None
        self.meters = RequestMeters(meter())
        install_session_cache(servicer, FetchSessionCache(settings.fetch_session_slots))

    async def start(self) -> None:
        host, port = parse_address(self.settings.listen, "--kafka-listen")
        self._server = await asyncio.start_server(
            self._serve, host or None, port,
            ssl=self.tls.context if self.tls is not None else None)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("kafka listener serving", extra={
            "listen": self.settings.listen, "advertise": self.settings.advertise,
            "tls": self.tls is not None,
            "apis": {key: list(versions) for key, versions in self.table.versions.items()}})

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        host, peer = _peer(writer.get_extra_info("peername"))
        connection = self._connection(host, writer)
        context = KafkaContext(peer)
        where = {"peer": peer}
        try:
            while True:
                frame = await read_frame(reader, self.settings.max_request_bytes)
                if frame is None:
                    return
                header = parse_header(frame)
                await self._answer(frame, header, connection, context, writer)
        except FrameTooLarge as exc:
            log.warning("kafka request over the size limit: closing the connection",
                        extra={**where, "size": exc.size, "limit": exc.limit})
        except MalformedRequest as exc:
            log.warning("malformed kafka request: closing the connection",
                        extra={**where, "error": str(exc)})
        except _Close:
            pass
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("kafka request failed: closing the connection", extra=where)
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _connection(self, host: str, writer: asyncio.StreamWriter) -> Connection:
        """A new connection's state: over TLS, its verified certificate's names; its
        principal before any SASL (the certificate's, anonymous, or None where
        authentication is required)."""
        tls = writer.get_extra_info("ssl_object")
        names = certificate_names(tls.getpeercert()) if tls is not None else ()
        principal: Principal | None
        try:
            principal = self.servicer.authenticator.principal(None, names[:1])
        except AuthenticationError:
            principal = None  # required: SASL first
        service = any(fnmatch.fnmatchcase(name, pattern) for name in names
                      for pattern in self.settings.service_names)
        return Connection(host, principal, tls=tls is not None, service=service)

    def _check_session(self, key: int, connection: Connection,
                       where: dict[str, object]) -> None:
        """Close a connection whose SASL session ended, unless it re-authenticates."""
        if connection.session_token is None or key in _REAUTHENTICATION:
            return
        try:
            self.servicer.authenticator.principal(connection.session_token, ())
        except AuthenticationError as exc:
            log.info("kafka client's SASL session ended and it did not re-authenticate: "
                     "closing the connection", extra={**where, "error": str(exc),
                                                      "principal": str(connection.principal)})
            raise _Close from None

    async def _answer(self, frame: bytes, header: RequestHeader, connection: Connection,
                      context: KafkaContext, writer: asyncio.StreamWriter) -> None:
        start = time.perf_counter()
        key, version = header.api_key, header.api_version
        where = {"peer": context.peer(), "api_key": key, "api_version": version,
                 "client_id": header.client_id}
        if not self.table.serves(key, version):
            if key == API_VERSIONS_KEY:
                writer.write(encode_response(header.correlation_id,
                                             unsupported_version(self.table.versions), False))
                await writer.drain()
                return
            log.warning("kafka request of an API or version not served: closing the "
                        "connection (the client should have asked ApiVersions)", extra=where)
            raise _Close
        if connection.principal is None and key not in _BEFORE_AUTHENTICATION:
            log.warning("kafka request before authentication on a gateway that requires "
                        "it: closing the connection", extra=where)
            raise _Close
        self._check_session(key, connection, where)
        request = decode_body(frame, header, load_request_schema(key, version))
        CALLER.set(Caller(connection.principal or ANONYMOUS, connection.peer_host,
                          service=connection.service and connection.session_token is None,
                          client_id=header.client_id or ""))
        call = KafkaCall(api_key=key, api_version=version,
                         correlation_id=header.correlation_id, client_id=header.client_id,
                         servicer=self.servicer, context=context,
                         advertised_host=self.advertised[0],
                         advertised_port=self.advertised[1], connection=connection)
        status = "CLOSED"
        try:
            response = await served(self.servicer.throttling, self.table.handlers[key],
                                    request, call)
            if response is not None:
                writer.write(encode_response(header.correlation_id, response,
                                             header.flexible and key != API_VERSIONS_KEY))
                await writer.drain()
            status = "OK"
        finally:
            self.meters.record(api_name(key, version), METRICS_SERVICE, status,
                               time.perf_counter() - start)
        if connection.closing is not None:
            log.info("kafka connection closed after its answer", extra={
                **where, "reason": connection.closing})
            raise _Close
