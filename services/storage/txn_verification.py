"""KIP-890 part 1: a leader takes a transactional batch only for a partition that is
part of the producer's open transaction.

When a (producer id, epoch) writes a transactional batch to a partition where it has
no open transaction, the leader first asks the transaction coordinator (Kafka's
AddPartitionsToTxn with ``verify_only``) whether the partition was added to the
producer's ongoing transaction. The answer is remembered as a guard on the replica
(Kafka's ``VerificationGuard``); a transaction marker for that producer removes it,
so a late request of an aborted transaction, verified before its ABORT marker,
cannot open a new transaction on the partition afterwards: it is refused with
INVALID_TXN_STATE. Once the transaction is open on the partition, its later batches
need no verification.

The coordinator is reached through a
:class:`~strand.coordination.txn_verifier.TxnVerifier`: the gRPC one is
:class:`strand.cluster.transaction_calls.CoordinatorTxnVerifier` (an unreachable coordinator
refuses the write with COORDINATOR_NOT_AVAILABLE: the producer retries);
``--transaction-partition-verification off`` (Kafka's
``transaction.partition.verification.enable=false``) turns the check off.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from strand.errors import InvalidRequestError
from strand.records.batch import HEADER_SIZE, NO_PRODUCER_ID, read_header


@dataclass(frozen=True, slots=True)
class TxnWriter:
    """The transactional producer of a request (its first transactional data batch)."""

    producer_id: int
    producer_epoch: int


@dataclass(slots=True)
class Turn:
    """A request's place among its producer's requests to one replica."""

    producer_id: int
    previous: asyncio.Future[None] | None  # the turn of the request before, if pending
    mine: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())


class ProducerTurns:
    """Keeps a producer's appends to one replica in arrival order although some must
    first wait for the coordinator. The requests of a transaction's first batches on a
    partition are verified at once (a producer pipelines up to 5), and the answers can
    come back in any order: appended in that order, a later batch would be written
    first and the earlier ones refused as out of sequence, failing the transaction.
    Kafka gets the order from its one-request-at-a-time connections. Here each request
    takes a turn on arrival and queues for the append lock only once the request
    before it holds it (or has given up)."""

    def __init__(self) -> None:
        self._last: dict[int, asyncio.Future[None]] = {}

    def take(self, producer_id: int) -> Turn:
        """Call on arrival, before any wait."""
        turn = Turn(producer_id, self._last.get(producer_id))
        self._last[producer_id] = turn.mine
        return turn

    @staticmethod
    async def wait(turn: Turn) -> None:
        """Until the request before this one holds the append lock (or gave up)."""
        if turn.previous is not None:
            await turn.previous

    def passed(self, turn: Turn) -> None:
        """This request holds the append lock, or gave up: the next may queue."""
        if not turn.mine.done():
            turn.mine.set_result(None)
        if self._last.get(turn.producer_id) is turn.mine:
            del self._last[turn.producer_id]


class MarkerArrivals:
    """Wakes the appends held for a transaction marker on one replica.

    An epoch per transaction (services.transactions.txn_metadata): a producer may
    send its next transaction's batches, under the next epoch, while the previous
    transaction's markers are still being written. A partition where that previous
    transaction is still open holds such a batch until its marker is appended
    (appended first, the batch would join the previous transaction and commit with
    it). A marker of an older epoch than the producer has here then changes nothing:
    the transaction it ended is not open here (see ``stale_marker``)."""

    def __init__(self) -> None:
        self._next: asyncio.Future[None] | None = None

    def appended(self) -> None:
        """A marker was appended: every held append looks again."""
        if self._next is not None and not self._next.done():
            self._next.set_result(None)
        self._next = None

    async def wait(self, timeout_s: float) -> None:
        """Until the next marker is appended, or ``timeout_s`` (TimeoutError)."""
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
        await asyncio.wait_for(asyncio.shield(self._next), timeout_s)


def transactional_writer(records: bytes) -> TxnWriter | None:
    """The producer of the first transactional data batch of ``records``, if any. Reads
    headers only; framing errors are left to the append's validation."""
    view = memoryview(records)
    pos = 0
    while len(view) - pos >= HEADER_SIZE:
        header = read_header(view, pos)
        if (header.is_transactional and not header.is_control
                and header.producer_id != NO_PRODUCER_ID):
            return TxnWriter(header.producer_id, header.producer_epoch)
        if header.size_in_bytes < HEADER_SIZE:
            return None
        pos += header.size_in_bytes
    return None


def require_transactional_id(transactional_id: str, writer: TxnWriter, where: str) -> None:
    if not transactional_id:
        raise InvalidRequestError(
            f"transactional batch of producer {writer.producer_id} for {where} comes "
            "without the producer's transactional id: a transactional producer sends it "
            "with every produce request")
