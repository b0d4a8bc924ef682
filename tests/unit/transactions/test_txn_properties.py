"""Hypothesis drives random sequences of requests (init / bump, add partitions,
end commit / abort, complete, timeout, fence by a new instance, requests from
zombies, failed writes, expiration) through the coordinator's pure code and checks
after every step that:

* every transition that happened is in Kafka's table (written out independently),
  or is the overlap where Strand differs (a client's Prepare* -> the next Ongoing);
* the epoch never decreases for a producer id;
* a fenced (older) epoch never moves a transaction, and a refused request changes
  nothing;
* a new owner loading the records written so far has exactly the in-memory state.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from services.transactions.txn_metadata import TransactionMetadata
from services.transactions.txn_records import record
from services.transactions.txn_requests import (
    ProducerIdAndEpoch,
    abort_timed_out,
    add_partitions,
    complete_txn,
    end_txn,
    init_producer_id,
    verify_partitions,
)
from services.transactions.txn_state import TxnState
from strand.errors import (
    ConcurrentTransactionsError,
    ErrorCode,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    ProducerFencedError,
)
from tests.unit.transactions.test_txn_requests import STRAND_TABLE
from tests.unit.transactions.txn_helpers import Shard

IDS = ("app-a", "app-b")
ids = st.sampled_from(IDS)
partitions = st.lists(st.tuples(st.sampled_from(["orders", "audit"]), st.integers(0, 3)),
                      min_size=1, max_size=3)
# Refusals a well-behaved client can meet; IllegalTransitionError is never one.
EXPECTED = (ConcurrentTransactionsError, InvalidTxnStateError)


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.shard = Shard()
        self.max_epoch: dict[int, int] = {}
        self.zombies: dict[str, set[tuple[int, int]]] = {i: set() for i in IDS}
        self.fail_next = False

    @initialize()
    def start(self) -> None:
        self.shard.now_ms = 1_000

    def _metadata(self, tid: str) -> TransactionMetadata | None:
        return self.shard.store.get(tid)

    def _remember(self, tid: str) -> None:
        """Every (producer id, epoch) an id had is a zombie once the id moves past it."""
        metadata = self._metadata(tid)
        if metadata is not None and metadata.producer_epoch >= 0:
            self.zombies[tid].add((metadata.producer_id, metadata.producer_epoch))

    def _write(self, metadata: TransactionMetadata, transit: object) -> None:
        fail, self.fail_next = self.fail_next, False
        self.shard.write(metadata, transit, fail=fail)  # type: ignore[arg-type]

    def _attempt(self, metadata: TransactionMetadata | None, call: object,
                 errors: tuple[type[Exception], ...] = EXPECTED) -> object:
        """Run ``call``; a refusal must be one of ``errors`` and change nothing."""
        before = copy.copy(metadata)
        try:
            return call()  # type: ignore[operator]
        except errors:
            assert metadata == before
            return None

    # -- rules ------------------------------------------------------------------------

    @rule()
    def next_write_fails(self) -> None:
        self.fail_next = True

    @rule(tid=ids, retry=st.sampled_from(["new instance", "recover", "answer lost"]))
    def init(self, tid: str, retry: str) -> None:
        """A new instance (no epoch), the instance recovering with its epoch (KIP-360),
        or a retry with the epoch it had before a bump whose answer it lost."""
        self._remember(tid)
        metadata = self.shard.metadata(tid)
        expected = None
        if retry == "recover" and metadata.producer_epoch >= 0:
            expected = ProducerIdAndEpoch(metadata.producer_id, metadata.producer_epoch)
        elif retry == "answer lost" and metadata.last_producer_epoch >= 0:
            expected = ProducerIdAndEpoch(metadata.producer_id, metadata.last_producer_epoch)
        # Once a transaction is open under the bumped epoch, the answer was not lost:
        # a "retry" with the epoch before is a zombie's.
        errors = EXPECTED + ((ProducerFencedError,) if retry == "answer lost"
                             and metadata.state is TxnState.ONGOING else ())
        transit = self._attempt(metadata, lambda: init_producer_id(
            metadata, 60_000, expected, self.shard.now_ms, lambda: next(self.shard.producer_ids)),
            errors)
        if transit is None:
            return
        if transit.state is TxnState.PREPARE_EPOCH_FENCE:  # type: ignore[attr-defined]
            abort = end_txn(metadata, tid, transit.producer_id,  # type: ignore[attr-defined]
                            transit.producer_epoch,  # type: ignore[attr-defined]
                            False, self.shard.now_ms, from_client=False)
            assert abort is not None
            transit = abort
        self._write(metadata, transit)

    @rule(tid=ids, parts=partitions)
    def add(self, tid: str, parts: list[tuple[str, int]]) -> None:
        metadata = self._metadata(tid)
        if metadata is None or metadata.producer_epoch < 0:
            return
        transit = self._attempt(metadata, lambda: add_partitions(
            metadata, tid, metadata.producer_id, metadata.producer_epoch, parts,
            self.shard.now_ms))
        if transit is not None:
            self._write(metadata, transit)

    @rule(tid=ids, commit=st.booleans(), opens=st.one_of(st.just([]), partitions),
          keep_epoch=st.booleans())
    def end(self, tid: str, commit: bool, opens: list[tuple[str, int]] | None = None,
            keep_epoch: bool = False) -> None:
        """EndTxn; with ``opens``, the next transaction begins in the same record;
        ``keep_epoch``: a Kafka client's (transaction version 1)."""
        if keep_epoch and opens:
            return
        metadata = self._metadata(tid)
        if metadata is None or metadata.producer_epoch < 0:
            return
        self._remember(tid)  # an end moves the id to its next epoch
        transit = self._attempt(metadata, lambda: end_txn(
            metadata, tid, metadata.producer_id, metadata.producer_epoch, commit,
            self.shard.now_ms, opens=opens or (), keep_epoch=keep_epoch))
        if transit is not None:
            self._write(metadata, transit)

    @rule(tid=ids)
    def markers_written(self, tid: str) -> None:
        metadata = self._metadata(tid)
        ended = None if metadata is None else metadata.completion_due()
        if metadata is None or ended is None:
            return
        transit = complete_txn(metadata, ended, self.shard.now_ms)
        if transit.state is TxnState.ONGOING:
            self.shard.apply(metadata, transit)  # as the coordinator: not written
        else:
            self._write(metadata, transit)

    @rule(ms=st.integers(1, 120_000))
    def time_passes(self, ms: int) -> None:
        self.shard.now_ms += ms

    @rule()
    def abort_timed_out_transactions(self) -> None:
        for late in self.shard.store.timed_out(self.shard.now_ms):
            self._remember(late.transactional_id)
            metadata = self._metadata(late.transactional_id)
            assert metadata is not None
            fence = abort_timed_out(metadata, late.producer_id)
            if metadata.completing is not None:
                # The previous transaction's markers are still being written (the next
                # one began at once): the coordinator fences it at a later round.
                assert fence is None
                continue
            assert fence is not None
            abort = end_txn(metadata, late.transactional_id, fence.producer_id,
                            fence.producer_epoch, False, self.shard.now_ms, from_client=False)
            assert abort is not None
            self._write(metadata, abort)

    @rule(tid=ids, commit=st.booleans(), parts=partitions, data=st.data())
    def zombie(self, tid: str, commit: bool, parts: list[tuple[str, int]],
               data: st.DataObject) -> None:
        """A fenced instance tries everything: it is refused and moves nothing."""
        metadata = self._metadata(tid)
        old = sorted(z for z in self.zombies[tid]
                     if metadata is not None and z != (metadata.producer_id,
                                                       metadata.producer_epoch))
        if metadata is None or not old:
            return
        pid, epoch = data.draw(st.sampled_from(old))
        fenced = (ProducerFencedError, InvalidProducerIdMappingError)
        # The epoch a client's end moved past may repeat that end (its answer was
        # lost): answered, or refused if it contradicts the outcome, never moving it.
        repeat = (pid, epoch) == (metadata.last_producer_id, metadata.last_producer_epoch)
        calls: list[tuple[Callable[[], object], tuple[type[Exception], ...]]] = [
            (lambda: add_partitions(metadata, tid, pid, epoch, parts, 1), fenced),
            (lambda: end_txn(metadata, tid, pid, epoch, commit, 1),
             fenced + ((InvalidTxnStateError,) if repeat else ()))]
        for call, refusals in calls:
            before = copy.copy(metadata)
            try:
                answer = call()
            except refusals:
                pass
            else:
                if answer is not None or not repeat:
                    raise AssertionError(f"zombie {pid}/{epoch} moved {before}")
            assert metadata == before
        if (pid, epoch) != (metadata.producer_id, metadata.last_producer_epoch):
            before = copy.copy(metadata)
            try:
                init_producer_id(metadata, 60_000, ProducerIdAndEpoch(pid, epoch), 1,
                                 lambda: next(self.shard.producer_ids))
            except (ProducerFencedError, ConcurrentTransactionsError):
                pass
            else:
                raise AssertionError(f"zombie {pid}/{epoch} re-initialised {before}")
            assert metadata == before
        assert set(verify_partitions(metadata, tid, pid, epoch, parts).values()) <= {
            ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_ID_MAPPING}

    @precondition(lambda self: self.shard.now_ms > 0)
    @rule(days=st.integers(0, 10))
    def expire_ids(self, days: int) -> None:
        now = self.shard.now_ms + days * 86_400_000
        for expiring in self.shard.store.expire(now):
            self._remember(expiring.transactional_id)
            self.shard.log.append(expiring.tombstone)
            assert self.shard.store.remove(expiring.transactional_id, expiring.transit)
        self.shard.now_ms = now

    # -- invariants -------------------------------------------------------------------

    @invariant()
    def transitions_are_kafkas(self) -> None:
        for before, after in self.shard.transitions:
            assert before.kafka_name in STRAND_TABLE[after.kafka_name], (before, after)

    @invariant()
    def epochs_never_decrease(self) -> None:
        for metadata in self.shard.store:
            seen = self.max_epoch.get(metadata.producer_id, -1)
            assert metadata.producer_epoch >= seen
            self.max_epoch[metadata.producer_id] = metadata.producer_epoch

    @invariant()
    def nothing_is_left_pending(self) -> None:
        assert all(not m.pending for m in self.shard.store)

    @invariant()
    def the_log_rebuilds_the_state(self) -> None:
        """A new owner loads exactly the state, but for a Completion whose markers
        are written and that no record since has dropped: it writes them again."""
        loaded = {m.transactional_id: m for m in self.shard.reloaded()}
        memory = {m.transactional_id: m for m in self.shard.store}
        assert loaded.keys() == memory.keys()
        for tid, metadata in memory.items():
            found = loaded[tid]
            if found.completing is not None and metadata.completing is None:
                assert metadata.state is TxnState.ONGOING  # finished in memory only
                found = copy.copy(found)
                found.completing = None
                found.last_update_ms = metadata.last_update_ms
            assert found.current() == metadata.current()
        assert {t for t, m in loaded.items() if m.completion_due() is not None} >= {
            t for t, m in memory.items() if m.completion_due() is not None}

    @invariant()
    def records_are_the_state(self) -> None:
        for metadata in self.shard.store:
            if metadata.producer_epoch >= 0:
                key = record(metadata.transactional_id, metadata.current()).key
                assert any(r.key == key for r in self.shard.log)


CoordinatorMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40,
                                                deadline=None)
TestCoordinatorMachine = CoordinatorMachine.TestCase


def test_a_timed_out_transaction_whose_predecessor_is_still_completing_waits() -> None:
    """Found by CI's run of the machine above: a transaction begun while its aborted
    predecessor's markers are still being written times out; the coordinator does not
    fence it until those markers are written (abort_timed_out answers None)."""
    machine = CoordinatorMachine()
    machine.start()
    machine.init(retry="new instance", tid="app-a")
    machine.add(parts=[("orders", 0)], tid="app-a")
    machine.end(commit=False, tid="app-a")
    machine.add(parts=[("orders", 0)], tid="app-a")
    machine.expire_ids(days=1)
    machine.abort_timed_out_transactions()
    machine.records_are_the_state()
    machine.the_log_rebuilds_the_state()
    machine.transitions_are_kafkas()
    machine.teardown()
