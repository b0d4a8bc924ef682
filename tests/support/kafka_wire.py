"""A raw Kafka-protocol client for tests: kio requests over a plain socket, frame by
frame, to check what the gateway's Kafka listener answers byte for byte (fetch
sessions, unsupported versions, malformed frames)."""

from __future__ import annotations

import io
import socket
import ssl
import struct
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

__all__ = ["RawKafkaClient", "encode_request"]

_API_VERSIONS_KEY = 18


def encode_request(request: Any, correlation_id: int, client_id: str = "raw-test") -> bytes:
    """A request's bytes (header v2 for a flexible version, else v1; then the body),
    without the frame's size."""
    buffer = io.BytesIO()
    header_type = RequestHeaderV2 if request.__flexible__ else RequestHeaderV1
    entity_writer(header_type)(buffer, header_type(
        request_api_key=i16(request.__api_key__), request_api_version=i16(
            request.__version__), correlation_id=i32(correlation_id), client_id=client_id))
    entity_writer(type(request))(buffer, request)
    return buffer.getvalue()


class RawKafkaClient:
    def __init__(self, address: str, timeout_s: float = 30.0,
                 client_id: str = "raw-test", tls: ssl.SSLContext | None = None) -> None:
        """``tls``: speak TLS with this client context (the Kafka port of a TLS
        gateway), the server's name checked against ``address``'s host."""
        host, _, port = address.rpartition(":")
        self.client_id = client_id
        sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        try:
            self.sock = tls.wrap_socket(sock, server_hostname=host) if tls else sock
        except BaseException:
            sock.close()
            raise
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawKafkaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def encode(self, request: Any, client_id: str | None = None) -> bytes:
        """``request`` with the next correlation id (and this client's id)."""
        self.correlation_id += 1
        return encode_request(request, self.correlation_id, client_id or self.client_id)

    def receive_frame(self) -> bytes:
        """The next frame; ConnectionError if the listener closed the connection."""
        (size,) = struct.unpack(">i", self._exactly(4))
        return self._exactly(size)

    def call(self, request: Any, response_type: type[Any]) -> Any:
        """Send ``request``, read its ``response_type`` answer (of the same version)."""
        self.send_frame(self.encode(request))
        frame = self.receive_frame()
        (correlation_id,) = struct.unpack_from(">i", frame)
        assert correlation_id == self.correlation_id
        # Response header v1 (flexible, ApiVersions excepted) adds empty tagged fields.
        offset = 5 if response_type.__flexible__ and \
            response_type.__api_key__ != _API_VERSIONS_KEY else 4
        response, size = entity_reader(response_type)(frame, offset)
        assert offset + size == len(frame)
        return response

    def _exactly(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError(f"closed after {len(data)} of {size} bytes")
            data += chunk
        return bytes(data)
