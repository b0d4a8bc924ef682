"""What the harnesses share: the finding they raise for a broken invariant, and the
small input formats that let libFuzzer's byte mutations reach past checksums and
container framing."""

from __future__ import annotations

import atexit
import os
import shutil
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import crc32c

from fuzz.harnesses import SCRATCH_ENV
from strand.records.batch import ATTRIBUTES_POS, CRC_POS, HEADER_SIZE, LOG_OVERHEAD

__all__ = ["SCRATCH_ENV", "Finding", "check", "fix_batch_crcs", "read_chunks",
           "scratch_directory", "write_chunks"]

_LENGTH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_CHUNK_HEAD = struct.Struct(">BH")  # kind, length
MAX_CHUNK = 0xFFFF


class Finding(AssertionError):
    """An invariant the code under test broke: never caught by a harness, so libFuzzer
    records the input as a crash."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise Finding(message)


def fix_batch_crcs(buf: bytearray) -> None:
    """Recompute the CRC of every batch whose framing holds, in place.

    Random mutations almost never keep a CRC-32C right, so without this nearly every
    input would stop at the checksum and the decoders behind it would never run.
    """
    pos = 0
    total = len(buf)
    while total - pos >= HEADER_SIZE:
        size = _LENGTH.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD
        if size < HEADER_SIZE or pos + size > total:
            return
        checksum = crc32c.crc32c(bytes(buf[pos + ATTRIBUTES_POS:pos + size]))
        _CRC.pack_into(buf, pos + CRC_POS, checksum)
        pos += size


def read_chunks(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(kind, payload) pairs of ``kind u8 | length u16 | payload``; a cut-off last chunk
    yields what there is, so every input means something."""
    pos = 0
    while len(data) - pos >= _CHUNK_HEAD.size:
        kind, length = _CHUNK_HEAD.unpack_from(data, pos)
        pos += _CHUNK_HEAD.size
        yield kind, data[pos:pos + length]
        pos += length


def write_chunks(chunks: list[tuple[int, bytes]]) -> bytes:
    """The inverse of :func:`read_chunks` (corpus seeds)."""
    out = bytearray()
    for kind, payload in chunks:
        if len(payload) > MAX_CHUNK:
            raise ValueError(f"a chunk holds at most {MAX_CHUNK} bytes, not {len(payload)}")
        out += _CHUNK_HEAD.pack(kind, len(payload)) + payload
    return bytes(out)


def scratch_directory(name: str) -> Path:
    """A new directory for one harness process's files: in $STRAND_FUZZ_SCRATCH when the
    runner or the engine set it, else in /dev/shm (memory: fsyncs cost nothing) or the temp dir,
    removed at exit when the process ends normally."""
    root = os.environ.get(SCRATCH_ENV) or ("/dev/shm" if os.path.isdir("/dev/shm")
                                           else tempfile.gettempdir())
    os.makedirs(root, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=f"strand-fuzz-{name}-", dir=root))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path
