"""The CLI's record format language (strand/cli/formats.py): rendering, reading back."""

from __future__ import annotations

import pytest

from strand.cli.formats import InputFormat, OutputFormat
from strand.consumer.records import ConsumerRecord
from strand.records import TimestampType


def record(key: bytes | None, value: bytes | None,
           headers: list[tuple[str, bytes | None]] | None = None) -> ConsumerRecord:
    return ConsumerRecord("t", 3, 42, 1700000000000, TimestampType.CREATE_TIME, key, value,
                          headers or [])


def test_tokens_and_escapes() -> None:
    out = OutputFormat("%t|%p|%o|%T|%k|%K|%s|%S|%h|100%%\\t\\\\\\n")
    assert out.render(record(b"k", b"vv", [("a", b"1"), ("b", None)])) == (
        b"t|3|42|1700000000000|k|1|vv|2|a=1,b=|100%\t\\\n")


def test_a_null_key_is_not_the_key_null() -> None:
    out = OutputFormat("%k:%K\\n")
    assert out.render(record(None, b"v")) == b":-1\n"
    assert out.render(record(b"null", b"v")) == b"null:4\n"
    assert OutputFormat("%k\\n", "NULL").render(record(None, b"v")) == b"NULL\n"


@pytest.mark.parametrize("bad", ["%q", "%", "\\x", "abc\\"])
def test_bad_formats_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        OutputFormat(bad)


def test_reading_what_was_printed() -> None:
    fmt = "%T\\t%h\\t%k\\t%s\\n"
    printed = OutputFormat(fmt, "NULL").render(record(None, b"a\tb", [("h", b"x")]))
    parsed = InputFormat(fmt, "NULL").parse(printed.rstrip(b"\n"))
    assert (parsed.timestamp_ms, parsed.headers, parsed.key, parsed.value) == (
        1700000000000, [("h", b"x")], None, b"a\tb")


def test_reading_refuses_what_it_cannot_split() -> None:
    with pytest.raises(ValueError, match="need"):
        InputFormat("%k%s")
    with pytest.raises(ValueError, match="unknown token %o"):
        InputFormat("%o:%s")
    with pytest.raises(ValueError, match="no ':' after %k"):
        InputFormat("%k:%s").parse(b"novalue")
    with pytest.raises(ValueError, match="not a number"):
        InputFormat("%p:%s").parse(b"x:v")
    assert InputFormat("%p:%s").parse(b":v").partition is None  # empty: the partitioner's
