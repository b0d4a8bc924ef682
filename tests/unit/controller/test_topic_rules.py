"""Kafka's topic name rules and partition count limits, one rule at a time."""

from __future__ import annotations

import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.controller.topic_rules import (
    INTERNAL_TOPICS,
    LEGAL_CHARS,
    MAX_NAME_LENGTH,
    MAX_PARTITIONS,
    collides,
    collision_warning,
    find_collisions,
    has_collision_chars,
    is_internal,
    reject_collisions,
    unify_collision_chars,
    validate_partitions,
    validate_topic_name,
)
from strand.errors import ErrorCode, InvalidPartitionsError, InvalidTopicError, StrandError

# ---------------------------------------------------------------- legal names


@pytest.mark.parametrize(
    "name",
    [
        "orders",
        "a",
        "A",
        "0",
        "-",
        "_",
        "...",  # only "." and ".." are special
        ".hidden",
        "a.b_c-D9",
        "x" * 249,
        string.ascii_letters + string.digits + "._-",
        "_single_leading_underscore",
    ],
)
def test_legal_names(name: str) -> None:
    validate_topic_name(name)


def test_legal_chars_are_exactly_kafkas() -> None:
    assert set(string.ascii_letters + string.digits + "._-") == LEGAL_CHARS
    assert MAX_NAME_LENGTH == 249


@given(st.text(alphabet=sorted(LEGAL_CHARS), min_size=1, max_size=MAX_NAME_LENGTH))
def test_any_name_of_legal_chars_is_legal(name: str) -> None:
    if name in (".", "..") or name.startswith("__"):
        return
    validate_topic_name(name)


# ---------------------------------------------------------------- illegal names


def _invalid(name: Any, match: str, **kwargs: bool) -> InvalidTopicError:
    with pytest.raises(InvalidTopicError, match=match) as info:
        validate_topic_name(name, **kwargs)
    assert info.value.code is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert int(info.value.code) == 17
    assert isinstance(info.value, StrandError)
    return info.value


def test_empty() -> None:
    _invalid("", "can't be empty")


def test_249_is_the_limit() -> None:
    validate_topic_name("a" * 249)
    error = _invalid("a" * 250, "can't be longer than 249 characters")
    assert "(it has 250)" in str(error)


def test_length_counts_characters() -> None:
    _invalid("a" * 1000, r"\(it has 1000\)")


@pytest.mark.parametrize("name", [".", ".."])
def test_dot_and_dot_dot(name: str) -> None:
    _invalid(name, r'cannot be "\." or "\.\."')


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("my topic", " "),
        (" orders", " "),
        ("orders\n", "\n"),
        ("orders\t", "\t"),
        ("a/b", "/"),
        ("a\\b", "\\"),
        ("a:b", ":"),
        ("a*b", "*"),
        ("a+b", "+"),
        ("a@b", "@"),
        ("a,b", ","),
        ("a\x00b", "\x00"),
        ("café", "é"),
        ("\uff4f\uff52\uff44\uff45\uff52\uff53", "\uff44\uff45\uff4f\uff52\uff53"),  # fullwidth
        ("٣", "٣"),  # an Arabic-Indic digit: str.isdigit() would accept it
        ("topic-🚀", "🚀"),
        ("ñandú", "ñú"),
    ],
)
def test_illegal_characters_are_named(name: str, bad: str) -> None:
    error = _invalid(name, "only ASCII letters, digits, '.', '_' and '-' are allowed")
    assert f"contains {', '.join(repr(c) for c in bad)};" in str(error)


def test_every_illegal_character_is_listed_once_and_sorted() -> None:
    error = _invalid("b a!b a!", "illegal")
    assert "contains ' ', '!';" in str(error)


@given(st.text(min_size=1, max_size=40).filter(lambda s: any(c not in LEGAL_CHARS for c in s)))
def test_any_illegal_character_is_refused(name: str) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)


def test_not_a_string() -> None:
    _invalid(42, "must be a string, got int")
    _invalid(b"orders", "must be a string, got bytes")


def test_order_of_checks_is_stable() -> None:
    # Too long and illegal characters: length is reported first.
    _invalid("é" * 300, "longer than 249")


# ---------------------------------------------------------------- internal names


@pytest.mark.parametrize("name", ["__consumer_offsets", "__transaction_state", "__mine", "__"])
def test_internal_names_are_reserved(name: str) -> None:
    _invalid(name, "reserved: names starting with '__' are for internal topics")
    validate_topic_name(name, allow_internal=True)
    assert is_internal(name)


def test_internal_topics_constant() -> None:
    assert {"__consumer_offsets", "__transaction_state"} == INTERNAL_TOPICS
    for name in INTERNAL_TOPICS:
        validate_topic_name(name, allow_internal=True)


def test_allow_internal_does_not_relax_other_rules() -> None:
    _invalid("__bad name", "contains ' '", allow_internal=True)
    _invalid("__" + "x" * 248, "longer than 249", allow_internal=True)


def test_single_underscore_is_not_internal() -> None:
    assert not is_internal("_private")
    validate_topic_name("_private")


# ---------------------------------------------------------------- collisions


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("a.b", "a_b", True),
        ("a_b", "a.b", True),
        ("a.b.c", "a_b.c", True),
        ("a.b", "a.b", True),
        ("..", "__", True),
        ("a.b", "a-b", False),
        ("a.b", "a.bb", False),
        ("A.b", "a_b", False),  # names are case-sensitive
        ("orders", "orders2", False),
    ],
)
def test_collides(a: str, b: str, expected: bool) -> None:
    assert collides(a, b) is expected
    assert collides(b, a) is expected


def test_collision_helpers() -> None:
    assert unify_collision_chars("a.b_c.d") == "a_b_c_d"
    assert has_collision_chars("a.b") and has_collision_chars("a_b")
    assert not has_collision_chars("a-b")


def test_collision_warning_is_only_a_warning() -> None:
    warning = collision_warning("metrics.raw")
    assert warning is not None and "'.' or '_'" in warning
    assert collision_warning("metrics-raw") is None
    validate_topic_name("metrics.raw")  # a warning, never an error on its own


def test_find_and_reject_collisions() -> None:
    existing = ["a_b", "a.b", "a-b", "c"]
    assert find_collisions("a.b", existing) == ["a_b"]
    assert find_collisions("a_b", existing) == ["a.b"]
    assert find_collisions("c", existing) == []
    with pytest.raises(
        InvalidTopicError, match=r"'a\.b' collides with existing topic\(s\) \['a_b'\]"
    ):
        reject_collisions("a.b", ["a_b"])
    reject_collisions("a.b", ["a-b", "a.b"])  # equal names are TOPIC_ALREADY_EXISTS instead


# ---------------------------------------------------------------- partition counts


@pytest.mark.parametrize("n", [1, 2, 1000, MAX_PARTITIONS])
def test_valid_partition_counts(n: int) -> None:
    validate_partitions(n)


@pytest.mark.parametrize(
    ("n", "match"),
    [
        (0, "at least 1, got 0"),
        (-1, "at least 1, got -1"),
        (MAX_PARTITIONS + 1, f"at most {MAX_PARTITIONS}, got {MAX_PARTITIONS + 1}"),
        (10**9, "at most"),
        (True, "must be an integer, got bool"),
        (2.0, "must be an integer, got float"),
        ("3", "must be an integer, got str"),
    ],
)
def test_invalid_partition_counts(n: Any, match: str) -> None:
    with pytest.raises(InvalidPartitionsError, match=match) as info:
        validate_partitions(n)
    assert info.value.code is ErrorCode.INVALID_PARTITIONS
    assert int(info.value.code) == 37
