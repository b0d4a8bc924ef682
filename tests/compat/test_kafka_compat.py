"""Byte-level compatibility of Strand's RecordBatch v2 codec with two independent codecs.

aiokafka (its C extension *and* its pure-Python classes) and kafka-python implement
Kafka's DefaultRecordBatch on their own. Batches must go both ways: what Strand
builds, they parse with a valid CRC and identical fields; what they build, Strand
parses. kafka-python needs python-snappy / lz4 / zstandard for those codecs; when
they are absent its record decoding is skipped (explicitly) for that codec, while
its header and CRC checks, which need no codec, still run.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import kafka
import kafka.codec
import kafka.errors
import pytest
from aiokafka import codec as aiokafka_codec
from aiokafka.record import default_records as aiokafka_records
from aiokafka.record.control_record import ABORT_MARKER, COMMIT_MARKER
from aiokafka.record.control_record import ControlRecord as AiokafkaControlRecord
from kafka.record.default_records import ControlRecord as KafkaControlRecord
from kafka.record.default_records import DefaultRecordBatch as KafkaRecordBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaRecordBatchBuilder

from strand.records import (
    HEADER_SIZE,
    BatchBuilder,
    Compression,
    ControlType,
    EndTransactionMarker,
    RecordBatch,
    TimestampType,
    build_end_txn_marker,
    iter_batches,
    iter_record_batches,
    parse_end_txn_marker,
    validate_batch,
)
from strand.records.batch import set_log_append_time, stamp

CODECS = list(Compression)
CODEC_IDS = [c.name.lower() for c in CODECS]

HeaderList = list[tuple[str, bytes | None]]
RecordTuple = tuple[int, int, bytes | None, bytes | None, HeaderList]

T0 = 1_700_000_000_000  # a realistic epoch-millis base timestamp
PRODUCER_ID = 7_340_032_123
PRODUCER_EPOCH = 4_242
BASE_SEQUENCE = 1_000_000
BASE_OFFSET = 123_456_789_012
LEADER_EPOCH = 77
BATCH_SIZE = 16 * 1024 * 1024  # library builders refuse records beyond their batch size


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class InRecord:
    offset_delta: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


_VOCABULARY = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike "
    "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu "
    "commit log partition replica leader follower offset segment index batch record"
)
_WORDS = [f"{w} ".encode() for w in _VOCABULARY.split(" ")]


def _text(rng: random.Random, size: int) -> bytes:
    """Compressible (by every codec, snappy included) but not trivially repetitive bytes."""
    out = b"".join(rng.choices(_WORDS, k=size // 4 + 1))
    return out[:size]


def rich_records() -> list[InRecord]:
    """Every shape of field the format allows, with offset gaps and multi-byte varints."""
    rng = random.Random(20240601)
    many_headers = tuple(
        (
            f"header-{i}",
            None if i % 7 == 0 else b"" if i % 5 == 0 else _text(rng, i % 40),
        )
        for i in range(100)  # 100 headers: the header count itself is a 2-byte varint
    )
    return [
        InRecord(0, T0, None, b"first value"),
        InRecord(1, T0 + 1, b"", b"", (("empty", b""), ("null", None))),
        InRecord(2, T0 - 5_000, b"key-2", None),  # negative timestamp delta
        InRecord(3, T0 + 3, None, None),
        InRecord(
            5,  # offset gap
            T0 + 10**9,  # multi-byte timestamp delta
            b"\x00\xff" * 3,
            _text(rng, 200),
            (("ключ", b"v"), ("日本語", None), ("🔑", b"\x00"), ("", b"empty key"), ("a", b"")),
        ),
        InRecord(6, T0 + 2**40, _text(rng, 300), _text(rng, 40_000), many_headers),
        InRecord(100, T0 - 2**33, b"big", _text(rng, 50_000), (("size", b"50000"),)),
        InRecord(70_000, T0 + 17, b"last", _text(rng, 20_000), (("z", None),)),
    ]


def expected_tuples(records: Sequence[InRecord], base_offset: int) -> list[RecordTuple]:
    return [
        (base_offset + r.offset_delta, r.timestamp, r.key, r.value, list(r.headers))
        for r in records
    ]


# --------------------------------------------------------------------------- builders


def strand_build(
    records: Sequence[InRecord],
    codec: Compression,
    *,
    producer_id: int = PRODUCER_ID,
    producer_epoch: int = PRODUCER_EPOCH,
    base_sequence: int = BASE_SEQUENCE,
    transactional: bool = True,
) -> bytearray:
    builder = BatchBuilder(
        compression=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
    )
    for r in records:
        builder.append(
            r.value,
            key=r.key,
            headers=list(r.headers),
            timestamp=r.timestamp,
            offset=r.offset_delta,
        )
    return bytearray(builder.build())


@dataclass(frozen=True)
class LibBuilder:
    name: str
    cls: Any
    missing_codec: Callable[[Compression], str | None]


@dataclass(frozen=True)
class LibReader:
    name: str
    cls: Any
    missing_codec: Callable[[Compression], str | None]
    has_leader_epoch: bool


def _aiokafka_missing(codec: Compression) -> str | None:
    checks = {
        Compression.GZIP: aiokafka_codec.has_gzip,
        Compression.SNAPPY: aiokafka_codec.has_snappy,
        Compression.LZ4: aiokafka_codec.has_lz4,
        Compression.ZSTD: aiokafka_codec.has_zstd,
    }
    if codec in checks and not checks[codec]():
        return f"aiokafka has no {codec.name.lower()} codec here (cramjam missing)"
    return None


_KAFKA_CODEC_PACKAGES = {
    Compression.SNAPPY: ("python-snappy", kafka.codec.has_snappy),
    Compression.LZ4: ("lz4", kafka.codec.has_lz4),
    Compression.ZSTD: ("zstandard", kafka.codec.has_zstd),
    Compression.GZIP: ("gzip (stdlib)", kafka.codec.has_gzip),
}


def _kafka_python_missing(codec: Compression) -> str | None:
    if codec in _KAFKA_CODEC_PACKAGES:
        package, available = _KAFKA_CODEC_PACKAGES[codec]
        if not available():
            return (
                f"kafka-python {kafka.__version__} decodes/encodes {codec.name.lower()} only "
                f"through the optional '{package}' package, which is not installed"
            )
    return None


_AIOKAFKA_HAS_C = aiokafka_records.DefaultRecordBatch is not aiokafka_records._DefaultRecordBatchPy
_NO_C = pytest.mark.skipif(
    not _AIOKAFKA_HAS_C, reason="aiokafka's C extension is not in use (pure Python only)"
)

READERS = [
    pytest.param(
        LibReader("aiokafka-c", aiokafka_records.DefaultRecordBatch, _aiokafka_missing, False),
        id="aiokafka-c",
        marks=_NO_C,
    ),
    pytest.param(
        LibReader("aiokafka-py", aiokafka_records._DefaultRecordBatchPy, _aiokafka_missing, False),
        id="aiokafka-py",
    ),
    pytest.param(
        LibReader("kafka-python", KafkaRecordBatch, _kafka_python_missing, True),
        id="kafka-python",
    ),
]

BUILDERS = [
    pytest.param(
        LibBuilder("aiokafka-c", aiokafka_records.DefaultRecordBatchBuilder, _aiokafka_missing),
        id="aiokafka-c",
        marks=_NO_C,
    ),
    pytest.param(
        LibBuilder("aiokafka-py", aiokafka_records._DefaultRecordBatchBuilderPy, _aiokafka_missing),
        id="aiokafka-py",
    ),
    pytest.param(
        LibBuilder("kafka-python", KafkaRecordBatchBuilder, _kafka_python_missing),
        id="kafka-python",
    ),
]


def skip_if_missing(lib: LibReader | LibBuilder, codec: Compression) -> None:
    reason = lib.missing_codec(codec)
    if reason is not None:
        pytest.skip(reason)


def library_build(
    lib: LibBuilder,
    records: Sequence[InRecord],
    codec: Compression,
    *,
    transactional: bool = True,
    producer_id: int = PRODUCER_ID,
    producer_epoch: int = PRODUCER_EPOCH,
    base_sequence: int = BASE_SEQUENCE,
) -> bytearray:
    builder = lib.cls(
        2, int(codec), transactional, producer_id, producer_epoch, base_sequence, BATCH_SIZE
    )
    for r in records:
        meta = builder.append(r.offset_delta, r.timestamp, r.key, r.value, list(r.headers))
        assert meta is not None, f"{lib.name} refused a record (batch size)"
    return bytearray(builder.build())


# --------------------------------------------------------------------------- library parsing


@dataclass(frozen=True)
class Parsed:
    crc_valid: bool
    base_offset: int
    attributes: int
    compression: int
    timestamp_type: int
    is_transactional: bool
    is_control: bool
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[Any]


def library_parse(lib: LibReader, data: bytes | bytearray) -> Parsed:
    batch = lib.cls(bytes(data))
    crc_valid = batch.validate_crc()  # must precede iteration
    records = list(batch)
    return Parsed(
        crc_valid=crc_valid,
        base_offset=batch.base_offset,
        attributes=batch.attributes,
        compression=batch.compression_type,
        timestamp_type=batch.timestamp_type,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control_batch,
        last_offset_delta=batch.last_offset_delta,
        first_timestamp=batch.first_timestamp,
        max_timestamp=batch.max_timestamp,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        records=records,
    )


def as_tuples(records: Sequence[Any]) -> list[RecordTuple]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records]


def xerial_block_count(payload: bytes | bytearray) -> int:
    assert bytes(payload[:8]) == b"\x82SNAPPY\x00", "not a xerial snappy stream"
    pos, blocks = 16, 0
    while pos < len(payload):
        (length,) = struct.unpack_from(">i", payload, pos)
        pos += 4 + length
        blocks += 1
    assert pos == len(payload)
    return blocks


def uncompressed_size(records: Sequence[InRecord]) -> int:
    return len(strand_build(records, Compression.NONE)) - HEADER_SIZE


# --------------------------------------------------------------------------- Strand → library


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_kafka_python_skip_reasons_are_true(codec: Compression) -> None:
    """Where kafka-python cases are skipped for a missing codec package, kafka-python
    really cannot decode that codec (so installing the package turns the cases back on)."""
    data = strand_build([InRecord(0, T0, None, b"x" * 100)], codec)
    batch = KafkaRecordBatch(bytes(data))
    if _kafka_python_missing(codec) is None:
        assert [r.value for r in batch] == [b"x" * 100]
    else:
        with pytest.raises(kafka.errors.UnsupportedCodecError):
            list(batch)


def test_rich_records_span_several_snappy_blocks() -> None:
    """Guard for the fixtures: the snappy cases really cross xerial's 32 KiB blocks."""
    records = rich_records()
    assert uncompressed_size(records) > 2 * 32 * 1024
    assert max(len(r.value or b"") for r in records) > 16 * 1024
    assert xerial_block_count(strand_build(records, Compression.SNAPPY)[HEADER_SIZE:]) >= 3


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@pytest.mark.parametrize("lib", READERS)
def test_strand_batch_parsed_by_library(lib: LibReader, codec: Compression) -> None:
    skip_if_missing(lib, codec)
    records = rich_records()
    data = strand_build(records, codec)
    stamp(data, 0, BASE_OFFSET, LEADER_EPOCH)

    parsed = library_parse(lib, data)

    assert parsed.crc_valid is True
    assert parsed.base_offset == BASE_OFFSET
    assert parsed.compression == int(codec)
    assert parsed.timestamp_type == 0
    assert parsed.is_transactional is True
    assert parsed.is_control is False
    assert parsed.last_offset_delta == records[-1].offset_delta
    assert parsed.first_timestamp == records[0].timestamp
    assert parsed.max_timestamp == max(r.timestamp for r in records)
    assert parsed.producer_id == PRODUCER_ID
    assert parsed.producer_epoch == PRODUCER_EPOCH
    assert parsed.base_sequence == BASE_SEQUENCE
    assert as_tuples(parsed.records) == expected_tuples(records, BASE_OFFSET)
    for got in parsed.records:
        assert got.timestamp_type == 0


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@pytest.mark.parametrize("lib", READERS)
def test_strand_minimal_batch_without_producer_parsed_by_library(
    lib: LibReader, codec: Compression
) -> None:
    skip_if_missing(lib, codec)
    records = [InRecord(0, T0, None, b"")]
    data = strand_build(
        records, codec, producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=False
    )

    parsed = library_parse(lib, data)

    assert parsed.crc_valid is True
    assert parsed.base_offset == 0
    assert parsed.compression == int(codec)
    assert parsed.is_transactional is False
    assert (parsed.producer_id, parsed.producer_epoch, parsed.base_sequence) == (-1, -1, -1)
    assert parsed.last_offset_delta == 0
    assert as_tuples(parsed.records) == [(0, T0, None, b"", [])]


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_kafka_python_reads_strand_header_and_crc_for_every_codec(codec: Compression) -> None:
    """Header fields and the CRC need no decompression, so kafka-python checks all codecs."""
    records = rich_records()
    data = strand_build(records, codec)
    stamp(data, 0, BASE_OFFSET, LEADER_EPOCH)

    batch = KafkaRecordBatch(bytes(data))

    assert batch.validate_crc() is True
    assert batch.magic == 2
    assert batch.size_in_bytes == len(data)
    assert batch.base_offset == BASE_OFFSET
    assert batch.leader_epoch == LEADER_EPOCH
    assert batch.compression_type == int(codec)
    assert batch.records_count == len(records)
    assert batch.last_offset == BASE_OFFSET + records[-1].offset_delta
    assert batch.next_offset == BASE_OFFSET + records[-1].offset_delta + 1
    assert batch.producer_id == PRODUCER_ID
    assert batch.producer_epoch == PRODUCER_EPOCH
    assert batch.base_sequence == BASE_SEQUENCE
    assert batch.last_sequence == BASE_SEQUENCE + records[-1].offset_delta
    assert batch.is_transactional is True


