"""Producer state as pure code (issue 12, acceptance 5): the dedup window, epochs,
expiry, snapshot round trips and replay, checked against a small reference model."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strand.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    StrandError,
    TransactionCoordinatorFencedError,
)
from strand.log.producer_snapshot import CorruptSnapshotError, decode_snapshot, encode_snapshot
from strand.log.producer_state import (
    NUM_BATCHES_TO_RETAIN,
    AppendOrigin,
    BatchMetadata,
    ProducerAppendInfo,
    ProducerStateEntry,
    ProducerStateTable,
)
from strand.records.control import ControlType

SEQ_MAX = (1 << 31) - 1
NOW = 1_700_000_000_000
DAY = 86_400_000


@dataclass(frozen=True)
class Batch:
    """A producer batch as the partition sees it (what its header says)."""

    pid: int
    epoch: int
    first_seq: int
    count: int
    timestamp: int = NOW
    transactional: bool = False

    @property
    def last_seq(self) -> int:
        return (self.first_seq + self.count - 1) % (SEQ_MAX + 1)


class Leader:
    """The leader's use of the state: duplicate check, then checked append."""

    def __init__(self, table: ProducerStateTable | None = None) -> None:
        self.table = table or ProducerStateTable()
        self.log: list[tuple[Batch, int]] = []  # (batch, first offset) as written

    @property
    def end(self) -> int:
        return self.table.map_end_offset

    def append(self, batch: Batch) -> tuple[str, int]:
        """("written" | "duplicate", first offset) or raises the typed error."""
        entry = self.table.entry(batch.pid)
        if entry is not None:
            dup = entry.find_duplicate(batch.epoch, batch.first_seq, batch.last_seq)
            if dup is not None:
                return "duplicate", dup.first_offset
        info = self.table.prepare_update(batch.pid, AppendOrigin.CLIENT)
        apply(info, batch, self.end)
        self.table.update(info)
        self.log.append((batch, self.end))
        self.table.map_end_offset = self.end + batch.count
        return "written", self.log[-1][1]


def apply(info: ProducerAppendInfo, batch: Batch, first_offset: int) -> None:
    info.append_data_batch(epoch=batch.epoch, first_seq=batch.first_seq,
                           last_seq=batch.last_seq, max_timestamp=batch.timestamp,
                           first_offset=first_offset, last_offset=first_offset + batch.count - 1,
                           transactional=batch.transactional)


def replay(log: list[tuple[Batch, int]], table: ProducerStateTable | None = None,
           start: int = 0) -> ProducerStateTable:
    """A follower's (or recovery's) state: every batch applied unchecked."""
    table = table or ProducerStateTable(map_end_offset=start)
    for batch, offset in log:
        if offset < start:
            continue
        info = table.prepare_update(batch.pid, AppendOrigin.REPLICATION)
        apply(info, batch, offset)
        table.update(info)
        table.map_end_offset = offset + batch.count
    return table


# -- the reference model: Kafka's rules written as plainly as possible --------------------


@dataclass
class ModelProducer:
    epoch: int
    windows: list[tuple[int, int, int]] = field(default_factory=list)  # first/last seq, offset


class Model:
    def __init__(self) -> None:
        self.producers: dict[int, ModelProducer] = {}
        self.end = 0

    def append(self, b: Batch) -> tuple[str, int] | type[StrandError]:
        p = self.producers.get(b.pid)
        if p is not None and p.epoch == b.epoch:
            for first, last, offset in p.windows:
                if (first, last) == (b.first_seq, b.last_seq):
                    return "duplicate", offset
        if p is not None:
            if b.epoch < p.epoch:
                return InvalidProducerEpochError
            if b.epoch > p.epoch and b.first_seq != 0:
                return OutOfOrderSequenceError
            if b.epoch == p.epoch:
                last = p.windows[-1][1]
                if b.first_seq != (last + 1) % (SEQ_MAX + 1):
                    return OutOfOrderSequenceError
        if p is None or b.epoch != p.epoch:
            p = self.producers[b.pid] = ModelProducer(b.epoch)
        p.windows = [*p.windows, (b.first_seq, b.last_seq, self.end)][-5:]
        self.end += b.count
        return "written", p.windows[-1][2]


