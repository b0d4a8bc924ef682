"""KIP-890 part 1 on the leader's produce path: a transactional batch for a partition
where the producer has no open transaction is taken only once the coordinator
confirmed the partition is in the transaction, and not at all if a marker for the
producer came between that confirmation and the append (a late request of an
aborted transaction). A real partition log and replica, no processes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from services.storage.disk import DiskExecutor
from services.storage.produce import Appender, AppendResult, PartitionAppend
from services.storage.txn_markers import MarkerWriter, TxnMarker
from strand.errors import CoordinatorNotAvailableError, ErrorCode, InvalidTxnStateError
from strand.log.producer_state import AppendOrigin
from strand.records import BatchBuilder
from strand.records.control import ControlType, build_end_txn_marker
from tests.unit.storage.test_fetch_path import TOPIC, Leadership, with_leadership

PID, EPOCH = 77, 2
TXN_ID = "orders-pipeline"


def txn_batch(seq: int, epoch: int = EPOCH) -> bytes:
    builder = BatchBuilder(producer_id=PID, producer_epoch=epoch, base_sequence=seq,
                           transactional=True)
    builder.append(b"v%d" % seq, timestamp=1_700_000_000_000)
    return builder.build()


def abort_marker(epoch: int = EPOCH, control: ControlType = ControlType.ABORT) -> bytes:
    return build_end_txn_marker(control, producer_id=PID, producer_epoch=epoch,
                                coordinator_epoch=0, timestamp=1_700_000_000_000)


async def write_marker(appender: Appender, records: bytes) -> AppendResult:
    (result,) = await appender.append(1, [PartitionAppend(TOPIC, 0, records,
                                                          AppendOrigin.COORDINATOR)])
    return result


class Coordinator:
    """A verifier recording its calls; ``before_answer`` runs before it confirms."""

    def __init__(self, in_txn: bool = True) -> None:
        self.in_txn = in_txn
        self.calls: list[tuple[str, int, int, str, int]] = []
        self.appender: Appender | None = None
        self.abort_before_answer = False

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     topic: str, partition: int) -> None:
        self.calls.append((transactional_id, producer_id, producer_epoch, topic, partition))
        if self.abort_before_answer and self.appender is not None:
            (result,) = await self.appender.append(1, [PartitionAppend(
                TOPIC, 0, abort_marker(), AppendOrigin.COORDINATOR)])
            assert result.error_code == 0, result.error_message
        if not self.in_txn:
            raise InvalidTxnStateError(f"{topic}-{partition} is not in the transaction")


async def produce(appender: Appender, records: bytes, txn_id: str = TXN_ID) -> AppendResult:
    (result,) = await appender.append(1, [PartitionAppend(TOPIC, 0, records,
                                                          transactional_id=txn_id)])
    return result


Body = Callable[[Leadership, Appender], Awaitable[None]]


def run(tmp: Path, coordinator: Coordinator | Unreachable, body: Body) -> None:
    async def wrapped(leading: Leadership) -> None:
        appender = Appender(leading.manager, DiskExecutor(1), coordinator)
        if isinstance(coordinator, Coordinator):
            coordinator.appender = appender
        await body(leading, appender)

    with_leadership(tmp, wrapped)


def test_the_first_batch_of_a_transaction_is_verified_once(tmp_path: Path) -> None:
    coordinator = Coordinator()

    async def body(leading: Leadership, appender: Appender) -> None:
        assert (await produce(appender, txn_batch(0))).error_code == 0
        assert (await produce(appender, txn_batch(1))).error_code == 0
        assert coordinator.calls == [(TXN_ID, PID, EPOCH, TOPIC, 0)]
        assert leading.log.log_end_offset == 2
        assert leading.replica.verified_txns == {}

    run(tmp_path, coordinator, body)


def test_a_partition_outside_the_transaction_is_refused(tmp_path: Path) -> None:
    async def body(leading: Leadership, appender: Appender) -> None:
        result = await produce(appender, txn_batch(0))
        assert result.error_code == ErrorCode.INVALID_TXN_STATE
        assert leading.log.log_end_offset == 0

    run(tmp_path, Coordinator(in_txn=False), body)


def test_a_marker_between_verification_and_append_refuses_the_late_write(
        tmp_path: Path) -> None:
    coordinator = Coordinator()

    async def body(leading: Leadership, appender: Appender) -> None:
        assert (await produce(appender, txn_batch(0))).error_code == 0
        # The transaction is aborted; a late request of it is verified (the
        # coordinator answered before its ABORT), but the marker lands first.
        (marker,) = await appender.append(1, [PartitionAppend(
            TOPIC, 0, abort_marker(), AppendOrigin.COORDINATOR)])
        assert marker.error_code == 0
        coordinator.abort_before_answer = True
        late = await produce(appender, txn_batch(1))
        assert late.error_code == ErrorCode.INVALID_TXN_STATE, late.error_message
        assert "ended while this write was being verified" in late.error_message
        assert leading.log.log_end_offset == 3  # batch, marker, marker: no late batch
        assert not leading.log.open_transaction(PID, EPOCH)

    run(tmp_path, coordinator, body)


class Slow(Coordinator):
    """Confirms each verification only when the test releases it."""

    def __init__(self, in_txn: bool = True) -> None:
        super().__init__(in_txn)
        self.asked: list[asyncio.Event] = []
        self.release: list[asyncio.Event] = []
        self.refuse: set[int] = set()  # which calls (by index) the coordinator refuses

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     topic: str, partition: int) -> None:
        index = len(self.calls)
        self.calls.append((transactional_id, producer_id, producer_epoch, topic, partition))
        release = asyncio.Event()
        self.release.append(release)
        self.asked[index].set()
        await release.wait()
        if index in self.refuse:
            raise CoordinatorNotAvailableError("the transaction coordinator did not answer")


async def pipelined(appender: Appender, coordinator: Slow, answers: list[int]
                    ) -> list[AppendResult]:
    """Two batches of one producer's new transaction in flight at once (a producer
    pipelines up to 5 requests per partition), both waiting for the coordinator;
    it answers in the order ``answers`` gives."""
    coordinator.asked = [asyncio.Event(), asyncio.Event()]
    first = asyncio.ensure_future(produce(appender, txn_batch(0)))
    await coordinator.asked[0].wait()
    second = asyncio.ensure_future(produce(appender, txn_batch(1)))
    await coordinator.asked[1].wait()
    for index in answers:
        coordinator.release[index].set()
        await asyncio.sleep(0)
    return [await first, await second]


def test_two_pipelined_batches_of_a_new_transaction_are_both_taken(tmp_path: Path) -> None:
    """One verification guard per producer, shared (Kafka's VerificationGuard): the
    second request must not invalidate the first one's confirmation."""
    coordinator = Slow()

    async def body(leading: Leadership, appender: Appender) -> None:
        results = await pipelined(appender, coordinator, [0, 1])
        assert [r.error_code for r in results] == [0, 0], results
        assert leading.log.log_end_offset == 2
        assert leading.log.open_transaction(PID, EPOCH)
        assert leading.replica.verified_txns == {}

    run(tmp_path, coordinator, body)


def test_answers_in_reverse_order_keep_the_arrival_order(tmp_path: Path) -> None:
    """The coordinator confirms the second request first: its batch still waits for
    the first one's, so the log holds them in the order the producer sent them (and
    the first is not refused as out of sequence, which would fail the transaction)."""
    coordinator = Slow()

    async def body(leading: Leadership, appender: Appender) -> None:
        results = await pipelined(appender, coordinator, [1, 0])
        assert [r.error_code for r in results] == [0, 0], results
        assert [r.base_offset for r in results] == [0, 1]
        assert leading.log.producer_state()[PID].last_seq == 1
        assert leading.replica.producer_turns._last == {}

    run(tmp_path, coordinator, body)


def test_a_failed_verification_leaves_a_pipelined_one_valid(tmp_path: Path) -> None:
    coordinator = Slow()
    coordinator.refuse = {0}

    async def body(leading: Leadership, appender: Appender) -> None:
        first, second = await pipelined(appender, coordinator, [0, 1])
        assert first.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert second.error_code == 0, second.error_message
        assert leading.log.log_end_offset == 1
        assert leading.replica.verified_txns == {}

    run(tmp_path, coordinator, body)


def test_a_marker_ends_every_pending_verification(tmp_path: Path) -> None:
    coordinator = Slow()

    async def body(leading: Leadership, appender: Appender) -> None:
        coordinator.asked = [asyncio.Event(), asyncio.Event()]
        first = asyncio.ensure_future(produce(appender, txn_batch(0)))
        await coordinator.asked[0].wait()
        second = asyncio.ensure_future(produce(appender, txn_batch(1)))
        await coordinator.asked[1].wait()
        (marker,) = await appender.append(1, [PartitionAppend(
            TOPIC, 0, abort_marker(), AppendOrigin.COORDINATOR)])
        assert marker.error_code == 0
        for release in coordinator.release:
            release.set()
        for late in (await first, await second):
            assert late.error_code == ErrorCode.INVALID_TXN_STATE, late.error_message
        assert leading.log.log_end_offset == 1  # the marker alone
        assert leading.replica.verified_txns == {}

    run(tmp_path, coordinator, body)


class Unreachable:
    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     topic: str, partition: int) -> None:
        raise CoordinatorNotAvailableError("the transaction coordinator did not answer")


