"""Transactional offsets of one shard, as pure code (services.groups.txn_offsets
inside the OffsetStore): staged pending per (group, producer), committed as regular
offset records or dropped in one write, fenced by epochs, never expired or deleted
while pending; and a hypothesis property against a reference model, including that
reloading the written records gives the same state."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.groups.offset_store import OffsetStore
from services.groups.records import (
    OffsetKey,
    OffsetValue,
    TxnOffsetKey,
    TxnOffsetValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from strand.coordination.shard_log import Record
from strand.errors import (
    ConcurrentTransactionsError,
    InvalidRequestError,
    ProducerFencedError,
    TransactionCoordinatorFencedError,
)

TopicPartition = tuple[str, int]


def written(store: OffsetStore, records: list[Record]) -> list[Record]:
    store.apply_written(records)
    return records


def replay(records: list[Record]) -> OffsetStore:
    store = OffsetStore()
    for record in records:
        key = decode_key(record.key)
        store.apply(key, decode_value(key, record.value))
    return store


def test_pending_records_round_trip() -> None:
    key = TxnOffsetKey("g", 4012, "orders", 3)
    value = TxnOffsetValue(2, OffsetValue(1200, "m", 5, 17, -1, "id-1"))
    assert decode_key(encode_key(key)) == key
    assert decode_value(key, encode_value(value)) == value
    assert encode_key(key) != encode_key(OffsetKey("g", "orders", 3))


def test_commit_makes_pending_offsets_committed_in_one_write() -> None:
    store = OffsetStore()
    written(store, store.commit("g", {("t", 0): OffsetValue(5)}))
    log = written(store, store.stage_txn("g", 7, 0, {("t", 0): OffsetValue(10),
                                                     ("t", 1): OffsetValue(20)}))
    assert store.fetch("g") == {("t", 0): OffsetValue(5)}  # pending is not committed
    assert store.pending.partitions("g") == {("t", 0), ("t", 1)}
    end = store.pending.complete(7, 0, 1, commit=True)
    # Offsets first, then the tombstones: a write cut short leaves them pending.
    assert [r.value is None for r in end] == [False, False, True, True]
    log += written(store, end)
    assert {tp: v.offset for tp, v in store.fetch("g").items()} == {("t", 0): 10, ("t", 1): 20}
    assert store.pending.partitions("g") == set()
    assert store.pending.complete(7, 0, 1, commit=True) == []  # idempotent: nothing left
    assert replay(log).fetch("g") == store.fetch("g")


def test_abort_drops_pending_offsets_and_keeps_the_committed_one() -> None:
    store = OffsetStore()
    written(store, store.commit("g", {("t", 0): OffsetValue(5)}))
    written(store, store.stage_txn("g", 7, 0, {("t", 0): OffsetValue(10)}))
    end = store.pending.complete(7, 0, 1, commit=False)
    assert all(r.value is None for r in end) and len(end) == 1
    written(store, end)
    assert store.fetch("g") == {("t", 0): OffsetValue(5)}
    assert not store.pending.groups()


def test_completion_covers_every_group_of_the_producer_and_no_other_producer() -> None:
    store = OffsetStore()
    written(store, store.stage_txn("a", 7, 0, {("t", 0): OffsetValue(1)}))
    written(store, store.stage_txn("b", 7, 0, {("t", 0): OffsetValue(2)}))
    written(store, store.stage_txn("a", 8, 0, {("t", 1): OffsetValue(3)}))
    written(store, store.pending.complete(7, 0, 1, commit=True))
    assert store.fetch("a") == {("t", 0): OffsetValue(1)}
    assert store.fetch("b") == {("t", 0): OffsetValue(2)}
    assert store.pending.partitions("a") == {("t", 1)}  # producer 8's, still pending


def test_an_older_epoch_than_pending_offsets_is_fenced() -> None:
    store = OffsetStore()
    written(store, store.stage_txn("g", 7, 3, {("t", 0): OffsetValue(1)}))
    with pytest.raises(ProducerFencedError, match="epoch 3"):
        store.stage_txn("g", 7, 2, {("t", 0): OffsetValue(9)})
    # A completion older than the pending offsets (a stale repeat) leaves them alone.
    assert store.pending.complete(7, 2, 1, commit=True) == []
    assert store.pending.partitions("g") == {("t", 0)}


def test_an_older_transaction_coordinator_epoch_is_fenced() -> None:
    store = OffsetStore()
    written(store, store.stage_txn("g", 7, 0, {("t", 0): OffsetValue(1)}))
    assert store.pending.complete(7, 0, 5, commit=False) != []
    written(store, store.stage_txn("g", 7, 0, {("t", 0): OffsetValue(2)}))
    with pytest.raises(TransactionCoordinatorFencedError, match="4 is older than 5"):
        store.pending.complete(7, 0, 4, commit=True)


def test_bad_offsets_are_refused_and_write_nothing() -> None:
    store = OffsetStore()
    with pytest.raises(InvalidRequestError):
        store.stage_txn("g", 7, 0, {("t", 0): OffsetValue(-3)})
    assert not store.pending.groups()


def test_pending_offsets_keep_their_partition_from_expiring() -> None:
    store = OffsetStore()
    written(store, store.commit("g", {("t", 0): OffsetValue(5, commit_ms=0),
                                      ("t", 1): OffsetValue(6, commit_ms=0)}))
    written(store, store.stage_txn("g", 7, 0, {("t", 0): OffsetValue(10)}))
    expired = store.expired(now_ms=10_000, retention_ms=1_000, is_empty=lambda g: True)
    assert [decode_key(r.key) for r in expired] == [OffsetKey("g", "t", 1)]
    assert "g" in store.groups()


# ------------------------------------------------------------------ property: a model


@dataclass
class Model:
    committed: dict[tuple[str, TopicPartition], int] = field(default_factory=dict)
    pending: dict[tuple[str, int, TopicPartition], tuple[int, int]] = field(
        default_factory=dict)  # (group, pid, tp) -> (epoch, offset)
    ended: dict[int, int] = field(default_factory=dict)  # pid -> highest completed epoch


GROUPS = st.sampled_from(["a", "b"])
PIDS = st.sampled_from([7, 8])
TPS = st.sampled_from([("t", 0), ("t", 1), ("u", 0)])
OPS = st.one_of(
    st.tuples(st.just("commit"), GROUPS, TPS, st.integers(0, 100)),
    st.tuples(st.just("stage"), GROUPS, PIDS, st.integers(0, 2),
              st.dictionaries(TPS, st.integers(0, 100), min_size=1, max_size=3)),
    st.tuples(st.just("end"), PIDS, st.integers(0, 2), st.booleans()),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(OPS, max_size=30))
def test_pending_offsets_follow_the_model_and_reload_the_same(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    store, model, log = OffsetStore(), Model(), []
    for op in ops:
        if op[0] == "commit":
            _, group, tp, offset = op
            log += written(store, store.commit(group, {tp: OffsetValue(offset)}))
            model.committed[(group, tp)] = offset
        elif op[0] == "stage":
            _, group, pid, epoch, offsets = op
            held = [e for (g, p, _), (e, _) in model.pending.items() if (g, p) == (group, pid)]
            if epoch < model.ended.get(pid, -1) or (held and epoch < max(held)):
                with pytest.raises(ProducerFencedError):
                    store.stage_txn(group, pid, epoch, {tp: OffsetValue(o)
                                                        for tp, o in offsets.items()})
                continue
            if held and epoch > min(held):
                # the previous transaction's offsets are not completed yet: never replaced
                with pytest.raises(ConcurrentTransactionsError):
                    store.stage_txn(group, pid, epoch, {tp: OffsetValue(o)
                                                        for tp, o in offsets.items()})
                continue
            log += written(store, store.stage_txn(
                group, pid, epoch, {tp: OffsetValue(o) for tp, o in offsets.items()}))
            for tp, offset in offsets.items():
                model.pending[(group, pid, tp)] = (epoch, offset)
        else:
            _, pid, epoch, commit = op
            log += written(store, store.pending.complete(pid, epoch, 0, commit))
            model.ended[pid] = max(epoch, model.ended.get(pid, -1))
            for (group, p, tp), (e, offset) in sorted(model.pending.items()):
                if p == pid and e <= epoch:
                    del model.pending[(group, p, tp)]
                    if commit:
                        model.committed[(group, tp)] = offset
        for reloaded in (store, replay(log)):
            for group in ("a", "b"):
                assert {tp: v.offset for tp, v in reloaded.fetch(group).items()} == {
                    tp: o for (g, tp), o in model.committed.items() if g == group}
                assert reloaded.pending.partitions(group) == {
                    tp for (g, _, tp) in model.pending if g == group}
