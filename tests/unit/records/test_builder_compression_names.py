"""``BatchBuilder(compression=...)`` takes a codec by name, as the producer's
``compression_type`` does and the README shows (issue 11, point 9)."""

from __future__ import annotations

import pytest

from strand.errors import UnsupportedCompressionError
from strand.records import BatchBuilder, Compression, iter_record_batches


@pytest.mark.parametrize(("given", "codec"), [
    ("lz4", Compression.LZ4), ("GZIP", Compression.GZIP), (" zstd ", Compression.ZSTD),
    ("none", Compression.NONE), (Compression.SNAPPY, Compression.SNAPPY), (1, Compression.GZIP),
])
def test_a_codec_by_name_enum_or_number(given: Compression | str, codec: Compression) -> None:
    builder = BatchBuilder(compression=given)
    builder.append(b"hello", key=b"k1", headers=[("trace", b"42")])
    [batch] = iter_record_batches(builder.build())
    assert batch.header.compression is codec
    [record] = batch.records()
    assert (record.key, record.value) == (b"k1", b"hello")


def test_an_unknown_name_is_a_typed_error_naming_the_choices() -> None:
    with pytest.raises(UnsupportedCompressionError, match=r"'brotli'.*lz4"):
        BatchBuilder(compression="brotli")
