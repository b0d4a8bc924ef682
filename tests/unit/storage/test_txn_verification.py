"""KIP-890 part 1 on the leader's produce path: a transactional batch for a partition
where the producer has no open transaction is taken only once the coordinator
confirmed the partition is in the transaction, and not at all if a marker for the
producer came between that confirmation and the append (a late request of an
aborted transaction). A real partition log and replica, no processes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from services.storage.disk import DiskExecutor
from services.storage.produce import Appender, AppendResult, PartitionAppend
from strand.errors import CoordinatorNotAvailableError, ErrorCode, InvalidTxnStateError
from strand.log.producer_state import AppendOrigin
from strand.records import BatchBuilder
from strand.records.control import ControlType, build_end_txn_marker
from tests.unit.storage.test_fetch_path import TOPIC, Leadership, with_leadership

PID, EPOCH = 77, 2
TXN_ID = "orders-pipeline"


def txn_batch(seq: int) -> bytes:
    builder = BatchBuilder(producer_id=PID, producer_epoch=EPOCH, base_sequence=seq,
                           transactional=True)
    builder.append(b"v%d" % seq, timestamp=1_700_000_000_000)
    return builder.build()


def abort_marker() -> bytes:
    return build_end_txn_marker(ControlType.ABORT, producer_id=PID, producer_epoch=EPOCH,
                                coordinator_epoch=0, timestamp=1_700_000_000_000)


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