@pytest.mark.parametrize("lib", READERS)
def test_stamp_keeps_library_crc_valid_and_moves_offsets(lib: LibReader) -> None:
    records = rich_records()[:4]
    data = strand_build(records, Compression.NONE)
    crc_before = bytes(data[17:21])
    for base_offset, leader_epoch in [(0, 0), (BASE_OFFSET, LEADER_EPOCH), (2**62, 2**31 - 1)]:
        stamp(data, 0, base_offset, leader_epoch)
        assert bytes(data[17:21]) == crc_before
        parsed = library_parse(lib, data)
        assert parsed.crc_valid is True
        assert parsed.base_offset == base_offset
        assert [r.offset for r in parsed.records] == [base_offset + r.offset_delta for r in records]
        if lib.has_leader_epoch:
            assert lib.cls(bytes(data)).leader_epoch == leader_epoch
        assert struct.unpack_from(">i", data, 12)[0] == leader_epoch


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_strand_compressed_payload_decodes_with_aiokafka_codec_to_same_bytes(
    codec: Compression,
) -> None:
    """Strand's compressed record section inflates (by aiokafka's codec functions) to exactly
    the bytes of the uncompressed batch's record section."""
    records = rich_records()
    plain = bytes(strand_build(records, Compression.NONE)[HEADER_SIZE:])
    payload = bytes(strand_build(records, codec)[HEADER_SIZE:])
    decoders: dict[Compression, Callable[[bytes], bytes]] = {
        Compression.NONE: bytes,
        Compression.GZIP: aiokafka_codec.gzip_decode,
        Compression.SNAPPY: aiokafka_codec.snappy_decode,
        Compression.LZ4: aiokafka_codec.lz4_decode,
        Compression.ZSTD: aiokafka_codec.zstd_decode,
    }
    if codec != Compression.NONE:
        assert len(payload) < len(plain)
    assert bytes(decoders[codec](payload)) == plain


