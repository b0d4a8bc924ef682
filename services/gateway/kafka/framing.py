"""Kafka's framing: size-prefixed frames, request headers in, response headers out.

A frame is a big-endian int32 size then that many bytes. A request starts with its
header (v1: api key, api version, correlation id, client id; v2, for the flexible
versions of an API, adds tagged fields), then the body of that API's version. A
response starts with the correlation id (header v0), plus tagged fields (v1) for a
flexible version — except ApiVersions, whose response header is always v0 so that a
client can read it before it knows what the broker speaks (KIP-511).
"""

from __future__ import annotations

import asyncio
import io
import logging
import struct
from dataclasses import dataclass
from typing import Any

from kio.index import KioIndexError, load_request_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from services.gateway.kafka.array_bounds import ArrayOutOfBounds, check_arrays

__all__ = ["API_VERSIONS_KEY", "DEFAULT_MAX_REQUEST_BYTES", "FrameTooLarge",
           "MalformedRequest", "RequestHeader", "decode_body", "encode_response",
           "parse_header", "read_frame"]

API_VERSIONS_KEY = 18
# ApiVersions' first flexible version: a client sends header v2 from it on, even for a
# version the broker does not know yet (KIP-511).
_API_VERSIONS_FIRST_FLEXIBLE = 3
# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024
_SIZE = struct.Struct(">i")
log = logging.getLogger(__name__)
_read_header_v1 = entity_reader(RequestHeaderV1)
_read_header_v2 = entity_reader(RequestHeaderV2)
_write_header_v0 = entity_writer(ResponseHeaderV0)
_write_header_v1 = entity_writer(ResponseHeaderV1)


class FrameTooLarge(Exception):
    """A frame announcing more bytes than the listener accepts."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a request of {size} bytes is over the limit of {limit} bytes "
                         "(the gateway's --kafka-max-request-bytes)")
        self.size = size
        self.limit = limit


class MalformedRequest(Exception):
    """Bytes that do not form the request their header announces."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the body starts in the frame
    # kio knows this API and version (else the body cannot be read).
    known: bool
    flexible: bool


async def read_frame(reader: asyncio.StreamReader, max_bytes: int) -> bytes | None:
    """The next frame's bytes; None when the peer closed between frames."""
    try:
        prefix = await reader.readexactly(_SIZE.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise MalformedRequest(f"the connection closed inside a frame's size "
                               f"({len(exc.partial)} of 4 bytes)") from None
    (size,) = _SIZE.unpack(prefix)
    if size < 0:
        raise MalformedRequest(f"a frame of negative size {size}")
    if size > max_bytes:
        raise FrameTooLarge(size, max_bytes)
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as exc:
        raise MalformedRequest(f"the connection closed inside a frame: {len(exc.partial)} "
                               f"of {size} bytes") from None


def _flexible(api_key: int, api_version: int) -> tuple[bool, bool]:
    """(kio knows the version, its header is flexible)."""
    try:
        return True, bool(load_request_schema(api_key, api_version).__flexible__)
    except KioIndexError:
        return False, (api_key == API_VERSIONS_KEY
                       and api_version >= _API_VERSIONS_FIRST_FLEXIBLE)


def parse_header(frame: bytes) -> RequestHeader:
    """The request header at the start of ``frame``."""
    if len(frame) < 8:
        raise MalformedRequest(f"a frame of {len(frame)} bytes is too short for a "
                               "request header (8 bytes at least)")
    api_key, api_version = struct.unpack_from(">hh", frame)
    known, flexible = _flexible(api_key, api_version)
    try:
        header, size = (_read_header_v2 if flexible else _read_header_v1)(frame, 0)
    except Exception as exc:  # kio raises several kinds on truncated or bad bytes
        raise MalformedRequest(f"an unreadable request header (api key {api_key}, "
                               f"version {api_version}): {exc}") from exc
    return RequestHeader(api_key, api_version, int(header.correlation_id), header.client_id,
                         size, known, flexible)


def decode_body(frame: bytes, header: RequestHeader, request_type: type[Any]) -> Any:
    """The request body (a ``request_type`` of kio) after the header."""
    try:
        # Before kio: its reader would reserve room for an absurd array length (and
        # abort the process when that fails) or read a null array as None.
        check_arrays(frame, header.body_offset, request_type)
    except ArrayOutOfBounds as exc:
        raise MalformedRequest(
            f"a {request_type.__name__} v{header.api_version} body: {exc}") from None
    try:
        body, size = entity_reader(request_type)(frame, header.body_offset)
    except Exception as exc:
        raise MalformedRequest(
            f"an unreadable {request_type.__name__} v{header.api_version} body: {exc}"
        ) from exc
    left_over = len(frame) - header.body_offset - size
    if left_over:
        # Kafka's broker reads the body and ignores the rest of the frame, and clients
        # rely on it: librdkafka (2.16 at least) asks Metadata v9+ for every topic with
        # its 4-byte array-count placeholder left in place, a null compact array
        # followed by 3 zero bytes (read as the next fields) and the real fields after.
        log.debug("bytes after a kafka request body ignored, as Kafka does", extra={
            "request": request_type.__name__, "api_version": header.api_version,
            "left_over": left_over})
    return body


def encode_response(correlation_id: int, response: Any, flexible_header: bool) -> bytes:
    """One response frame: size, response header (v1 if ``flexible_header``), body."""
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    if flexible_header:
        _write_header_v1(buffer, ResponseHeaderV1(correlation_id=i32(correlation_id)))
    else:
        _write_header_v0(buffer, ResponseHeaderV0(correlation_id=i32(correlation_id)))
    entity_writer(type(response))(buffer, response)
    frame = buffer.getbuffer()
    _SIZE.pack_into(frame, 0, len(frame) - _SIZE.size)
    del frame
    return buffer.getvalue()
