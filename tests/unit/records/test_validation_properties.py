"""Acceptance 3 of issue 11: random valid batches, mutated in their records and given a
correct CRC, are either refused by the leader's validation or decode, with Strand's own
decoder, to exactly what their header claims.

Fast by default (derandomized, bounded examples); ``STRAND_HYPOTHESIS=long`` runs many
more examples with fresh randomness.
"""

from __future__ import annotations

import os
import struct

import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strand.errors import StrandError
from strand.records import BatchBuilder, Compression, RecordBatch
from strand.records.batch import HEADER_SIZE, LOG_OVERHEAD, validate_batch
from strand.records.compression import compress, decompress
from strand.records.validation import validate_producer_batch
from strand.records.varint import decode_varint, encode_varint

LONG = os.environ.get("STRAND_HYPOTHESIS") == "long"
settings.register_profile(
    "records-fast", max_examples=300, derandomize=True, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "records-long", max_examples=20_000, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
PROFILE = settings.get_profile("records-long" if LONG else "records-fast")

CODECS = st.sampled_from([Compression.NONE, Compression.NONE, Compression.LZ4,
                          Compression.ZSTD, Compression.GZIP, Compression.SNAPPY])
BLOBS = st.one_of(st.none(), st.binary(max_size=40))
HEADERS = st.lists(st.tuples(st.text(max_size=6), BLOBS), max_size=3)
RECORDS = st.lists(st.tuples(BLOBS, BLOBS, HEADERS, st.integers(-1, 1 << 42)),
                   min_size=1, max_size=80)


@st.composite
def batches(draw: st.DrawFn) -> tuple[bytes, Compression]:
    codec = draw(CODECS)
    builder = BatchBuilder(compression=codec)
    for key, value, headers, timestamp in draw(RECORDS):
        builder.append(value, key=key, headers=headers, timestamp=timestamp)
    return builder.build(), codec


@st.composite
def mutations(draw: st.DrawFn, body: bytes) -> bytes:
    """One to three edits of the uncompressed records."""
    out = bytearray(body)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "varint"]))
        at = draw(st.integers(0, max(len(out) - 1, 0)))
        if kind == "flip" and out:
            out[at] ^= draw(st.integers(1, 255))
        elif kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "delete" and out:
            del out[at:at + draw(st.integers(1, 4))]
        elif kind == "truncate":
            del out[at:]
        elif kind == "varint" and out:
            # Re-encode the varint found at ``at`` with another value, or overlong.
            try:
                _, end = decode_varint(out, at)
            except (IndexError, ValueError):
                continue
            new = draw(st.one_of(
                st.integers(-(1 << 63), (1 << 63) - 1).map(encode_varint),
                st.integers(-3, 300).map(encode_varint),
                st.just(bytes(out[at:end - 1]) + bytes([out[end - 1] | 0x80, 0x00]))))
            out[at:end] = new
    return bytes(out)


def rebuild(original: bytes, codec: Compression, body: bytes) -> bytes:
    """``original``'s header around a new (re-compressed) body, length and CRC fixed."""
    payload = body if codec == Compression.NONE else compress(codec, body)
    buf = bytearray(original[:HEADER_SIZE] + payload)
    struct.pack_into(">i", buf, 8, len(buf) - LOG_OVERHEAD)
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


@PROFILE
@given(data=st.data(), built=batches())
def test_every_mutant_is_refused_or_decodes_to_its_claim(
        data: st.DataObject, built: tuple[bytes, Compression]) -> None:
    original, codec = built
    body = decompress(codec, memoryview(original)[HEADER_SIZE:])
    mutant = rebuild(original, codec, data.draw(mutations(body)))
    header = validate_batch(mutant)  # the CRC and framing are right by construction
    try:
        validate_producer_batch(mutant, 0, header)
    except StrandError:
        return  # refused: nothing is written
    records = RecordBatch(mutant).records()  # must not raise: consumers decode it
    assert len(records) == header.record_count
    assert [r.offset for r in records] == list(
        range(header.base_offset, header.base_offset + header.last_offset_delta + 1))
    assert max(r.timestamp for r in records) == header.max_timestamp


@PROFILE
@given(built=batches())
def test_every_valid_batch_passes(built: tuple[bytes, Compression]) -> None:
    data, _ = built
    validate_producer_batch(data, 0, validate_batch(data))