@pytest.mark.parametrize("lib", BUILDERS)
def test_uncompressed_batch_is_byte_identical_to_library(lib: LibBuilder) -> None:
    records = rich_records()
    ours = strand_build(records, Compression.NONE)
    theirs = library_build(lib, records, Compression.NONE)
    # kafka-python writes partition leader epoch 0, aiokafka -1: the field is outside the CRC.
    stamp(ours, 0, 0, 0)
    stamp(theirs, 0, 0, 0)
    assert len(ours) == len(theirs)
    assert bytes(ours) == bytes(theirs)


# --------------------------------------------------------------------------- library → Strand


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@pytest.mark.parametrize("lib", BUILDERS)
def test_library_batch_parsed_by_strand(lib: LibBuilder, codec: Compression) -> None:
    skip_if_missing(lib, codec)
    records = rich_records()
    data = library_build(lib, records, codec)

    header = validate_batch(data)
    # Library builders silently fall back to no compression when it does not pay off;
    # the fixture is compressible, so the codec under test really is in the batch.
    assert header.compression == codec
    assert header.magic == 2
    assert header.base_offset == 0
    assert header.size_in_bytes == len(data)
    assert header.record_count == len(records)
    assert header.last_offset_delta == records[-1].offset_delta
    assert header.base_timestamp == records[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in records)
    assert header.timestamp_type == TimestampType.CREATE_TIME
    assert header.is_transactional is True
    assert header.is_control is False
    assert header.producer_id == PRODUCER_ID
    assert header.producer_epoch == PRODUCER_EPOCH
    assert header.base_sequence == BASE_SEQUENCE
    assert header.last_sequence == BASE_SEQUENCE + records[-1].offset_delta
    if codec == Compression.SNAPPY:
        assert xerial_block_count(data[HEADER_SIZE:]) >= 3

    got = RecordBatch(data).records()
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in got] == expected_tuples(
        records, 0
    )


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@pytest.mark.parametrize("lib", BUILDERS)
def test_library_batches_stamped_and_concatenated_split_by_strand(
    lib: LibBuilder, codec: Compression
) -> None:
    skip_if_missing(lib, codec)
    all_records = rich_records()
    first = library_build(lib, all_records[:5], codec, transactional=False)
    second = library_build(lib, all_records[5:], codec, transactional=False)
    first_next = BASE_OFFSET + all_records[4].offset_delta + 1
    stamp(first, 0, BASE_OFFSET, LEADER_EPOCH)
    stamp(second, 0, first_next, LEADER_EPOCH + 1)
    log = bytes(first + second)

    headers = list(iter_batches(log))
    assert [pos for pos, _ in headers] == [0, len(first)]
    assert [h.base_offset for _, h in headers] == [BASE_OFFSET, first_next]
    assert [h.partition_leader_epoch for _, h in headers] == [LEADER_EPOCH, LEADER_EPOCH + 1]
    assert headers[0][1].next_offset == BASE_OFFSET + all_records[4].offset_delta + 1

    # A fetch that ends inside the second batch yields only the first.
    for cut in (len(first) + 1, len(log) - 1):
        batches = list(iter_record_batches(log[:cut]))
        assert [b.header.base_offset for b in batches] == [BASE_OFFSET]

    batches = list(iter_record_batches(log))
    assert [b.raw for b in batches] == [bytes(first), bytes(second)]
    decoded = [(r.offset, r.timestamp, r.key, r.value, r.headers) for b in batches for r in b]
    assert decoded == (
        expected_tuples(all_records[:5], BASE_OFFSET) + expected_tuples(all_records[5:], first_next)
    )


