"""One partition replica hosted by this node: its open log and its metadata record,
plus what the event loop needs to share the log with disk threads.

Everything here runs on the event loop (no locks). Disk work happens in threads
(:mod:`services.storage.disk`), accounted to the replica so that the log is closed
or deleted only once no thread uses it any more.
"""

from __future__ import annotations

import asyncio
import bisect
from collections import deque
from collections.abc import Callable, Collection

from services.storage.append_traces import AppendTraces
from services.storage.leader_state import LeaderState
from services.storage.txn_verification import MarkerArrivals, ProducerTurns
from strand.cluster.model import PartitionRecord
from strand.errors import NotLeaderOrFollowerError, StorageError
from strand.log.log import PartitionLog


class VerificationGuard:
    """One producer's pending KIP-890 verification on a replica (Kafka's
    VerificationGuard). The requests of its epoch that are verified at once share it
    (a producer pipelines several batches to a partition): one request's question
    must not void another's answer. ``holders`` counts those not yet refused.

    ``confirmed_in``: set when no question is needed — the marker that ended the
    producer's previous transaction here carried the coordinator's word that the
    transaction of ``epoch`` is open and has this partition; valid in that leader
    epoch only (a leader that lost the partition meanwhile may have missed the
    transaction's end)."""

    __slots__ = ("confirmed_in", "epoch", "holders")

    def __init__(self, epoch: int, confirmed_in: int | None = None) -> None:
        self.epoch = epoch
        self.holders = 0
        self.confirmed_in = confirmed_in


