"""Every kind of damage to a record batch is reported as a typed, explicit error.

Batches with a precise defect are laid out by hand here (struct + crc32c, not Strand's
builder), so a defect in the builder cannot hide the same defect in the validator.
"""

from __future__ import annotations

import random
import struct

import cramjam
import crc32c
import pytest

from strand.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    InvalidTimestampError,
    UnsupportedCompressionError,
)
from strand.records import (
    BatchBuilder,
    Compression,
    RecordBatch,
    iter_batches,
    iter_record_batches,
    read_header,
    validate_batch,
)
from strand.records.compression import compress, decompress
from strand.records.varint import decode_varint

# Kafka's DefaultRecordBatch header, spelled out independently of strand.records.batch.
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = 61
LOG_OVERHEAD = 12
LENGTH_POS = 8
LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21
LAST_OFFSET_DELTA_POS = 23
RECORD_COUNT_POS = 57

CODECS = list(Compression)
CODEC_IDS = [c.name.lower() for c in CODECS]
COMPRESSED = [c for c in CODECS if c != Compression.NONE]
COMPRESSED_IDS = [c.name.lower() for c in COMPRESSED]


def varint(value: int) -> bytes:
    z = (value << 1) ^ (value >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def nullable(data: bytes | None) -> bytes:
    return varint(-1) if data is None else varint(len(data)) + data


def raw_record(
    *,
    offset_delta: int = 0,
    timestamp_delta: int = 0,
    key: bytes | None = b"k",
    value: bytes | None = b"value",
    headers: bytes | None = None,
    length_adjust: int = 0,
) -> bytes:
    """One record; ``headers`` is the raw header section (default: a count of zero)."""
    body = (
        b"\x00"
        + varint(timestamp_delta)
        + varint(offset_delta)
        + nullable(key)
        + nullable(value)
        + (varint(0) if headers is None else headers)
    )
    return varint(len(body) + length_adjust) + body


def fix_crc(buf: bytearray) -> bytearray:
    struct.pack_into(">I", buf, CRC_POS, crc32c.crc32c(bytes(buf[ATTRIBUTES_POS:])))
    return buf


def raw_batch(
    payload: bytes,
    record_count: int,
    *,
    attributes: int = 0,
    last_offset_delta: int | None = None,
    magic: int = 2,
) -> bytearray:
    """A batch around ``payload`` (already compressed if ``attributes`` says so), CRC fixed."""
    header = HEADER.pack(
        0,
        HEADER_SIZE + len(payload) - LOG_OVERHEAD,
        -1,
        magic,
        0,
        attributes,
        record_count - 1 if last_offset_delta is None else last_offset_delta,
        1_000,
        1_000,
        -1,
        -1,
        -1,
        record_count,
    )
    return fix_crc(bytearray(header + payload))


def good_batch(codec: Compression = Compression.NONE) -> bytes:
    builder = BatchBuilder(compression=codec, producer_id=5, producer_epoch=1, base_sequence=0)
    builder.append(b"value-0", key=b"key-0", headers=[("h", b"1"), ("n", None)], timestamp=1_000)
    builder.append(None, key=None, timestamp=999)
    builder.append(b"x" * 300, key=b"", headers=[("ключ", b"")], timestamp=5_000_000)
    return builder.build()


def with_int(data: bytes, fmt: str, pos: int, value: int, *, recompute_crc: bool) -> bytearray:
    buf = bytearray(data)
    struct.pack_into(fmt, buf, pos, value)
    return fix_crc(buf) if recompute_crc else buf


# --------------------------------------------------------------------------- fixtures sanity


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_hand_laid_and_built_batches_are_valid(codec: Compression) -> None:
    """The helpers below produce valid batches; each test then breaks exactly one thing."""
    data = good_batch(codec)
    assert validate_batch(data).record_count == 3
    assert len(RecordBatch(data).records()) == 3
    payload = raw_record() + raw_record(offset_delta=1, key=None, value=None)
    payload = compress(codec, payload) if codec != Compression.NONE else payload
    hand = raw_batch(payload, 2, attributes=int(codec))
    assert [(r.offset, r.key, r.value) for r in RecordBatch(hand).records()] == [
        (0, b"k", b"value"),
        (1, None, None),
    ]


# --------------------------------------------------------------------------- CRC


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_any_flipped_byte_in_crc_covered_region_is_corrupt(codec: Compression) -> None:
    data = good_batch(codec)
    assert len(data) > HEADER_SIZE
    for pos in range(CRC_POS, len(data)):  # the CRC itself, then everything it covers
        for mask in (0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xFF):
            buf = bytearray(data)
            buf[pos] ^= mask
            with pytest.raises(CorruptRecordError) as excinfo:
                validate_batch(buf)
            assert excinfo.value.code == ErrorCode.CORRUPT_MESSAGE
            with pytest.raises(CorruptRecordError):
                RecordBatch(buf)


def test_crc_mismatch_message_names_both_checksums() -> None:
    buf = bytearray(good_batch())
    buf[-1] ^= 0x01
    stored = struct.unpack_from(">I", buf, CRC_POS)[0]
    with pytest.raises(CorruptRecordError, match="CRC mismatch") as excinfo:
        validate_batch(buf)
    assert f"{stored:#010x}" in str(excinfo.value)


def test_only_base_offset_and_leader_epoch_escape_validation() -> None:
    """Those two fields are stamped by the broker outside the CRC; every other header byte
    (length, magic) is checked by other means."""
    data = good_batch()
    for pos in range(CRC_POS):
        buf = bytearray(data)
        buf[pos] ^= 0xFF
        if pos < LENGTH_POS or LEADER_EPOCH_POS <= pos < MAGIC_POS:
            validate_batch(buf)
        else:
            with pytest.raises(CorruptRecordError):
                validate_batch(buf)


# --------------------------------------------------------------------------- framing


@pytest.mark.parametrize("magic", [0, 1, 3, -1, 127])
def test_wrong_magic(magic: int) -> None:
    buf = with_int(good_batch(), ">b", MAGIC_POS, magic, recompute_crc=False)
    with pytest.raises(CorruptRecordError, match=f"magic {magic}"):
        validate_batch(buf)


@pytest.mark.parametrize("batch_length", [-(2**31), -12, -1, 0, 1, HEADER_SIZE - LOG_OVERHEAD - 1])
def test_length_field_too_small(batch_length: int) -> None:
    buf = with_int(good_batch(), ">i", LENGTH_POS, batch_length, recompute_crc=False)
    with pytest.raises(CorruptRecordError, match="too small"):
        validate_batch(buf)
    with pytest.raises(CorruptRecordError):
        RecordBatch(buf)


@pytest.mark.parametrize("excess", [1, 1000, None])
def test_length_field_larger_than_buffer(excess: int | None) -> None:
    data = good_batch()
    declared = 2**31 - 1 if excess is None else len(data) - LOG_OVERHEAD + excess
    buf = with_int(data, ">i", LENGTH_POS, declared, recompute_crc=False)
    with pytest.raises(CorruptRecordError, match="declares"):
        validate_batch(buf)
    with pytest.raises(CorruptRecordError):
        RecordBatch(buf)


def test_end_bound_is_respected() -> None:
    data = good_batch()
    log = data + data
    assert validate_batch(log, 0, len(data)).size_in_bytes == len(data)
    assert validate_batch(log, len(data)).size_in_bytes == len(data)
    with pytest.raises(CorruptRecordError, match="declares"):
        validate_batch(log, 0, len(data) - 1)
    with pytest.raises(CorruptRecordError, match="cut off"):
        validate_batch(log, len(data), len(data) + HEADER_SIZE - 1)


@pytest.mark.parametrize("size", list(range(HEADER_SIZE)))
def test_truncated_header(size: int) -> None:
    data = good_batch()[:size]
    with pytest.raises(CorruptRecordError, match="cut off"):
        validate_batch(data)
    with pytest.raises(CorruptRecordError):
        read_header(data)
    with pytest.raises(CorruptRecordError):
        RecordBatch(data)
    with pytest.raises(CorruptRecordError):
        RecordBatch(data, validate=False)


def test_truncated_records() -> None:
    data = good_batch()
    for size in range(HEADER_SIZE, len(data)):
        with pytest.raises(CorruptRecordError, match="declares"):
            validate_batch(data[:size])
        with pytest.raises(CorruptRecordError):
            list(iter_batches(data[:size]))
        assert list(iter_record_batches(data[:size])) == []  # a fetch's cut-off tail


def test_damaged_complete_batch_in_a_log_is_reported() -> None:
    """iter_record_batches forgives a cut-off tail, never damage inside a complete batch."""
    second = bytearray(good_batch())
    second[-1] ^= 0x40
    log = good_batch() + bytes(second)
    batches = iter_record_batches(log)
    assert len(next(batches).records()) == 3
    with pytest.raises(CorruptRecordError, match="CRC"):
        next(batches)
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(iter_batches(log))


@pytest.mark.parametrize("codec_bits", [5, 6, 7])
def test_unknown_compression_codec(codec_bits: int) -> None:
    data = good_batch()
    attributes = struct.unpack_from(">h", data, ATTRIBUTES_POS)[0]
    buf = with_int(data, ">h", ATTRIBUTES_POS, attributes | codec_bits, recompute_crc=True)
    with pytest.raises(CorruptRecordError, match=f"unknown compression codec {codec_bits}"):
        validate_batch(buf)
    with pytest.raises(CorruptRecordError):
        RecordBatch(buf)


@pytest.mark.parametrize("count", [-1, -(2**31)])
def test_negative_record_count(count: int) -> None:
    buf = with_int(good_batch(), ">i", RECORD_COUNT_POS, count, recompute_crc=True)
    with pytest.raises(CorruptRecordError, match="negative record count"):
        validate_batch(buf)


def test_negative_last_offset_delta() -> None:
    buf = with_int(good_batch(), ">i", LAST_OFFSET_DELTA_POS, -1, recompute_crc=True)
    with pytest.raises(CorruptRecordError, match="negative"):
        validate_batch(buf)


# --------------------------------------------------------------------------- compressed payloads


def _garbage_payloads(codec: Compression) -> dict[str, bytes]:
    real = good_batch(codec)[HEADER_SIZE:]
    return {
        "empty": b"",
        "one-byte": b"\x01",
        "zeros": b"\x00" * 64,
        "random": random.Random(7).randbytes(256),
        "ones": b"\xff" * 64,
        "first-half": real[: len(real) // 2],
        "missing-last-byte": real[:-1],
        "trailing-garbage": real + b"\x00garbage",
    }


@pytest.mark.parametrize("codec", COMPRESSED, ids=COMPRESSED_IDS)
def test_garbage_compressed_payload(codec: Compression) -> None:
    for name, payload in _garbage_payloads(codec).items():
        buf = raw_batch(payload, 3, attributes=int(codec))
        validate_batch(buf)  # the CRC is right: only the payload is wrong
        batch = RecordBatch(buf)
        with pytest.raises(CorruptRecordError) as excinfo:
            batch.records()
        assert not isinstance(excinfo.value, cramjam.DecompressionError), name
        assert excinfo.value.code == ErrorCode.CORRUPT_MESSAGE, name


@pytest.mark.parametrize("codec", COMPRESSED, ids=COMPRESSED_IDS)
def test_garbage_passed_to_decompress(codec: Compression) -> None:
    with pytest.raises(CorruptRecordError, match=codec.name.lower()):
        decompress(codec, b"\xff" * 64)


def test_snappy_xerial_framing_damage() -> None:
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for payload in (
        xerial + b"\x00\x00",  # cut-off block length
        xerial + struct.pack(">i", -5),  # negative block length
        xerial + struct.pack(">i", 100) + b"\x00" * 10,  # block longer than the data
    ):
        with pytest.raises(CorruptRecordError, match="xerial"):
            decompress(Compression.SNAPPY, payload)


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_payload_that_inflates_to_malformed_records(codec: Compression) -> None:
    """A well-compressed payload whose records are garbage: the decoder, not the codec,
    must report it."""
    records = b"\x7f\x00" + b"\xff" * 16  # length -64, then an endless varint
    payload = compress(codec, records) if codec != Compression.NONE else records
    buf = raw_batch(payload, 2, attributes=int(codec))
    with pytest.raises(CorruptRecordError):
        RecordBatch(buf).records()


# --------------------------------------------------------------------------- records


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@pytest.mark.parametrize("adjust", [-3, -1, 1, 2, 100])
def test_record_length_prefix_disagrees_with_fields(codec: Compression, adjust: int) -> None:
    payload = raw_record() + raw_record(offset_delta=1, length_adjust=adjust)
    payload = compress(codec, payload) if codec != Compression.NONE else payload
    buf = raw_batch(payload, 2, attributes=int(codec))
    validate_batch(buf)
    with pytest.raises(CorruptRecordError, match="length"):
        RecordBatch(buf).records()


def test_record_count_larger_than_records() -> None:
    buf = raw_batch(raw_record() + raw_record(offset_delta=1), 3)
    with pytest.raises(CorruptRecordError, match="malformed"):
        RecordBatch(buf).records()


def test_record_count_smaller_than_records() -> None:
    buf = raw_batch(raw_record() + raw_record(offset_delta=1), 1)
    with pytest.raises(CorruptRecordError, match="follow"):
        RecordBatch(buf).records()


def test_null_header_key() -> None:
    headers = varint(1) + varint(-1) + nullable(b"v")
    buf = raw_batch(raw_record(headers=headers), 1)
    with pytest.raises(CorruptRecordError, match="header key is null"):
        RecordBatch(buf).records()


def test_header_key_not_utf8() -> None:
    headers = varint(1) + nullable(b"\xff\xfe") + nullable(b"v")
    buf = raw_batch(raw_record(headers=headers), 1)
    with pytest.raises(CorruptRecordError, match="malformed"):
        RecordBatch(buf).records()


def test_header_value_longer_than_record() -> None:
    headers = varint(1) + nullable(b"k") + varint(1_000) + b"short"
    buf = raw_batch(raw_record(headers=headers), 1)
    with pytest.raises(CorruptRecordError):
        RecordBatch(buf).records()


def test_overlong_varint_in_record() -> None:
    body = b"\x00" + b"\xff" * 10 + b"\x01"  # an 11-byte timestamp delta
    buf = raw_batch(varint(len(body)) + body, 1)
    with pytest.raises(CorruptRecordError, match="malformed"):
        RecordBatch(buf).records()


def test_decode_varint_rejects_overlong_and_cut_off_input() -> None:
    with pytest.raises(ValueError, match="longer than 10 bytes"):
        decode_varint(b"\x80" * 10 + b"\x00", 0)
    with pytest.raises(IndexError):
        decode_varint(b"\x80\x80", 0)
    with pytest.raises(IndexError):
        decode_varint(b"", 0)


# --------------------------------------------------------------------------- codec names


@pytest.mark.parametrize("name", ["brotli", "", "lz5", "snappy2", "gz"])
def test_compression_parse_rejects_unknown_names(name: str) -> None:
    with pytest.raises(UnsupportedCompressionError) as excinfo:
        Compression.parse(name)
    message = str(excinfo.value)
    assert repr(name) in message
    for valid in ("none", "gzip", "snappy", "lz4", "zstd"):
        assert valid in message
    assert excinfo.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("none", Compression.NONE),
        ("GZIP", Compression.GZIP),
        (" Snappy ", Compression.SNAPPY),
        ("lz4", Compression.LZ4),
        ("zstd", Compression.ZSTD),
        (4, Compression.ZSTD),
        (Compression.LZ4, Compression.LZ4),
    ],
)
def test_compression_parse_accepts_valid_names(
    name: str | int | Compression, expected: Compression
) -> None:
    assert Compression.parse(name) is expected


