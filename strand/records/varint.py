"""Zig-zag varints as used by Kafka's v2 records (protobuf's sint32/sint64 encoding).

Encoding goes through a precomputed table for every value whose zig-zag form fits
in two bytes (lengths up to 8191, small deltas): that covers nearly every field of
a typical record, so building a record costs a few table look-ups, not a loop. The
builder indexes ``UNSIGNED_VARINT_TABLE`` itself on its hot path.

``varint_size`` is the one place that says how long a varint is without encoding
it (Kafka's ``ByteUtils.sizeOfVarlong``): record sizing (``strand.records.sizes``)
and with it the producer's per-record memory accounting go through it.
"""

from __future__ import annotations

# Values below this are encoded by a table look-up.
UNSIGNED_VARINT_TABLE_LIMIT = 1 << 14


def _encode_unsigned_slow(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


UNSIGNED_VARINT_TABLE: tuple[bytes, ...] = tuple(
    _encode_unsigned_slow(v) for v in range(UNSIGNED_VARINT_TABLE_LIMIT)
)


def encode_unsigned(value: int) -> bytes:
    """Base-128 varint of a non-negative integer (protobuf's uint64 encoding)."""
    if value < UNSIGNED_VARINT_TABLE_LIMIT:
        return UNSIGNED_VARINT_TABLE[value]
    return _encode_unsigned_slow(value)


def encode_varint(value: int) -> bytes:
    """Zig-zag encode a signed 64-bit integer."""
    z = (value << 1) if value >= 0 else ((-value) << 1) - 1
    if z < UNSIGNED_VARINT_TABLE_LIMIT:
        return UNSIGNED_VARINT_TABLE[z]
    return _encode_unsigned_slow(z)


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint at ``pos``; returns (value, next position)."""
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        if shift > 63:
            raise ValueError("varint is longer than 10 bytes")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            # Bits past the 64th are dropped, as Kafka's readVarlong does: every reader
            # (and the leader's validation) then agrees on the value.
            result &= 0xFFFF_FFFF_FFFF_FFFF
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def varint_size(value: int) -> int:
    """Bytes ``encode_varint(value)`` takes, computed without encoding it.

    On the producer's per-record path: one- and two-byte varints (nearly every
    length and delta of a record) are answered by two comparisons.
    """
    z = (value << 1) if value >= 0 else ((-value) << 1) - 1
    if z < 0x80:
        return 1
    if z < 0x4000:
        return 2
    return (z.bit_length() + 6) // 7