# -- what producers send: in order, retries, gaps, epoch bumps, zombies ------------------


@st.composite
def traffic(draw: st.DrawFn) -> list[Batch]:
    pids = draw(st.lists(st.integers(0, 2**40), min_size=1, max_size=3, unique=True))
    empty: list[Batch] = []
    state = {pid: (draw(st.integers(0, 3)), draw(st.sampled_from([0, 7, SEQ_MAX - 3])), empty)
             for pid in pids}
    out: list[Batch] = []
    for _ in range(draw(st.integers(1, 40))):
        pid = draw(st.sampled_from(pids))
        epoch, seq, sent = state[pid]
        kind = draw(st.sampled_from(
            ["next", "next", "next", "retry", "retry", "gap", "bump", "zombie", "any"]))
        count = draw(st.integers(1, 4))
        if kind == "retry" and sent:
            batch = draw(st.sampled_from(sent[-8:]))  # within the window of 5 or not
        elif kind == "gap":
            batch = Batch(pid, epoch, (seq + draw(st.integers(1, 3))) % (SEQ_MAX + 1), count)
        elif kind == "bump":
            epoch, seq = epoch + 1, 0
            batch = Batch(pid, epoch, draw(st.sampled_from([0, 0, 1, 5])), count)
        elif kind == "zombie":
            batch = Batch(pid, max(epoch - 1, 0), seq, count)
        elif kind == "any":
            batch = Batch(pid, draw(st.integers(0, 4)), draw(st.integers(0, 20)), count)
        else:
            batch = Batch(pid, epoch, seq, count)
        if batch.epoch == epoch and batch.first_seq == seq:
            seq = (batch.last_seq + 1) % (SEQ_MAX + 1)
            sent = [*sent, batch]
        state[pid] = (epoch, seq, sent)
        out.append(batch)
    return out


def run_leader(batches: list[Batch], leader: Leader | None = None) -> tuple[
        Leader, list[tuple[str, int] | type[StrandError]]]:
    leader = leader or Leader()
    outcomes: list[tuple[str, int] | type[StrandError]] = []
    for batch in batches:
        try:
            outcomes.append(leader.append(batch))
        except StrandError as exc:
            outcomes.append(type(exc))
    return leader, outcomes


PROPERTY = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(traffic())
def test_leader_accepts_exactly_what_the_model_accepts(batches: list[Batch]) -> None:
    model = Model()
    leader, outcomes = run_leader(batches)
    assert outcomes == [model.append(batch) for batch in batches]
    for pid, expected in model.producers.items():
        entry = leader.table.entry(pid)
        assert entry is not None and entry.producer_epoch == expected.epoch
        assert [(b.first_seq, b.last_seq, b.first_offset) for b in entry.batches] == \
            expected.windows


@PROPERTY
@given(traffic(), st.integers(0, NUM_BATCHES_TO_RETAIN - 1))
def test_every_batch_of_the_window_is_recognised_with_its_offsets(
        batches: list[Batch], back: int) -> None:
    leader, _ = run_leader(batches)
    for pid in {b.pid for b in batches}:
        entry = leader.table.entry(pid)
        if entry is None or back >= len(entry.batches):
            continue
        kept = entry.batches[-1 - back]
        retry = Batch(pid, entry.producer_epoch, kept.first_seq, kept.offset_delta + 1)
        end = leader.end
        assert leader.append(retry) == ("duplicate", kept.first_offset)
        assert leader.end == end  # nothing written


