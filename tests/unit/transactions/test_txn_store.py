"""A shard's store: replay of its records, what a new owner must finish, timeouts,
transactional-id expiration, ListTransactions and DescribeTransactions."""

from __future__ import annotations

import pytest

from services.transactions.txn_metadata import TxnTransit
from services.transactions.txn_records import encode_key, record
from services.transactions.txn_requests import end_txn
from services.transactions.txn_state import TxnState
from services.transactions.txn_store import DEFAULT_ID_EXPIRATION_MS, TransactionStore
from strand.errors import CorruptRecordError, TransactionalIdNotFoundError
from tests.unit.transactions.txn_helpers import Shard

S = TxnState


def transit(state: TxnState, epoch: int = 0, pid: int = 7, start_ms: int = -1,
            parts: frozenset[tuple[str, int]] = frozenset(), last_update_ms: int = 0
            ) -> TxnTransit:
    return TxnTransit(pid, -1, epoch, -1, 60_000, state, parts, start_ms, last_update_ms)


def test_replay_last_value_wins_and_tombstones_delete() -> None:
    store = TransactionStore()
    store.load([(r.key, r.value) for r in (
        record("a", transit(S.EMPTY)), record("b", transit(S.EMPTY)),
        record("a", transit(S.ONGOING, start_ms=5, parts=frozenset({("t", 0)}))),
        record("b", None))])
    a = store.get("a")
    assert a is not None and a.state is S.ONGOING and a.partitions == {("t", 0)}
    assert store.get("b") is None and len(store) == 1


def test_load_names_the_transactions_a_new_owner_must_finish() -> None:
    store = TransactionStore()
    prepared = transit(S.PREPARE_COMMIT, start_ms=1, parts=frozenset({("t", 1)}))
    unfinished = store.load([(r.key, r.value) for r in (
        record("c", prepared), record("d", transit(S.PREPARE_ABORT, start_ms=1,
                                                   parts=frozenset({("t", 2)}))),
        record("e", transit(S.COMPLETE_COMMIT, start_ms=1)))])
    assert sorted(m.transactional_id for m in unfinished) == ["c", "d"]


def test_an_unreadable_record_stops_the_load() -> None:
    with pytest.raises(CorruptRecordError, match="record 1 of the shard"):
        TransactionStore().load([(encode_key("a"), None), (b"junk", b"junk")])


def test_timed_out_is_ongoing_past_its_timeout_only() -> None:
    shard = Shard()
    shard.init("slow")
    shard.init("idle")
    metadata = shard.open("slow", ("t", 0))
    assert shard.store.timed_out(61_000) == []
    assert [t.transactional_id for t in shard.store.timed_out(61_001)] == ["slow"]
    end = end_txn(metadata, "slow", metadata.producer_id, 0, False, 2_000)
    assert end is not None
    shard.write(metadata, end)  # aborting already: not timed out again
    assert shard.store.timed_out(10**9) == []


def test_ids_expire_after_seven_days_unless_a_transaction_is_open() -> None:
    shard = Shard()
    shard.init("old")
    shard.init("open")
    shard.open("open", ("t", 0))
    assert shard.store.expire(1_000 + DEFAULT_ID_EXPIRATION_MS - 1) == []
    (expiring,) = shard.store.expire(1_000 + DEFAULT_ID_EXPIRATION_MS)
    assert expiring.transactional_id == "old" and expiring.tombstone.value is None
    # while its tombstone is written the id is gone for readers and blocks changes
    with pytest.raises(TransactionalIdNotFoundError):
        shard.store.describe("old")
    assert shard.store.remove("old", expiring.transit)
    assert shard.store.get("old") is None
    shard.log.append(expiring.tombstone)
    assert shard.reloaded().get("old") is None


def test_failed_tombstone_write_keeps_the_id() -> None:
    shard = Shard()
    shard.init("old")
    (expiring,) = shard.store.expire(10**12)
    metadata = shard.metadata("old")
    shard.store.abort_pending(metadata)
    assert shard.store.describe("old").state is S.EMPTY
    assert not shard.store.remove("old", expiring.transit)


def test_list_transactions_filters() -> None:
    shard = Shard()
    for tid in ("a", "b", "c"):
        shard.init(tid)
    shard.now_ms = 500
    shard.open("b", ("t", 0))
    listing = shard.store.list_transactions()
    assert [(t.transactional_id, t.state) for t in listing.transactions] == [
        ("a", S.EMPTY), ("b", S.ONGOING), ("c", S.EMPTY)]
    assert [t.transactional_id for t in shard.store.list_transactions(
        states=["Ongoing"]).transactions] == ["b"]
    assert [t.transactional_id for t in shard.store.list_transactions(
        producer_ids=[shard.metadata("c").producer_id]).transactions] == ["c"]
    only_unknown = shard.store.list_transactions(states=["Bogus"])
    assert only_unknown.transactions == () and only_unknown.unknown_state_filters == ("Bogus",)
    mixed = shard.store.list_transactions(states=["Bogus", "Empty"])
    assert [t.transactional_id for t in mixed.transactions] == ["a", "c"]
    assert mixed.unknown_state_filters == ("Bogus",)
    assert [t.transactional_id for t in shard.store.list_transactions(
        min_duration_ms=1_000, now_ms=1_499).transactions] == []
    assert [t.transactional_id for t in shard.store.list_transactions(
        min_duration_ms=1_000, now_ms=1_500).transactions] == ["b"]


def test_describe_transactions() -> None:
    shard = Shard()
    shard.init("a")
    shard.now_ms = 500
    a = shard.open("a", ("t", 1), ("s", 0))
    described = shard.store.describe("a")
    assert (described.state, described.producer_id, described.producer_epoch,
            described.timeout_ms, described.start_ms, described.partitions) == (
        S.ONGOING, a.producer_id, 0, 60_000, 500, (("s", 0), ("t", 1)))
    with pytest.raises(TransactionalIdNotFoundError):
        shard.store.describe("nobody")


def test_a_failed_first_write_leaves_no_trace() -> None:
    shard = Shard()
    metadata = shard.metadata("new")
    transit_ = metadata.prepare_increment_epoch(60_000, None, 1)
    shard.write(metadata, transit_, fail=True)
    assert shard.store.get("new") is None