def test_without_transactional_id_or_coordinator_the_write_is_refused(tmp_path: Path) -> None:
    async def body(leading: Leadership, appender: Appender) -> None:
        missing = await produce(appender, txn_batch(0), txn_id="")
        assert missing.error_code == ErrorCode.INVALID_REQUEST
        unreachable = await produce(appender, txn_batch(0))
        assert unreachable.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert "did not answer" in unreachable.error_message
        assert leading.log.log_end_offset == 0

    run(tmp_path, Unreachable(), body)


def test_the_next_epoch_waits_for_the_previous_transactions_marker(tmp_path: Path) -> None:
    """An epoch per transaction: the next transaction's batch (epoch + 1) reaches the
    partition before the previous transaction's COMMIT marker. It is held until the
    marker is appended, so it does not join (and commit with) that transaction."""
    coordinator = Coordinator()

    async def body(leading: Leadership, appender: Appender) -> None:
        assert (await produce(appender, txn_batch(0))).error_code == 0
        following = asyncio.ensure_future(produce(appender, txn_batch(0, EPOCH + 1)))
        await asyncio.sleep(0.05)
        assert not following.done() and leading.log.log_end_offset == 1
        marker = await write_marker(appender, abort_marker(control=ControlType.COMMIT))
        assert marker.error_code == 0 and marker.base_offset == 1
        result = await following
        assert result.error_code == 0 and result.base_offset == 2, result
        state = leading.log.producer_state()[PID]
        assert (state.producer_epoch, state.current_txn_first_offset) == (EPOCH + 1, 2)
        # both epochs were verified, the second while its batch was held
        assert [c[2] for c in coordinator.calls] == [EPOCH, EPOCH + 1]

    run(tmp_path, coordinator, body)