@PROPERTY
@given(traffic())
def test_a_follower_replaying_the_log_ends_in_the_leaders_state(batches: list[Batch]) -> None:
    leader, _ = run_leader(batches)
    assert replay(leader.log).producers == leader.table.producers


@PROPERTY
@given(traffic(), st.data())
def test_restart_from_any_snapshot_point_equals_never_restarting(
        batches: list[Batch], data: st.DataObject) -> None:
    leader, _ = run_leader(batches)
    cut = data.draw(st.integers(0, len(leader.log)))
    before = Leader()
    for batch, _ in leader.log[:cut]:
        before.append(batch)
    snapshot = encode_snapshot(list(before.table))
    restored = ProducerStateTable()
    restored.load(decode_snapshot(snapshot), before.end)
    rebuilt = replay(leader.log, restored, start=before.end)
    assert rebuilt.producers == leader.table.producers
    assert rebuilt.map_end_offset == leader.end
    # ... and the restarted leader goes on deciding as the other would.
    more = data.draw(traffic())
    _, went_on = run_leader(more, Leader(rebuilt))
    _, never_stopped = run_leader(more, leader)
    assert went_on == never_stopped


entries = st.builds(
    ProducerStateEntry,
    producer_id=st.integers(0, 2**63 - 1),
    producer_epoch=st.integers(-1, 2**15 - 1),
    batches=st.lists(st.builds(BatchMetadata, st.integers(0, SEQ_MAX), st.integers(0, 2**62),
                               st.integers(0, 1000), st.integers(-1, 2**62)),
                     max_size=NUM_BATCHES_TO_RETAIN).map(tuple),
    coordinator_epoch=st.integers(-1, 2**31 - 1),
    last_timestamp=st.integers(-1, 2**62),
    current_txn_first_offset=st.none() | st.integers(0, 2**62),
)


@PROPERTY
@given(st.lists(entries, max_size=20, unique_by=lambda e: e.producer_id))
def test_snapshot_round_trips(saved: list[ProducerStateEntry]) -> None:
    assert decode_snapshot(encode_snapshot(saved)) == saved


@PROPERTY
@given(st.lists(entries, min_size=1, max_size=5), st.data())
def test_a_damaged_snapshot_is_refused(saved: list[ProducerStateEntry],
                                       data: st.DataObject) -> None:
    raw = bytearray(encode_snapshot(saved))
    if data.draw(st.booleans()):
        position = data.draw(st.integers(0, len(raw) - 1))
        raw[position] ^= 1 << data.draw(st.integers(0, 7))
    else:
        del raw[data.draw(st.integers(0, len(raw) - 1)):]
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(raw))


@PROPERTY
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 3 * DAY), st.booleans()),
                max_size=10, unique_by=lambda t: t[0]),
       st.integers(1, 2 * DAY))
def test_expiry_forgets_idle_producers_without_open_transactions(
        producers: list[tuple[int, int, bool]], expiration_ms: int) -> None:
    table = ProducerStateTable()
    table.load([ProducerStateEntry(pid, 0, (BatchMetadata(0, 1, 0, NOW - idle),), -1,
                                   NOW - idle, 1 if open_txn else None)
                for pid, idle, open_txn in producers], 2)
    expired = table.remove_expired(NOW, expiration_ms)
    assert sorted(expired) == sorted(pid for pid, idle, open_txn in producers
                                     if idle >= expiration_ms and not open_txn)
    assert {e.producer_id for e in table} == {p for p, *_ in producers} - set(expired)


# -- the rules one by one ------------------------------------------------------------------


def test_unknown_producer_may_start_anywhere_then_must_follow_on() -> None:
    # Kafka >= 2.5 (KIP-360): no UNKNOWN_PRODUCER_ID for a producer the partition lost.
    leader = Leader()
    assert leader.append(Batch(1, 3, 42, 2)) == ("written", 0)
    with pytest.raises(OutOfOrderSequenceError, match="last sequence written is 43"):
        leader.append(Batch(1, 3, 45, 1))
    assert leader.append(Batch(1, 3, 44, 1)) == ("written", 2)


