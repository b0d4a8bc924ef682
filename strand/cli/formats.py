"""The record format language of ``strand consume --format`` and ``strand produce
--line-format`` (kcat's ``-f`` tokens): one language both ways, so what ``consume``
prints, ``produce`` can read back.

Tokens (``produce`` reads the ones marked *)::

    %t topic         %p partition *    %o offset        %T timestamp (ms) *
    %k key *         %K key length     %s value *       %S value length
    %h headers * (``k1=v1,k2=v2``)     %% a percent sign

Escapes: ``\\n`` newline, ``\\t`` tab, ``\\r`` carriage return, ``\\0`` NUL, ``\\\\``
backslash. A null key, value or header value prints as the null literal (empty by
default, so a null key is told apart from the 4-byte key ``null``); lengths print
-1 for null. Reading, a field equal to the null literal is null when one is set; an empty %T or
%p leaves the timestamp (now) or the partition (the partitioner's) to the producer.

Reading a line, each token takes the text up to the literal that follows it (its
first occurrence); the last token takes the rest of the line, so the value may
hold separators. Two tokens need a literal between them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # decoding (cramjam) loads with the consumer
    from strand.consumer.records import ConsumerRecord


__all__ = ["InputFormat", "OutputFormat", "ParsedLine", "compile_format"]

OUTPUT_TOKENS = frozenset("tpoTkKsSh")
INPUT_TOKENS = frozenset("pTksh")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\"}


@dataclass(frozen=True, slots=True)
class Token:
    letter: str


Part = Token | bytes


def compile_format(text: str, allowed: frozenset[str] = OUTPUT_TOKENS) -> list[Part]:
    """The literals and tokens of ``text``; ValueError naming a bad token or escape."""
    parts: list[Part] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char in "%\\" and i + 1 == len(text):
            raise ValueError(f"format {text!r} ends with a lone {char!r}")
        if char == "\\":
            escaped = _ESCAPES.get(text[i + 1])
            if escaped is None:
                raise ValueError(f"unknown escape \\{text[i + 1]} in format {text!r}")
            literal.append(escaped)
            i += 2
        elif char == "%":
            letter = text[i + 1]
            if letter == "%":
                literal.append("%")
            elif letter in allowed:
                if literal:
                    parts.append("".join(literal).encode())
                    literal = []
                parts.append(Token(letter))
            else:
                raise ValueError(f"unknown token %{letter} in format {text!r} (tokens: "
                                 + " ".join(f"%{t}" for t in sorted(allowed)) + ")")
            i += 2
        else:
            literal.append(char)
            i += 1
    if literal:
        parts.append("".join(literal).encode())
    return parts


def _length(data: bytes | None) -> bytes:
    return b"-1" if data is None else str(len(data)).encode()


class OutputFormat:
    """Renders consumed records (see the module docstring)."""

    def __init__(self, text: str, null_literal: str = "") -> None:
        self.parts = compile_format(text)
        self.null = null_literal.encode()

    def _headers(self, record: ConsumerRecord) -> bytes:
        return b",".join(key.encode() + b"=" + (self.null if value is None else value)
                         for key, value in record.headers)

    def render(self, record: ConsumerRecord) -> bytes:
        out: list[bytes] = []
        null = self.null
        for part in self.parts:
            if isinstance(part, bytes):
                out.append(part)
                continue
            letter = part.letter
            if letter == "s":
                out.append(null if record.value is None else record.value)
            elif letter == "k":
                out.append(null if record.key is None else record.key)
            elif letter == "o":
                out.append(str(record.offset).encode())
            elif letter == "p":
                out.append(str(record.partition).encode())
            elif letter == "t":
                out.append(record.topic.encode())
            elif letter == "T":
                out.append(str(record.timestamp).encode())
            elif letter == "K":
                out.append(_length(record.key))
            elif letter == "S":
                out.append(_length(record.value))
            else:  # "h"
                out.append(self._headers(record))
        return b"".join(out)


@dataclass(slots=True)
class ParsedLine:
    """What one input line says about its record (None: not given)."""

    value: bytes | None = None
    key: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp_ms: int | None = None
    partition: int | None = None


class InputFormat:
    """Splits input lines into records' fields (see the module docstring)."""

    def __init__(self, text: str, null_literal: str | None = None) -> None:
        if text.endswith("\\n"):  # the output format's line end is the input's line end
            text = text[:-2]
        self.parts: Sequence[Part] = compile_format(text, INPUT_TOKENS)
        for before, after in zip(self.parts, self.parts[1:], strict=False):
            if isinstance(before, Token) and isinstance(after, Token):
                raise ValueError(f"format {text!r}: %{before.letter} and %{after.letter} need "
                                 "a separator between them")
        letters = [p.letter for p in self.parts if isinstance(p, Token)]
        repeated = sorted({letter for letter in letters if letters.count(letter) > 1})
        if repeated:
            raise ValueError(f"format {text!r} repeats %{', %'.join(repeated)}")
        self.null = None if null_literal is None else null_literal.encode()

    def _data(self, text: bytes) -> bytes | None:
        return None if self.null is not None and text == self.null else text

    def parse(self, line: bytes) -> ParsedLine:
        """The fields of ``line`` (its line end removed); ValueError saying what is wrong."""
        parsed = ParsedLine()
        pos = 0
        parts = self.parts
        for i, part in enumerate(parts):
            if isinstance(part, bytes):
                if not line.startswith(part, pos):
                    raise ValueError(f"expected {part.decode(errors='replace')!r} at "
                                     f"column {pos + 1}")
                pos += len(part)
                continue
            following = parts[i + 1] if i + 1 < len(parts) else None
            if isinstance(following, bytes):
                end = line.find(following, pos)
                if end < 0:
                    raise ValueError(f"no {following.decode(errors='replace')!r} after "
                                     f"%{part.letter}")
            else:
                end = len(line)
            self._set(parsed, part.letter, line[pos:end])
            pos = end
        return parsed

    def _set(self, parsed: ParsedLine, letter: str, text: bytes) -> None:
        if letter == "s":
            parsed.value = self._data(text)
        elif letter == "k":
            parsed.key = self._data(text)
        elif letter == "h":
            parsed.headers = self._headers(text)
        elif text:  # an empty %T or %p: the producer decides (now, the partitioner)
            try:
                number = int(text)
            except ValueError:
                what = "timestamp (%T)" if letter == "T" else "partition (%p)"
                raise ValueError(f"{what} is not a number: {text.decode(errors='replace')!r}"
                                 ) from None
            if number < 0:
                raise ValueError(f"negative {'timestamp' if letter == 'T' else 'partition'}: "
                                 f"{number}")
            if letter == "T":
                parsed.timestamp_ms = number
            else:
                parsed.partition = number

    def _headers(self, text: bytes) -> list[tuple[str, bytes | None]]:
        headers: list[tuple[str, bytes | None]] = []
        if not text:
            return headers
        for pair in text.split(b","):
            key, sep, value = pair.partition(b"=")
            if not sep or not key:
                raise ValueError(f"header {pair.decode(errors='replace')!r} is not key=value")
            headers.append((key.decode(errors="replace"), self._data(value)))
        return headers


def parse_header_option(pair: str) -> tuple[str, bytes]:
    """``--header K=V`` → (K, V bytes); ValueError when there is no ``=``."""
    key, sep, value = pair.partition("=")
    if not sep or not key:
        raise ValueError(f"expected KEY=VALUE, got {pair!r}")
    return key, value.encode()