def test_a_held_batch_gives_up_with_a_retriable_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("services.storage.produce.MARKER_HOLD_S", 0.05)

    async def body(leading: Leadership, appender: Appender) -> None:
        assert (await produce(appender, txn_batch(0))).error_code == 0
        held = await produce(appender, txn_batch(0, EPOCH + 1))
        assert held.error_code == ErrorCode.CONCURRENT_TRANSACTIONS, held
        assert "waiting for its marker" in held.error_message
        assert leading.log.log_end_offset == 1  # nothing written

    run(tmp_path, Coordinator(), body)


def test_a_marker_older_than_the_producers_epoch_changes_nothing(tmp_path: Path) -> None:
    """The previous transaction had the partition but wrote nothing to it: the next
    epoch's batch opens its transaction at once, and the older marker, arriving
    after, must not end that transaction: it is answered and not written."""
    async def body(leading: Leadership, appender: Appender) -> None:
        assert (await produce(appender, txn_batch(0, EPOCH + 1))).error_code == 0
        stale = await write_marker(appender, abort_marker(EPOCH, ControlType.COMMIT))
        assert stale.error_code == 0 and stale.base_offset == -1, stale
        assert leading.log.log_end_offset == 1
        state = leading.log.producer_state()[PID]
        assert (state.producer_epoch, state.current_txn_first_offset) == (EPOCH + 1, 0)
        # a repeated marker of the current epoch is still written (and ends it)
        current = await write_marker(appender, abort_marker(EPOCH + 1))
        assert current.error_code == 0 and current.base_offset == 1

    run(tmp_path, Coordinator(), body)


def test_an_older_marker_leaves_the_next_epochs_verification(tmp_path: Path) -> None:
    """A marker of the previous epoch, appended while the next epoch's first batch is
    being verified, does not void that verification (one of the same or a newer
    epoch does: test_a_marker_between_verification_and_append_refuses_the_late_write)."""
    coordinator = Slow()

    async def body(leading: Leadership, appender: Appender) -> None:
        coordinator.asked = [asyncio.Event()]
        following = asyncio.ensure_future(produce(appender, txn_batch(0, EPOCH + 1)))
        await coordinator.asked[0].wait()
        marker = await write_marker(appender, abort_marker(EPOCH, ControlType.COMMIT))
        assert marker.error_code == 0
        coordinator.release[0].set()
        result = await following
        assert result.error_code == 0, result.error_message

    run(tmp_path, coordinator, body)


