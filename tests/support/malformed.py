"""Producer batches with a correct CRC and a lying body: the cases of issue 11.

Each starts from a valid batch, breaks one thing and fixes the CRC (and whatever
lengths the case says), so only the leader's record validation can refuse it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import crc32c

from strand.errors import ErrorCode
from strand.records import BatchBuilder

# Positions in Kafka's v2 batch header, spelled out apart from strand.records.batch.
LENGTH_POS = 8
CRC_POS = 17
ATTRIBUTES_POS = 21
LAST_OFFSET_DELTA_POS = 23
RECORD_COUNT_POS = 57
HEADER_SIZE = 61
LOG_OVERHEAD = 12


def fix_crc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, CRC_POS, crc32c.crc32c(bytes(buf[ATTRIBUTES_POS:])))
    return bytes(buf)


def fix_length(buf: bytearray) -> bytearray:
    struct.pack_into(">i", buf, LENGTH_POS, len(buf) - LOG_OVERHEAD)
    return buf


def valid_batch(n: int = 3, tag: str = "v", timestamp: int | None = None) -> bytes:
    builder = BatchBuilder()
    for i in range(n):
        builder.append(f"{tag}-{i}".encode(), key=f"k{i}".encode(), timestamp=timestamp)
    return builder.build()


def claims_more_records() -> bytes:
    """The header says 5 records (offsets 0..4); the body holds 3."""
    buf = bytearray(valid_batch(3))
    struct.pack_into(">i", buf, RECORD_COUNT_POS, 5)
    struct.pack_into(">i", buf, LAST_OFFSET_DELTA_POS, 4)
    return fix_crc(buf)


def first_length_minus_one() -> bytes:
    """The first record's length varint is -1 (zig-zag 0x01)."""
    buf = bytearray(valid_batch(3))
    assert buf[HEADER_SIZE] < 0x80  # a one-byte length
    buf[HEADER_SIZE] = 0x01
    return fix_crc(buf)


def cut_body() -> bytes:
    """The last record loses its last 4 bytes; its length, the batch length and the CRC
    are fixed up to match."""
    data = valid_batch(3)
    last_start = HEADER_SIZE
    for _ in range(2):  # skip two records (one-byte length varints)
        last_start += 1 + (data[last_start] >> 1)
    buf = bytearray(data[:-4])
    assert buf[last_start] < 0x80
    buf[last_start] -= 4 << 1  # zig-zag length minus 4
    return fix_crc(fix_length(buf))


def claims_codec(codec: int) -> Callable[[], bytes]:
    def build() -> bytes:
        buf = bytearray(valid_batch(3))
        struct.pack_into(">h", buf, ATTRIBUTES_POS, codec)
        return fix_crc(buf)

    return build


def huge_record_count() -> bytes:
    """One 45-byte record whose header claims 2^31-1 (a 106-byte batch)."""
    builder = BatchBuilder()
    builder.append(b"x" * 38, key=None)
    buf = bytearray(builder.build())
    assert len(buf) == 106
    struct.pack_into(">i", buf, RECORD_COUNT_POS, 2**31 - 1)
    struct.pack_into(">i", buf, LAST_OFFSET_DELTA_POS, 2**31 - 2)
    return fix_crc(buf)


# name -> (batch, the error code Kafka answers it with)
ISSUE_CASES: dict[str, tuple[Callable[[], bytes], ErrorCode]] = {
    "claims-5-holds-3": (claims_more_records, ErrorCode.INVALID_RECORD),
    "first-length-minus-1": (first_length_minus_one, ErrorCode.INVALID_RECORD),
    "cut-body-fixed-up": (cut_body, ErrorCode.INVALID_RECORD),
    "claims-lz4-not-compressed": (claims_codec(3), ErrorCode.CORRUPT_MESSAGE),
    "claims-gzip-not-compressed": (claims_codec(1), ErrorCode.CORRUPT_MESSAGE),
    "record-count-2^31-1": (huge_record_count, ErrorCode.INVALID_RECORD),
}
