"""services.gateway.kafka.array_bounds: a request's arrays checked against the bytes
that carry them before kio reads the body (kio reserves room for the announced length
first: ~2^32 elements made the gateway process abort), and nulls refused where the
schema has none — without refusing any well-formed request."""

from __future__ import annotations

import struct

import pytest
from kio.index import load_request_schema

from fuzz.make_corpus import _kafka_frame
from services.gateway.kafka import array_bounds
from services.gateway.kafka.apis import api_table
from services.gateway.kafka.array_bounds import ArrayOutOfBounds, check_arrays
from services.gateway.kafka.framing import MalformedRequest, decode_body, parse_header

SERVED = sorted((key, version) for key, (low, high) in api_table().versions.items()
                for version in range(low, high + 1))
# A header v2 (DescribeGroups v5, client id "fuzz", no tagged fields), then a compact
# array announcing 2^32 - 2 group names in 5 bytes: 26 bytes on the wire, and kio
# asked for 34 GB.
DESCRIBE_GROUPS_V5_HUGE = bytes.fromhex("000f0005000000070004" "66757a7a" "00"
                                        "ffffffff0f" "0000")


@pytest.mark.parametrize(("key", "version"), SERVED,
                         ids=[f"{k}-v{v}" for k, v in SERVED])
def test_every_served_request_passes(key: int, version: int) -> None:
    """Each API and version served, as a client writes it (one element per array, every
    field set): the walk reaches its end without a complaint, and kio reads it."""
    frame = _kafka_frame(key, version)
    header = parse_header(frame)
    schema = load_request_schema(key, version)
    check_arrays(frame, header.body_offset, schema)
    decode_body(frame, header, schema)
    # and the walk read it to its last byte, where kio's reader ends: it knows every
    # field's encoding (a type it did not know would end it early, unchecked)
    walk = array_bounds._Walk(frame, header.body_offset, len(frame))
    walk.entity(array_bounds._plan(schema))
    assert walk.pos == len(frame)


def test_an_array_longer_than_the_body_is_refused_before_kio() -> None:
    header = parse_header(DESCRIBE_GROUPS_V5_HUGE)
    with pytest.raises(MalformedRequest, match=r"groups: an array of 4294967294 elements "
                                               r"announced with 2 bytes left"):
        decode_body(DESCRIBE_GROUPS_V5_HUGE, header, load_request_schema(15, 5))


def test_a_legacy_array_longer_than_the_body_is_refused() -> None:
    frame = _kafka_frame(15, 4)  # DescribeGroups v4: int32 array lengths
    header = parse_header(frame)
    body = bytearray(frame)
    struct.pack_into(">i", body, header.body_offset, 1_000_000)
    with pytest.raises(ArrayOutOfBounds, match="1000000 elements"):
        check_arrays(bytes(body), header.body_offset, load_request_schema(15, 4))


def test_elements_are_counted_at_their_smallest_size() -> None:
    """ListOffsets v1: each topic takes at least 6 bytes (a name's length, a partition
    count): 3 topics cannot fit in 16 bytes although 3 bytes could."""
    schema = load_request_schema(2, 1)
    frame = _kafka_frame(2, 1)
    header = parse_header(frame)
    # replica id (4 bytes), then the topics' count, then 16 bytes
    start = header.body_offset + 4
    body = frame[:start] + struct.pack(">i", 3) + bytes(16)
    with pytest.raises(ArrayOutOfBounds, match="3 elements announced with 16 bytes"):
        check_arrays(body, header.body_offset, schema)


def test_a_null_array_is_refused_where_the_schema_has_none() -> None:
    """FindCoordinator v4's coordinator keys as a null compact array: kio reads None,
    and the handler iterated it (TypeError, the connection dropped)."""
    frame = _kafka_frame(10, 4, coordinator_keys=())
    header = parse_header(frame)
    body = bytearray(frame)
    # key type (1 byte), then the compact array's length: 0 means null
    assert body[header.body_offset + 1] == 1  # the empty array as written
    body[header.body_offset + 1] = 0
    with pytest.raises(MalformedRequest, match=r"non-nullable field "
                                               r"FindCoordinatorRequest\.coordinator_keys"):
        decode_body(bytes(body), header, load_request_schema(10, 4))


def test_a_null_array_is_read_where_the_schema_allows_it() -> None:
    """Metadata v9+ with null topics means every topic; librdkafka sends it with its
    4-byte count placeholder left in place (a null compact array, then 3 zero bytes)."""
    frame = _kafka_frame(3, 9)
    header = parse_header(frame)
    body = frame[:header.body_offset] + b"\x00\x00\x00\x00" + b"\x00\x00\x00"
    request = decode_body(body, header, load_request_schema(3, 9))
    assert request.topics is None


def test_a_truncated_body_is_left_to_kio() -> None:
    """Bytes that end early are no bounds error: kio's reader says what is wrong."""
    frame = _kafka_frame(0, 9)  # Produce v9
    header = parse_header(frame)
    check_arrays(frame[:-10], header.body_offset, load_request_schema(0, 9))
    with pytest.raises(MalformedRequest, match="unreadable"):
        decode_body(frame[:-10], header, load_request_schema(0, 9))


def test_a_known_tagged_field_is_read_where_it_starts_as_kio_does() -> None:
    """Found by the fuzzer: a Fetch v17 whose partition carries its tagged directory id
    twice, each announcing 0 bytes but followed by 16 (kio, like Kafka's generated
    readers, reads a known tagged field where it starts, whatever its size says). The
    walk must stay where kio is, to meet the null forgotten-topics array after."""
    frame = bytes.fromhex(
        "0001001100000007000466770700000000000000000001000000000000000000ffffffff0200"
        "000000000000000000000000000001020000090000000000000000ff00ffffff000000000000"
        "00000000000000000001020000ffffffffffffffff00ff00ffffff0000000000000000ff0005"
        "00010007000466090000000700000000000000026100000000656f646500")
    header = parse_header(frame)
    with pytest.raises(MalformedRequest, match=r"FetchRequest\.forgotten_topics_data "
                                               r"was serialized as null"):
        decode_body(frame, header, load_request_schema(1, 17))
