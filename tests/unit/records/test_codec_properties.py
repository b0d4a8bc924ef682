"""Property tests of the RecordBatch v2 codec: build → decode is the identity."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from strand.errors import CorruptRecordError
from strand.records import (
    BatchBuilder,
    Compression,
    Record,
    RecordBatch,
    iter_batches,
    iter_record_batches,
    stamp,
    validate_batch,
)
from strand.records.batch import set_log_append_time
from strand.records.varint import decode_varint, encode_varint, varint_size

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1

CODECS = list(Compression)
CODEC_IDS = [c.name.lower() for c in CODECS]

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

int64s = st.integers(INT64_MIN, INT64_MAX)
# Long values are cheap repeats: they exercise multi-byte length varints (and lengths past
# the builder's 8191-entry fast table) without making hypothesis draw kilobytes.
long_bytes = st.builds(lambda n, b: bytes([b]) * n, st.integers(64, 9_000), st.integers(0, 255))
nullable_bytes = st.none() | st.binary(max_size=40) | long_bytes
headers = st.lists(st.tuples(st.text(max_size=12), nullable_bytes), max_size=6)


@dataclass(frozen=True)
class Spec:
    """One record to append: ``offset_gap`` None means the next contiguous offset."""

    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp: int
    offset_gap: int | None


@st.composite
def record_specs(draw: st.DrawFn, max_records: int = 12) -> list[Spec]:
    """Records with timestamps in [-1, 2^63-1] (-1: Kafka's "no timestamp") whose deltas
    from the first fit an int64, as Kafka requires.

    Timestamps mix tiny deltas (1-byte varints), big ones (up to 10-byte varints) and
    negative ones; offsets mix contiguous appends and explicit gaps.
    """
    first = draw(st.integers(-1, INT64_MAX))
    lo = max(-1, first + INT64_MIN)
    hi = min(INT64_MAX, first + INT64_MAX)
    near = st.integers(-(2**20), 2**20).map(lambda d: min(max(first + d, lo), hi))
    timestamps = st.one_of(st.just(first), near, st.integers(lo, hi))
    count = draw(st.integers(1, max_records))
    specs = []
    for i in range(count):
        specs.append(
            Spec(
                key=draw(nullable_bytes),
                value=draw(nullable_bytes),
                headers=draw(headers),
                timestamp=first if i == 0 else draw(timestamps),
                offset_gap=draw(st.none() | st.integers(1, 2**24)),
            )
        )
    return specs


def build(
    specs: list[Spec], codec: Compression, base_offset: int = 0
) -> tuple[bytes, list[Record]]:
    """Build a batch from ``specs``; returns its bytes and the records it must decode to."""
    builder = BatchBuilder(compression=codec, base_offset=base_offset)
    expected: list[Record] = []
    for spec in specs:
        previous = expected[-1].offset if expected else base_offset - 1
        offset = None if spec.offset_gap is None else previous + spec.offset_gap
        delta = builder.append(
            spec.value,
            key=spec.key,
            headers=spec.headers,
            timestamp=spec.timestamp,
            offset=offset,
        )
        assert base_offset + delta == (previous + 1 if offset is None else offset)
        expected.append(
            Record(base_offset + delta, spec.timestamp, spec.key, spec.value, spec.headers)
        )
    return builder.build(), expected


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@FAST
@given(specs=record_specs(), base_offset=st.integers(0, 2**62))
def test_records_round_trip(codec: Compression, specs: list[Spec], base_offset: int) -> None:
    data, expected = build(specs, codec, base_offset)

    header = validate_batch(data)
    assert header.size_in_bytes == len(data)
    assert header.compression == codec
    assert header.base_offset == base_offset
    assert header.record_count == len(specs)
    assert header.last_offset == expected[-1].offset
    assert header.base_timestamp == specs[0].timestamp
    assert header.max_timestamp == max(s.timestamp for s in specs)

    assert RecordBatch(data).records() == expected


@FAST
@given(specs=record_specs(max_records=4))
def test_log_append_time_round_trip(specs: list[Spec]) -> None:
    data, expected = build(specs, Compression.NONE)
    buf = bytearray(data)
    set_log_append_time(buf, 0, len(buf), 42)
    assert [r.timestamp for r in RecordBatch(buf)] == [42] * len(expected)
    assert [(r.offset, r.key, r.value, r.headers) for r in RecordBatch(buf)] == [
        (r.offset, r.key, r.value, r.headers) for r in expected
    ]


@settings(max_examples=1500, deadline=None)
@given(value=int64s, prefix=st.binary(max_size=3), suffix=st.binary(max_size=3))
@example(value=0, prefix=b"", suffix=b"")
@example(value=-1, prefix=b"", suffix=b"")
@example(value=INT64_MAX, prefix=b"", suffix=b"")
@example(value=INT64_MIN, prefix=b"", suffix=b"")
@example(value=8191, prefix=b"", suffix=b"")  # last zig-zag value in the 2-byte table
@example(value=-8192, prefix=b"", suffix=b"")
@example(value=8192, prefix=b"", suffix=b"")  # first value past the table
@example(value=-8193, prefix=b"", suffix=b"")
def test_varint_round_trip(value: int, prefix: bytes, suffix: bytes) -> None:
    encoded = encode_varint(value)
    assert 1 <= len(encoded) <= 10
    assert varint_size(value) == len(encoded)
    assert all(b & 0x80 for b in encoded[:-1]) and not encoded[-1] & 0x80
    buf = prefix + encoded + suffix
    assert decode_varint(buf, len(prefix)) == (value, len(prefix) + len(encoded))
    assert decode_varint(bytearray(buf), len(prefix)) == (value, len(prefix) + len(encoded))
    assert decode_varint(memoryview(buf), len(prefix)) == (value, len(prefix) + len(encoded))


@settings(max_examples=500, deadline=None)
@given(value=int64s)
def test_varint_size_matches_bit_length(value: int) -> None:
    """Zig-zag keeps small magnitudes short: |v| < 64 takes one byte, and the sizes grow
    by one byte exactly when the zig-zag value crosses a power of 128."""
    zz = (value << 1) ^ (value >> 63)
    assert varint_size(value) == max(1, (zz.bit_length() + 6) // 7)
    if -64 <= value < 64:
        assert len(encode_varint(value)) == 1


@FAST
@given(
    specs=record_specs(max_records=5),
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, INT64_MAX),
    leader_epoch=st.integers(-1, INT32_MAX),
)
def test_stamp_moves_offsets_and_keeps_crc(
    specs: list[Spec], codec: Compression, base_offset: int, leader_epoch: int
) -> None:
    data, expected = build(specs, codec)
    before = validate_batch(data)
    buf = bytearray(data)

    stamp(buf, 0, base_offset, leader_epoch)

    after = validate_batch(buf)  # the CRC still holds
    assert after.crc == before.crc
    assert after.base_offset == base_offset
    assert after.partition_leader_epoch == leader_epoch
    assert buf[16:] == data[16:]  # nothing from the magic byte on moved
    assert [r.offset for r in RecordBatch(buf).records()] == [
        base_offset + r.offset for r in expected
    ]


@st.composite
def batch_lists(draw: st.DrawFn) -> list[tuple[int, bytes, list[Record]]]:
    """Consecutive batches of a log: (base offset, bytes, records) each."""
    batches = []
    next_offset = draw(st.integers(0, 2**40))
    for _ in range(draw(st.integers(1, 5))):
        specs = draw(record_specs(max_records=4))
        data, expected = build(specs, draw(st.sampled_from(CODECS)), next_offset)
        batches.append((next_offset, data, expected))
        next_offset = expected[-1].offset + 1
    return batches


@FAST
@given(batches=batch_lists(), data=st.data())
def test_concatenated_batches_are_split(
    batches: list[tuple[int, bytes, list[Record]]], data: st.DataObject
) -> None:
    log = b"".join(raw for _, raw, _ in batches)
    positions = []
    pos = 0
    for _, raw, _ in batches:
        positions.append(pos)
        pos += len(raw)

    found = list(iter_batches(log))
    assert [p for p, _ in found] == positions
    assert [h.size_in_bytes for _, h in found] == [len(raw) for _, raw, _ in batches]
    assert [h.base_offset for _, h in found] == [base for base, _, _ in batches]
    assert [h.last_offset for _, h in found] == [exp[-1].offset for _, _, exp in batches]

    split = list(iter_record_batches(log))
    assert [b.raw for b in split] == [raw for _, raw, _ in batches]
    assert [b.records() for b in split] == [exp for _, _, exp in batches]

    # A fetch cut anywhere inside the last batch: the tail is ignored, not an error.
    last_raw = batches[-1][1]
    cut = data.draw(st.integers(positions[-1] + 1, len(log) - 1), label="cut")
    truncated = log[:cut]
    assert [b.raw for b in iter_record_batches(truncated)] == [raw for _, raw, _ in batches[:-1]]
    assert len(last_raw) > cut - positions[-1]
    # iter_batches requires whole batches and says so.
    with pytest.raises(CorruptRecordError):
        list(iter_batches(truncated))
