"""Shards of __consumer_offsets, its record format, and the offset store."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.groups.offset_store import DEFAULT_RETENTION_MS, OffsetStore, Record
from services.groups.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from strand.coordination.shards import java_string_hash, preferred_owner, shard_for, shards_of
from strand.errors import CorruptRecordError, InvalidRequestError, OffsetMetadataTooLargeError

# ------------------------------------------------------------------------------ shards


def test_java_string_hash_matches_java() -> None:
    # Values computed by java.lang.String.hashCode.
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert java_string_hash("ü€𝄞") == 17317530  # a surrogate pair counts as two chars


def test_shard_for_is_kafkas_abs_hash_modulo() -> None:
    assert shard_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    assert shard_for("hello", 50) == 99162322 % 50
    assert shard_for("Aa", 7) == shard_for("BB", 7)
    with pytest.raises(ValueError):
        shard_for("g", 0)


def test_every_shard_has_exactly_one_preferred_owner_and_moves_are_minimal() -> None:
    three = ["coord-a", "coord-b", "coord-c"]
    owned = {i: set(shards_of(i, three, 50)) for i in three}
    assert sorted(k for s in owned.values() for k in s) == list(range(50))
    assert all(8 <= len(s) <= 25 for s in owned.values()), owned  # roughly even
    # coord-c leaves: only its shards move, to the others.
    two = three[:2]
    for k in range(50):
        if preferred_owner(k, three) != "coord-c":
            assert preferred_owner(k, two) == preferred_owner(k, three)
    assert preferred_owner(3, []) is None


# ------------------------------------------------------------------------------ records


@given(st.text(min_size=1), st.text(), st.integers(0, 1 << 31))
def test_keys_round_trip_and_are_canonical(group: str, topic: str, partition: int) -> None:
    for key in (OffsetKey(group, topic, partition), GroupKey(group)):
        data = encode_key(key)
        assert decode_key(data) == key
        assert encode_key(decode_key(data)) == data  # same key, same bytes: compaction works


def test_values_round_trip() -> None:
    offset = OffsetValue(1200, "checkpoint-7", 5, 1_700_000_000_000, -1)
    key = OffsetKey("g", "orders", 3)
    assert decode_value(key, encode_value(offset)) == offset
    group = GroupValue("consumer", 7, "range", "m-1", 123, (
        MemberValue("m-1", None, "app", 10_000, 30_000, b"\x00sub", b"\x01assign"),
        MemberValue("m-2", "host-2", "app", 10_000, 30_000, b"", b"")))
    assert decode_value(GroupKey("g"), encode_value(group)) == group
    assert decode_value(key, None) is None  # a tombstone


@pytest.mark.parametrize("data", [b"", b"{", b'{"k":"nope","g":"g"}', b"[1,2]", b'{"g":1}'])
def test_garbage_keys_are_refused(data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_key(data)


def test_unknown_value_versions_are_refused() -> None:
    with pytest.raises(CorruptRecordError, match="version"):
        decode_value(OffsetKey("g", "t", 0), b'{"v":99,"offset":1}')
    with pytest.raises(CorruptRecordError):
        decode_value(OffsetKey("g", "t", 0), b'{"v":1}')


# ------------------------------------------------------------------------------ offset store


def load(store: OffsetStore, records: list[Record]) -> None:
    for record in records:
        key = decode_key(record.key)
        store.apply(key, decode_value(key, record.value))


def test_commit_apply_fetch() -> None:
    store = OffsetStore()
    records = store.commit("g", {("t", 1): OffsetValue(10, commit_ms=5),
                                 ("t", 0): OffsetValue(7, commit_ms=5)})
    assert [decode_key(r.key) for r in records] == [OffsetKey("g", "t", 0),
                                                     OffsetKey("g", "t", 1)]
    assert store.fetch("g") == {}  # nothing applies before the write succeeded
    load(store, records)
    assert store.fetch("g", [("t", 0), ("t", 9)]) == {("t", 0): OffsetValue(7, commit_ms=5)}
    load(store, store.commit("g", {("t", 0): OffsetValue(8, commit_ms=6)}))
    assert store.fetch("g")[("t", 0)].offset == 8  # the latest commit wins
    assert store.groups() == {"g"}


def test_bad_commits_are_refused_and_write_nothing() -> None:
    store = OffsetStore()
    with pytest.raises(InvalidRequestError):
        store.commit("g", {("t", -1): OffsetValue(1)})
    with pytest.raises(InvalidRequestError):
        store.commit("g", {("t", 0): OffsetValue(-5)})
    with pytest.raises(OffsetMetadataTooLargeError):
        store.commit("g", {("t", 0): OffsetValue(1, metadata="x" * 5000)})


def test_deleting_a_group_writes_tombstones_for_all_its_records() -> None:
    store = OffsetStore()
    load(store, store.commit("g", {("t", 0): OffsetValue(1), ("u", 2): OffsetValue(2)}))
    store.apply(GroupKey("g"), GroupValue("consumer", 3, "range", "m", 0))
    tombstones = store.delete_group("g")
    assert Counter(type(decode_key(r.key)).__name__ for r in tombstones) == {
        "OffsetKey": 2, "GroupKey": 1}
    assert all(r.value is None for r in tombstones)
    load(store, tombstones)
    assert store.groups() == set()


def test_offsets_expire_only_for_empty_groups_after_retention() -> None:
    store = OffsetStore()
    day = 24 * 3600 * 1000
    load(store, store.commit("busy", {("t", 0): OffsetValue(1, commit_ms=0)}))
    load(store, store.commit("idle", {("t", 0): OffsetValue(1, commit_ms=0)}))
    store.mark_empty("idle", now_ms=2 * day)

    def empty(group: str) -> bool:
        return group == "idle"

    # The retention counts from when the group became empty, not from the commit.
    assert store.expired(DEFAULT_RETENTION_MS + day, DEFAULT_RETENTION_MS, empty) == []
    due = store.expired(DEFAULT_RETENTION_MS + 2 * day, DEFAULT_RETENTION_MS, empty)
    assert [decode_key(r.key) for r in due] == [OffsetKey("idle", "t", 0)]
    # An explicit expiry time wins.
    load(store, store.commit("idle", {("t", 1): OffsetValue(1, commit_ms=0, expire_ms=50)}))
    assert OffsetKey("idle", "t", 1) in [decode_key(r.key)
                                         for r in store.expired(60, DEFAULT_RETENTION_MS, empty)]


def test_an_empty_group_without_offsets_left_is_removed_with_its_metadata() -> None:
    store = OffsetStore()
    load(store, store.commit("g", {("t", 0): OffsetValue(1, commit_ms=0),
                                   ("t", 1): OffsetValue(1, commit_ms=100)}))
    store.apply(GroupKey("g"), GroupValue("consumer", 3, "range", "", 0))
    store.mark_empty("g", now_ms=0)

    def empty(group: str) -> bool:
        return True

    # One offset still within its retention: the group and that offset stay.
    assert [decode_key(r.key) for r in store.expired(60, 50, empty)] == [
        OffsetKey("g", "t", 0)]
    due = store.expired(200, 50, empty)
    assert [decode_key(r.key) for r in due] == [
        OffsetKey("g", "t", 0), OffsetKey("g", "t", 1), GroupKey("g")]
    load(store, due)
    assert store.groups() == set()
    # A group with members keeps its metadata however old.
    store.apply(GroupKey("h"), GroupValue("consumer", 1, "range", "m", 0))
    assert store.expired(10**12, 50, lambda group: group != "h") == []
