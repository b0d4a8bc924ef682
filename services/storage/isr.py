"""ISR changes proposed by this node for the partitions it leads (docs/architecture.md §3).

* Shrink: every ``replica.lag.time.max.ms`` / 2, followers of the ISR that have not
  been caught up for longer than ``replica.lag.time.max.ms`` are proposed out.
* Expand: when a follower outside the ISR reaches the high watermark (and the
  start of the current leader epoch), it is proposed in.

A proposal goes to the active controller (AlterPartition), which applies it with
compare-and-swap on the partition epoch; one proposal per partition is in flight at
a time. An accepted change is applied to the leader's state at once (the etcd watch
brings the same record a little later); a refused one is dropped, and the next
metadata update or check proposes again from fresh state.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from services.storage.broker_metrics import BrokerMetrics
from services.storage.replica import Replica
from services.storage.replica_manager import ReplicaManager
from strand.errors import ErrorCode

log = logging.getLogger(__name__)

# After a refused or lost proposal, the next one waits this long (the metadata that
# explains the refusal usually arrives meanwhile).
REFUSED_BACKOFF_MS = 500.0


@dataclass(frozen=True, slots=True)
class IsrProposal:
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class IsrAnswer:
    topic: str
    partition: int
    error_code: int
    error_message: str = ""
    leader: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[int, ...] = ()


class ControllerClient(Protocol):
    """Reaches the active controller (gRPC lives in services.storage.peers)."""

    async def alter_partition(self, broker_id: int,
                              proposals: Sequence[IsrProposal]) -> Sequence[IsrAnswer]: ...


class IsrManager:
    def __init__(self, manager: ReplicaManager, controller: ControllerClient,
                 metrics: BrokerMetrics | None = None) -> None:
        self.manager = manager
        self.controller = controller
        self.metrics = metrics
        self._tasks: set[asyncio.Task[None]] = set()

    # -- expansion (called by the ReplicaFetch handler) ---------------------------------------

    def follower_progressed(self, replica: Replica, broker: int) -> None:
        state = replica.leader_state
        if state is None:
            return
        proposal = state.expand_proposal(broker, replica.log.high_watermark,
                                         self.manager.clock(),
                                         lambda b: self.manager.isr_eligible(b, replica))
        if proposal is not None:
            self._propose(replica, proposal, "expand")

    # -- shrinking (periodic) -----------------------------------------------------------------

    async def run(self) -> None:
        interval = self.manager.replica_lag_time_max_ms / 2000
        while True:
            await asyncio.sleep(interval)
            self.check_lagging()

    def check_lagging(self) -> None:
        now = self.manager.clock()
        lag_max = self.manager.replica_lag_time_max_ms
        for replica in list(self.manager.replicas.values()):
            state = replica.leader_state
            if state is None or replica.closing:
                continue
            proposal = state.shrink_proposal(now, lag_max)
            if proposal is not None:
                self._propose(replica, proposal, "shrink")

    # -- talking to the controller ------------------------------------------------------------

    def _propose(self, replica: Replica, new_isr: tuple[int, ...], why: str) -> None:
        state = replica.leader_state
        assert state is not None
        state.propose(new_isr)
        proposal = IsrProposal(replica.topic, replica.partition, state.leader_epoch,
                               state.partition_epoch, new_isr)
        log.info("proposing an ISR change", extra={
            "topic": replica.topic, "partition": replica.partition, "why": why,
            "isr": list(state.isr), "new_isr": list(new_isr),
            "partition_epoch": state.partition_epoch})
        task = asyncio.create_task(self._send(replica, proposal), name="alter-partition")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, replica: Replica, proposal: IsrProposal) -> None:
        state = replica.leader_state
        try:
            answers = await self.controller.alter_partition(self.manager.node_id, [proposal])
        except Exception as exc:
            log.warning("ISR change not sent", extra={
                "topic": proposal.topic, "partition": proposal.partition, "error": str(exc)})
            if state is not None and replica.leader_state is state:
                state.proposal_failed(self.manager.clock(), REFUSED_BACKOFF_MS)
            return
        if state is None or replica.leader_state is not state:
            return  # leadership moved on meanwhile
        answer = next((a for a in answers if (a.topic, a.partition)
                       == (proposal.topic, proposal.partition)), None)
        if answer is None or answer.error_code != ErrorCode.NONE:
            state.proposal_failed(self.manager.clock(), REFUSED_BACKOFF_MS)
            log.info("ISR change refused", extra={
                "topic": proposal.topic, "partition": proposal.partition,
                "error": answer.error_message if answer else "no answer"})
            return
        if answer.leader != state.leader or answer.leader_epoch != state.leader_epoch:
            state.proposal_failed(self.manager.clock(), REFUSED_BACKOFF_MS)
            return
        previous = state.isr
        state.apply_record(replica.record.replicas, answer.isr, answer.partition_epoch,
                           self.manager.clock())
        if self.metrics is not None:
            self.metrics.isr_changed(previous, answer.isr)
        self.manager.maybe_advance_high_watermark(replica)

    async def shutdown(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