async def write_marker_opening(appender: Appender, records: bytes,
                               next_epoch: int) -> AppendResult:
    """A marker that says the producer's next transaction is open here."""
    (result,) = await appender.append(1, [PartitionAppend(
        TOPIC, 0, records, AppendOrigin.COORDINATOR, next_producer_epoch=next_epoch)])
    return result


def test_a_marker_opening_the_next_transaction_answers_its_verification(
        tmp_path: Path) -> None:
    coordinator = Coordinator()

    async def body(leading: Leadership, appender: Appender) -> None:
        assert (await produce(appender, txn_batch(0))).error_code == 0
        commit = abort_marker(control=ControlType.COMMIT)
        assert (await write_marker_opening(appender, commit, EPOCH + 1)).error_code == 0
        # the next epoch's first batch is taken without asking the coordinator
        assert (await produce(appender, txn_batch(0, EPOCH + 1))).error_code == 0
        assert coordinator.calls == [(TXN_ID, PID, EPOCH, TOPIC, 0)]
        assert leading.log.open_transaction(PID, EPOCH + 1)
        assert leading.replica.verified_txns == {}

    run(tmp_path, coordinator, body)


def test_the_answer_a_marker_brought_ends_with_that_transaction(tmp_path: Path) -> None:
    """The opened transaction is aborted unused (its ABORT marker): a late write of it
    must be verified again, and is refused. Nor does the answer outlive the leader
    epoch it was given in."""
    coordinator = Coordinator(in_txn=False)

    async def body(leading: Leadership, appender: Appender) -> None:
        commit = abort_marker(control=ControlType.COMMIT)
        assert (await write_marker_opening(appender, commit, EPOCH + 1)).error_code == 0
        assert leading.replica.verified_txns[PID].epoch == EPOCH + 1
        assert (await write_marker(appender, abort_marker(EPOCH + 1))).error_code == 0
        late = await produce(appender, txn_batch(0, EPOCH + 1))
        assert late.error_code == ErrorCode.INVALID_TXN_STATE
        assert len(coordinator.calls) == 1
        # another leader epoch: the answer is asked for again
        again = abort_marker(EPOCH + 1, ControlType.COMMIT)
        assert (await write_marker_opening(appender, again, EPOCH + 2)).error_code == 0
        leading.replica.verified_txns[PID].confirmed_in = -5
        refused = await produce(appender, txn_batch(0, EPOCH + 2))
        assert refused.error_code == ErrorCode.INVALID_TXN_STATE
        assert len(coordinator.calls) == 2

    run(tmp_path, coordinator, body)


def test_a_write_asking_when_the_opening_marker_lands_keeps_its_answer(
        tmp_path: Path) -> None:
    """The next epoch's first batch came before the marker and asked the coordinator;
    the marker that opens its transaction must not void that question's answer."""
    coordinator = Slow()

    async def body(leading: Leadership, appender: Appender) -> None:
        coordinator.asked = [asyncio.Event()]
        asking = asyncio.ensure_future(produce(appender, txn_batch(0, EPOCH + 1)))
        await coordinator.asked[0].wait()
        commit = abort_marker(control=ControlType.COMMIT)
        assert (await write_marker_opening(appender, commit, EPOCH + 1)).error_code == 0
        coordinator.release[0].set()
        assert (await asking).error_code == 0
        assert leading.log.open_transaction(PID, EPOCH + 1)

    run(tmp_path, coordinator, body)


def test_a_marker_out_of_the_fields_range_fails_alone(tmp_path: Path) -> None:
    """A WriteTxnMarkers request (the gateway's KIP-664 abort) naming an epoch past
    int16 gets a typed error on its own partitions; the other markers are written."""
    coordinator = Coordinator()

    async def body(leading: Leadership, appender: Appender) -> None:
        writer = MarkerWriter(appender)
        bad, good = (TxnMarker(PID, epoch, False, 0, [(TOPIC, 0)]) for epoch in (40_000, 1))
        # (this harness's followers never fetch: the good one is appended, then its
        # acks=all wait times out)
        (refused,), (written,) = await writer.write([bad, good], timeout_ms=100)
        assert refused.error_code == ErrorCode.INVALID_RECORD, refused
        assert "out of range" in refused.error_message
        assert written.error_code in (0, ErrorCode.REQUEST_TIMED_OUT), written
        assert leading.log.log_end_offset == 1

    run(tmp_path, coordinator, body)
