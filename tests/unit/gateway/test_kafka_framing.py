"""The Kafka listener's framing without a cluster: frames in, request headers read,
response headers out (v0 for ApiVersions and non-flexible versions, v1 otherwise),
and the API table that ApiVersions answers from."""

from __future__ import annotations

import asyncio
import datetime
import struct

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.metadata.v1.request import MetadataRequest as MetadataV1
from kio.schema.metadata.v1.request import MetadataRequestTopic as MetadataTopicV1
from kio.schema.metadata.v12.request import MetadataRequest as MetadataV12
from kio.schema.metadata.v12.response import MetadataResponse as MetadataResponseV12
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader
from kio.static.primitive import i32Timedelta

from services.gateway.kafka import apis, fetch, metadata, produce
from services.gateway.kafka.api_versions import unsupported_version
from services.gateway.kafka.framing import (
    FrameTooLarge,
    MalformedRequest,
    decode_body,
    encode_response,
    parse_header,
    read_frame,
)
from tests.support.kafka_wire import encode_request


def _reader(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


def _frames(data: bytes, limit: int = 1024) -> list[bytes | None]:
    async def read_all() -> list[bytes | None]:
        reader = _reader(data)
        frames = []
        while True:
            frame = await read_frame(reader, limit)
            frames.append(frame)
            if frame is None:
                return frames
    return asyncio.run(read_all())


def _encoded(request: object) -> bytes:
    return encode_request(request, 42, client_id="unit")


def test_frames_are_read_one_by_one_until_the_peer_closes() -> None:
    data = struct.pack(">i", 3) + b"abc" + struct.pack(">i", 0)
    assert _frames(data) == [b"abc", b"", None]


@pytest.mark.parametrize(("data", "error", "match"), [
    (struct.pack(">i", 2048) + b"x", FrameTooLarge, "over the limit of 1024"),
    (struct.pack(">i", -5), MalformedRequest, "negative size"),
    (struct.pack(">i", 10) + b"abc", MalformedRequest, "3 of 10 bytes"),
    (b"\x00\x00", MalformedRequest, "2 of 4 bytes"),
])
def test_bad_frames_are_typed_errors(data: bytes, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        _frames(data)


def test_headers_of_flexible_and_legacy_versions() -> None:
    flexible = _encoded(ApiVersionsRequest(client_software_name="unit",
                                           client_software_version="1"))
    header = parse_header(flexible)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id,
            header.known, header.flexible) == (18, 3, 42, "unit", True, True)
    body = decode_body(flexible, header, ApiVersionsRequest)
    assert body.client_software_name == "unit"
    legacy = _encoded(MetadataV1(topics=None))
    header = parse_header(legacy)
    assert (header.api_key, header.api_version, header.flexible) == (3, 1, False)
    assert decode_body(legacy, header, MetadataV1).topics is None


def test_unknown_versions_still_have_a_readable_header() -> None:
    frame = bytearray(_encoded(ApiVersionsRequest(client_software_name="unit",
                                                  client_software_version="1")))
    frame[2:4] = (77).to_bytes(2, "big")  # ApiVersions v77: header v2 (KIP-511)
    header = parse_header(bytes(frame))
    assert (header.known, header.flexible, header.client_id) == (False, True, "unit")


@pytest.mark.parametrize("frame", [b"\x00\x03", b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x09a"])
def test_truncated_headers_are_malformed(frame: bytes) -> None:
    with pytest.raises(MalformedRequest):
        parse_header(frame)


# librdkafka 2.16's Metadata v12 request for every topic (AdminClient.list_topics()), as
# seen on the wire: header, then its 4-byte array-count placeholder never shrunk to the
# varint (a null array, then 3 zero bytes), then allow_auto_topic_creation=true,
# include_topic_authorized_operations=false and empty tagged fields.
LIBRDKAFKA_ALL_TOPICS = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")


def test_bytes_after_a_body_are_ignored_as_kafka_does() -> None:
    header = parse_header(LIBRDKAFKA_ALL_TOPICS)
    assert (header.api_key, header.api_version, header.client_id) == (3, 12, "rdkafka")
    # Read as Kafka's broker reads it: every topic; the 3 bytes after the body ignored.
    assert decode_body(LIBRDKAFKA_ALL_TOPICS, header, MetadataV12) == MetadataV12(
        topics=None, allow_auto_topic_creation=False,
        include_topic_authorized_operations=False)
    frame = _encoded(MetadataV1(topics=None)) + b"\x00"
    assert decode_body(frame, parse_header(frame), MetadataV1).topics is None


def test_a_body_cut_short_is_malformed() -> None:
    frame = _encoded(MetadataV1(topics=(MetadataTopicV1(name=TopicName("t")),)))[:-1]
    with pytest.raises(MalformedRequest, match="unreadable MetadataRequest v1 body"):
        decode_body(frame, parse_header(frame), MetadataV1)


def test_response_headers() -> None:
    answer = MetadataResponseV12(throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
                                 brokers=(), cluster_id="c", controller_id=BrokerId(0),
                                 topics=())
    flexible = encode_response(7, answer, True)
    (size, correlation_id) = struct.unpack_from(">ii", flexible)
    assert size == len(flexible) - 4 and correlation_id == 7 and flexible[8] == 0
    decoded, used = entity_reader(MetadataResponseV12)(flexible, 9)
    assert decoded == answer and 9 + used == len(flexible)
    versions = unsupported_version({18: (0, 4), 3: (0, 12)})
    legacy = encode_response(8, versions, False)  # ApiVersions: always header v0
    assert struct.unpack_from(">ii", legacy) == (len(legacy) - 4, 8)
    assert versions.error_code == KafkaErrorCode.unsupported_version


def test_the_api_table_gathers_modules_and_refuses_clashes() -> None:
    table = apis.build_table([metadata, produce, fetch])
    assert table.versions[3] == (0, 12) and table.versions[18] == (0, 4)
    assert table.serves(1, 17) and not table.serves(1, 18) and not table.serves(2, 1)
    with pytest.raises(apis.ApiTableError, match="served by both"):
        apis.build_table([metadata, metadata])

    class Broken:
        __name__ = "broken"
        HANDLERS = {3: metadata.metadata}
        VERSIONS = {3: (0, 99)}

    with pytest.raises(apis.ApiTableError, match="not in kio's schemas"):
        apis.build_table([Broken])  # type: ignore[list-item]