class Replica:
    def __init__(self, topic_id: str, record: PartitionRecord, log: PartitionLog) -> None:
        self.topic_id = topic_id
        self.record = record
        self.log = log
        # Appends to one partition run one at a time and in arrival order.
        self.append_lock = asyncio.Lock()
        self.closing = False
        # Bytes that became readable by consumers (below the high watermark) and bytes
        # appended, since the replica was opened: cheap measures of new data for
        # waiting consumer and follower fetches (no read needed to know there is some).
        self.visible_bytes = 0
        self.appended_bytes = 0
        # The same below the last stable offset (read_committed consumers): an open
        # transaction holds it back while the high watermark moves on, and such
        # consumers must not wake for bytes they cannot read yet.
        self.stable_bytes = 0
        # (log end offset after an append, appended_bytes then), for appends not yet
        # below the high watermark (the last stable offset): how many bytes a move of
        # it makes readable.
        self._append_marks: deque[tuple[int, int]] = deque()
        self._stable_marks: deque[tuple[int, int]] = deque()
        # While this node leads the partition: its followers' state (None otherwise).
        self.leader_state: LeaderState | None = None
        # acks=all appends waiting for the high watermark: (required offset, future).
        self._hw_waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._hw_waiter_seq = 0
        # Bumped when leadership or epoch change or the replica closes: a waiting
        # fetch answers at once then, with the error its partitions now deserve.
        self.state_version = 0
        # Why this node cannot serve the replica's data (a failed disk, a damaged
        # batch) until services.storage.repair has repaired it, None otherwise: it
        # then follows nobody, so it cannot rejoin the ISR with what it holds.
        self.out_of_service: str | None = None
        # KIP-890: producer id -> the guard of its transaction's verification with the
        # coordinator, until a batch opens the transaction here or a marker ends it
        # (services.storage.txn_verification).
        self.verified_txns: dict[int, VerificationGuard] = {}
        # A producer's appends keep their arrival order across those verifications.
        self.producer_turns = ProducerTurns()
        # As leader: the trace context of appends not yet replicated (append_traces).
        self.append_traces = AppendTraces()
        # Appends of a producer's next epoch wait here for its previous transaction's
        # marker (an epoch per transaction).
        self.marker_arrivals = MarkerArrivals()
        # (high watermark, log start offset) last written to the offsets checkpoint.
        self.checkpointed: tuple[int, int] = (-1, -1)
        self._waiters: set[asyncio.Future[None]] = set()
        self._jobs = 0
        self._idle: asyncio.Event | None = None

    @property
    def topic(self) -> str:
        return self.record.topic

    @property
    def partition(self) -> int:
        return self.record.partition

    def is_leader(self, node_id: int) -> bool:
        return not self.closing and self.record.leader == node_id

    # -- metadata -----------------------------------------------------------------------------

    def set_record(self, record: PartitionRecord) -> bool:
        """Adopt a newer record; returns whether leadership or its epoch changed."""
        old = self.record
        self.record = record
        changed = (old.leader, old.leader_epoch) != (record.leader, record.leader_epoch)
        if changed:
            self.state_version += 1
            self.wake()
        return changed

    def begin_close(self) -> None:
        """Refuse new work and wake the fetches that wait on this replica."""
        if not self.closing:
            self.closing = True
            self.state_version += 1
            self.leader_state = None
            self.fail_high_watermark_waiters(NotLeaderOrFollowerError(
                f"{self.topic}-{self.partition} is no longer hosted here"))
            self.wake()

    # -- waiting fetches ----------------------------------------------------------------------

    def add_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.add(waiter)

    def discard_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.discard(waiter)

    def wake(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def appended(self, log_end_offset: int, size_bytes: int) -> None:
        """New data at the end of the log: followers may fetch it (not yet consumers)."""
        self.appended_bytes += size_bytes
        self._append_marks.append((log_end_offset, self.appended_bytes))
        self._stable_marks.append((log_end_offset, self.appended_bytes))
        self._advance_stable()  # a marker may end a transaction already below the HW
        self.wake()

    def _advance_stable(self) -> bool:
        marks = self._stable_marks
        stable = self.stable_bytes
        last_stable_offset = self.log.last_stable_offset
        while marks and marks[0][0] <= last_stable_offset:
            stable = marks.popleft()[1]
        moved = stable != self.stable_bytes
        self.stable_bytes = stable
        return moved

    def high_watermark_moved(self, high_watermark: int) -> None:
        """Data below ``high_watermark`` is committed: consumers may read it, and acks=all
        appends up to it complete."""
        marks = self._append_marks
        visible = self.visible_bytes
        while marks and marks[0][0] <= high_watermark:
            visible = marks.popleft()[1]
        moved = self._advance_stable()
        if visible != self.visible_bytes or moved:
            self.visible_bytes = visible
            self.wake()
        waiters = self._hw_waiters
        done = 0
        while done < len(waiters) and waiters[done][0] <= high_watermark:
            future = waiters[done][2]
            if not future.done():
                future.set_result(None)
            done += 1
        if done:
            del waiters[:done]

    def wait_for_high_watermark(self, required_offset: int) -> asyncio.Future[None]:
        """A future done once the high watermark reaches ``required_offset``."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._hw_waiter_seq += 1
        bisect.insort(self._hw_waiters, (required_offset, self._hw_waiter_seq, future))
        return future

    def fail_high_watermark_waiters(self, exc: BaseException) -> None:
        """Leadership moved (or the replica closes): parked acks=all appends fail."""
        waiters, self._hw_waiters = self._hw_waiters, []
        for _, _, future in waiters:
            if not future.done():
                future.set_exception(exc)

    # -- disk jobs ----------------------------------------------------------------------------

    def job_started(self) -> None:
        if self.closing:
            raise StorageError(f"{self.topic}-{self.partition} is closing")
        self._jobs += 1

    def job_finished(self) -> None:
        self._jobs -= 1
        if self._jobs == 0 and self._idle is not None:
            self._idle.set()

    async def idle(self) -> None:
        """Return once no disk job uses the log (call after :meth:`begin_close`)."""
        while self._jobs:
            self._idle = asyncio.Event()
            await self._idle.wait()


async def wait_on_replicas(replicas: Collection[Replica], enough: Callable[[], bool],
                           deadline: float, stopping: Callable[[], bool],
                           versions: dict[Replica, int] | None = None) -> None:
    """Wait (event driven, no polling) until ``enough()`` holds, a replica's state
    changes (leadership, epoch, closing) from ``versions`` (default: now),
    ``stopping()``, or the loop time ``deadline``: the long poll of consumer and
    follower fetches."""
    loop = asyncio.get_running_loop()
    if versions is None:
        versions = {replica: replica.state_version for replica in replicas}
    while not stopping():
        if any(replica.state_version != version for replica, version in versions.items()):
            return
        if enough():
            return
        remaining = deadline - loop.time()
        if remaining <= 0:
            return
        waiter: asyncio.Future[None] = loop.create_future()
        for replica in replicas:
            replica.add_waiter(waiter)
        try:
            await asyncio.wait((waiter,), timeout=remaining)
        finally:
            for replica in replicas:
                replica.discard_waiter(waiter)
            waiter.cancel()