# --------------------------------------------------------------------------- control batches


@pytest.mark.parametrize("control_type", list(ControlType), ids=lambda t: t.name.lower())
@pytest.mark.parametrize("lib", READERS)
def test_strand_end_txn_marker_parsed_by_library(lib: LibReader, control_type: ControlType) -> None:
    data = bytearray(
        build_end_txn_marker(
            control_type,
            producer_id=PRODUCER_ID,
            producer_epoch=PRODUCER_EPOCH,
            coordinator_epoch=31_337,
            timestamp=T0,
        )
    )
    stamp(data, 0, BASE_OFFSET, LEADER_EPOCH)

    parsed = library_parse(lib, data)

    assert parsed.crc_valid is True
    assert parsed.is_control is True
    assert parsed.is_transactional is True
    assert parsed.attributes & 0x30 == 0x30
    assert parsed.compression == 0
    assert parsed.base_offset == BASE_OFFSET
    assert parsed.producer_id == PRODUCER_ID
    assert parsed.producer_epoch == PRODUCER_EPOCH
    assert parsed.base_sequence == -1
    assert parsed.last_offset_delta == 0
    assert len(parsed.records) == 1
    record = parsed.records[0]
    assert record.offset == BASE_OFFSET
    assert record.timestamp == T0
    assert record.headers == []
    assert record.value == struct.pack(">hi", 0, 31_337)

    marker = AiokafkaControlRecord.parse(record.key)
    assert marker == (COMMIT_MARKER if control_type == ControlType.COMMIT else ABORT_MARKER)
    assert (marker.version, marker.type_) == (0, int(control_type))
    if lib.name == "kafka-python":
        assert isinstance(record, KafkaControlRecord)
        assert (record.version, record.type) == (0, int(control_type))
        assert record.commit is (control_type == ControlType.COMMIT)
        assert record.abort is (control_type == ControlType.ABORT)