# Regressions: each of these was accepted or mis-typed by an earlier codec.


def test_negative_header_count_is_corrupt() -> None:
    buf = raw_batch(raw_record(headers=varint(-1)), 1)
    with pytest.raises(CorruptRecordError, match="number of record headers"):
        RecordBatch(buf).records()


def test_varint_bits_beyond_64_are_dropped_as_kafka_does() -> None:
    """Kafka's readVarlong drops them; so do aiokafka's reader (the leader's validation)
    and Strand's decoder, so that what the leader accepts every consumer decodes alike."""
    assert decode_varint(b"\xff" * 9 + b"\x7f", 0) == (-(2**63), 10)
    assert decode_varint(b"\xff" * 9 + b"\x01", 0) == (-(2**63), 10)
    with pytest.raises(ValueError, match="longer than 10 bytes"):
        decode_varint(b"\xff" * 10 + b"\x01", 0)


@pytest.mark.parametrize("timestamps", [[-2], [-1, 2**63 - 1], [2**63]])
def test_timestamps_outside_kafkas_range_are_refused(timestamps: list[int]) -> None:
    builder = BatchBuilder()
    with pytest.raises(InvalidTimestampError):
        for timestamp in timestamps:
            builder.append(b"v", timestamp=timestamp)


def test_offset_delta_beyond_int32_is_refused_at_append() -> None:
    with pytest.raises(InvalidRecordError, match="32 bits"):
        BatchBuilder().append(b"v", offset=2**31)


def test_unknown_codec_number_and_unvalidated_codec_bits_are_typed() -> None:
    with pytest.raises(UnsupportedCompressionError):
        Compression.parse(9)
    data = bytearray(_one_record_batch())
    struct.pack_into(">h", data, ATTRIBUTES_POS, 6)
    with pytest.raises(CorruptRecordError, match="compression codec 6"):
        RecordBatch(bytes(data), validate=False).records()


def _one_record_batch() -> bytes:
    builder = BatchBuilder()
    builder.append(b"v")
    return builder.build()
