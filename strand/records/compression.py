"""Compression codecs of the record batch, end to end (producer → log → consumer).

Every codec goes through cramjam (Rust, releases the GIL). The framings are the
ones Kafka's Java client writes so that batches are interchangeable with Kafka:
gzip stream, snappy in xerial's block framing, lz4 frame format, zstd frame.
"""

from __future__ import annotations

import enum
import struct

import cramjam

from strand.errors import CorruptRecordError, UnsupportedCompressionError

Buffer = bytes | bytearray | memoryview


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def parse(cls, name: str | int | Compression) -> Compression:
        if isinstance(name, Compression):
            return name
        if isinstance(name, int):
            try:
                return cls(name)
            except ValueError:
                raise UnsupportedCompressionError(f"unknown compression codec {name}") from None
        try:
            return cls[name.strip().upper()]
        except KeyError:
            valid = ", ".join(c.name.lower() for c in cls)
            raise UnsupportedCompressionError(
                f"unknown compression type {name!r} (expected one of {valid})"
            ) from None


# xerial snappy stream: magic, version 1, min compatible version 1, then
# [int32 block length][raw snappy block]... (what SnappyOutputStream writes).
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_SIZE = 32 * 1024
# Kafka's default levels (KIP-390).
_LZ4_LEVEL = 9
_ZSTD_LEVEL = 3
_BLOCK_LENGTH = struct.Struct(">i")


def _snappy_xerial_encode(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_blocks(data: Buffer) -> list[memoryview]:
    """The raw snappy blocks of a payload: xerial-framed, or one bare block."""
    view = memoryview(data)
    if len(view) < len(_XERIAL_HEADER) or view[:8] != _XERIAL_HEADER[:8]:
        return [view]
    blocks = []
    pos = len(_XERIAL_HEADER)
    while pos < len(view):
        if pos + 4 > len(view):
            raise CorruptRecordError("truncated xerial snappy block length")
        (length,) = _BLOCK_LENGTH.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > len(view):
            raise CorruptRecordError("truncated xerial snappy block")
        blocks.append(view[pos : pos + length])
        pos += length
    return blocks


def _snappy_decode(data: Buffer) -> bytes:
    return b"".join(bytes(cramjam.snappy.decompress_raw(block))
                    for block in _snappy_blocks(data))


def compress(codec: Compression, data: Buffer) -> bytes:
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == Compression.SNAPPY:
        return _snappy_xerial_encode(data)
    if codec == Compression.LZ4:
        # Kafka reads only independent blocks without a content checksum (KIP-57).
        compressor = cramjam.lz4.Compressor(
            level=_LZ4_LEVEL, content_checksum=False, block_linked=False
        )
        compressor.compress(data)
        return bytes(compressor.finish())
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL))
    raise UnsupportedCompressionError(f"unsupported compression codec {codec}")


def decompress(codec: Compression, data: Buffer) -> bytes:
    try:
        if codec == Compression.NONE:
            return bytes(data)
        if codec == Compression.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == Compression.SNAPPY:
            return _snappy_decode(data)
        if codec == Compression.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == Compression.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        name = codec.name.lower()
        raise CorruptRecordError(f"{name} payload does not decompress: {exc}") from exc
    raise UnsupportedCompressionError(f"unsupported compression codec {codec}")


# decompress_bounded starts with this many output bytes per input byte, then grows.
_FIRST_RATIO = 16
_FIRST_SIZE = 64 << 10
_GROWTH = 8
# cramjam's error when the output buffer is too small (Rust's io::ErrorKind::WriteZero).
_OUTPUT_FULL = "failed to write whole buffer"


def decompress_bounded(codec: Compression, data: Buffer, limit: int) -> bytearray:
    """Decompress ``data``, refusing (CorruptRecordError) output beyond ``limit`` bytes.

    For untrusted input (the leader validating a producer's batch): a few KiB must not
    inflate into gigabytes. The output buffer starts near the usual ratio and grows
    by 8x up to ``limit``, so memory follows the real size, not the limit.
    """
    name = codec.name.lower()
    try:
        if codec == Compression.SNAPPY:
            blocks = _snappy_blocks(data)
            total = sum(cramjam.snappy.decompress_raw_len(block) for block in blocks)
            if total > limit:
                raise CorruptRecordError(
                    f"snappy payload inflates to {total} bytes, more than {limit}")
            return bytearray(b"".join(bytes(cramjam.snappy.decompress_raw(block))
                                      for block in blocks))
        into = {
            Compression.GZIP: cramjam.gzip.decompress_into,
            Compression.LZ4: cramjam.lz4.decompress_into,
            Compression.ZSTD: cramjam.zstd.decompress_into,
        }.get(codec)
        if into is None:
            raise UnsupportedCompressionError(f"unsupported compression codec {codec}")
        size = min(limit, max(len(data) * _FIRST_RATIO, _FIRST_SIZE))
        while True:
            out = bytearray(size)
            try:
                written = into(data, out)
            except cramjam.DecompressionError as exc:
                # Grow only when ``out`` filled up: damaged data fails at once instead
                # of being retried into ever larger (up to ``limit``) zeroed buffers.
                if size >= limit or _OUTPUT_FULL not in str(exc):
                    raise
                size = min(limit, size * _GROWTH)
                continue
            del out[written:]
            return out
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(
            f"the batch claims {name} compression but its records do not decompress as "
            f"{name} within {limit} bytes: {exc}") from exc