class ControlBatchBuilder(KafkaRecordBatchBuilder):  # type: ignore[misc]  # untyped library
    """kafka-python's builder with the control bit: the library still lays out the header
    and computes the CRC; only ``_get_attributes`` (which it documents as "Control batches
    are only created by Broker") is extended."""

    __slots__ = ()

    def _get_attributes(self, include_compression_type: bool = True) -> int:
        return int(super()._get_attributes(include_compression_type)) | int(self.CONTROL_MASK)


@pytest.mark.parametrize("control_type", list(ControlType), ids=lambda t: t.name.lower())
def test_kafka_python_control_batch_parsed_by_strand(control_type: ControlType) -> None:
    builder = ControlBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=True,
        producer_id=PRODUCER_ID,
        producer_epoch=PRODUCER_EPOCH,
        base_sequence=-1,
        batch_size=BATCH_SIZE,
    )
    key = struct.pack(">hh", 0, int(control_type))
    value = struct.pack(">hi", 0, 9_001)
    assert builder.append(0, T0, key, value, []) is not None
    data = bytearray(builder.build())
    stamp(data, 0, BASE_OFFSET, LEADER_EPOCH)
    # The library itself accepts what it built.
    assert KafkaRecordBatch(bytes(data)).validate_crc() is True

    batch = RecordBatch(data)
    assert batch.header.is_control is True
    assert batch.header.is_transactional is True
    assert batch.header.producer_id == PRODUCER_ID
    assert batch.header.producer_epoch == PRODUCER_EPOCH
    records = batch.records()
    assert len(records) == 1
    assert records[0].offset == BASE_OFFSET
    assert records[0].timestamp == T0
    assert parse_end_txn_marker(records[0]) == EndTransactionMarker(control_type, 9_001)