def test_sequences_wrap_after_int32_max() -> None:
    leader = Leader()
    leader.append(Batch(1, 0, SEQ_MAX - 1, 2))
    assert leader.append(Batch(1, 0, 0, 3)) == ("written", 2)
    assert leader.append(Batch(1, 0, SEQ_MAX - 1, 2)) == ("duplicate", 0)


def test_epochs_fence_old_producers_and_start_new_ones_at_zero() -> None:
    leader = Leader()
    leader.append(Batch(1, 5, 0, 3))
    with pytest.raises(InvalidProducerEpochError, match="older than its current epoch 5"):
        leader.append(Batch(1, 4, 3, 1))
    with pytest.raises(OutOfOrderSequenceError, match="new epoch 6 at sequence 3"):
        leader.append(Batch(1, 6, 3, 1))
    assert leader.append(Batch(1, 6, 0, 1)) == ("written", 3)
    # The old epoch's batches are forgotten: its retry is fenced, not a duplicate.
    with pytest.raises(InvalidProducerEpochError):
        leader.append(Batch(1, 5, 0, 3))


def test_replication_applies_what_a_leader_would_refuse() -> None:
    table = replay([(Batch(1, 5, 0, 1), 0), (Batch(1, 4, 9, 1), 1), (Batch(1, 4, 20, 1), 2)])
    entry = table.entry(1)
    assert entry is not None and entry.producer_epoch == 4 and entry.last_seq == 20


def test_transactions_open_with_a_transactional_batch_and_close_with_a_marker() -> None:
    leader = Leader()
    leader.append(Batch(1, 0, 0, 2, transactional=True))
    leader.append(Batch(1, 0, 2, 1, transactional=True))
    entry = leader.table.entry(1)
    assert entry is not None and entry.current_txn_first_offset == 0
    assert leader.table.first_undecided_offset() == 0
    with pytest.raises(InvalidTxnStateError, match="transaction begun at offset 0 is open"):
        leader.append(Batch(1, 0, 3, 1))
    info = leader.table.prepare_update(1, AppendOrigin.COORDINATOR)
    with pytest.raises(InvalidProducerEpochError):
        info.append_end_txn_marker(control_type=ControlType.COMMIT, coordinator_epoch=2,
                                   epoch=-1, offset=3, timestamp=NOW)
    done = info.append_end_txn_marker(control_type=ControlType.ABORT, coordinator_epoch=2,
                                      epoch=0, offset=3, timestamp=NOW)
    assert done is not None and (done.first_offset, done.last_offset, done.is_aborted) == (
        0, 3, True)
    leader.table.update(info)
    assert leader.table.first_undecided_offset() is None
    stale = leader.table.prepare_update(1, AppendOrigin.COORDINATOR)
    with pytest.raises(TransactionCoordinatorFencedError):
        stale.append_end_txn_marker(control_type=ControlType.COMMIT, coordinator_epoch=1,
                                    epoch=0, offset=4, timestamp=NOW)
    # The batches of the epoch survive the marker: a late retry is still a duplicate.
    assert leader.append(Batch(1, 0, 2, 1, transactional=True)) == ("duplicate", 2)


def test_an_epoch_bumped_by_a_marker_expects_sequence_zero() -> None:
    leader = Leader()
    leader.append(Batch(1, 0, 0, 1))
    info = leader.table.prepare_update(1, AppendOrigin.COORDINATOR)
    info.append_end_txn_marker(control_type=ControlType.ABORT, coordinator_epoch=0,
                               epoch=1, offset=1, timestamp=NOW)
    leader.table.update(info)
    with pytest.raises(OutOfOrderSequenceError):
        leader.append(Batch(1, 1, 1, 1))
    assert leader.append(Batch(1, 1, 0, 1)) == ("written", 1)