@pytest.mark.parametrize("control_type", list(ControlType), ids=lambda t: t.name.lower())
def test_strand_end_txn_marker_is_byte_identical_to_kafka_python_control_batch(
    control_type: ControlType,
) -> None:
    ours = bytearray(
        build_end_txn_marker(
            control_type,
            producer_id=PRODUCER_ID,
            producer_epoch=PRODUCER_EPOCH,
            coordinator_epoch=5,
            timestamp=T0,
        )
    )
    builder = ControlBatchBuilder(2, 0, True, PRODUCER_ID, PRODUCER_EPOCH, -1, BATCH_SIZE)
    builder.append(0, T0, struct.pack(">hh", 0, int(control_type)), struct.pack(">hi", 0, 5), [])
    theirs = builder.build()
    stamp(ours, 0, 0, 0)  # kafka-python writes partition leader epoch 0
    assert bytes(ours) == bytes(theirs)


# --------------------------------------------------------------------------- LogAppendTime


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@pytest.mark.parametrize("lib", READERS)
def test_log_append_time_reported_by_library(lib: LibReader, codec: Compression) -> None:
    skip_if_missing(lib, codec)
    records = rich_records()
    data = strand_build(records, codec)
    stamp(data, 0, BASE_OFFSET, LEADER_EPOCH)
    append_time = T0 + 123_456
    set_log_append_time(data, 0, len(data), append_time)

    parsed = library_parse(lib, data)

    assert parsed.crc_valid is True
    assert parsed.timestamp_type == 1
    assert parsed.max_timestamp == append_time
    assert parsed.compression == int(codec)
    assert parsed.is_transactional is True
    assert [r.timestamp for r in parsed.records] == [append_time] * len(records)
    assert [r.timestamp_type for r in parsed.records] == [1] * len(records)
    assert [(r.offset, r.key, r.value, list(r.headers)) for r in parsed.records] == [
        (o, k, v, h) for o, _, k, v, h in expected_tuples(records, BASE_OFFSET)
    ]
    # And Strand agrees with itself.
    assert validate_batch(data).timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in RecordBatch(data)] == [append_time] * len(records)


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_kafka_python_sees_log_append_time_header_for_every_codec(codec: Compression) -> None:
    data = strand_build(rich_records(), codec)
    set_log_append_time(data, 0, len(data), T0 + 1)
    batch = KafkaRecordBatch(bytes(data))
    assert batch.validate_crc() is True
    assert batch.timestamp_type == 1
    assert batch.max_timestamp == T0 + 1
    assert batch.compression_type == int(codec)
