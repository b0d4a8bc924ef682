"""The leader's side of replication (docs/architecture.md §3): the follower's step of the one fetch
path of :mod:`services.storage.fetch`.

A follower's ReplicaFetch is a fetch like a consumer's (same leader and epoch checks,
sizes and long poll) that reads up to the log end offset. Before the read, per
partition, the leader

* checks that the fetching broker is a replica of the partition at all;
* checks for divergence (KIP-101 / KIP-320): the end offset of the follower's last
  epoch in the leader's log must not be below the follower's fetch offset, else
  the answer names (epoch, end offset) to truncate to and carries no records;
* records the follower's progress — its fetch offset is its log end offset — which
  may move the high watermark (completing acks=all appends) and let it rejoin the
  ISR.
"""

from __future__ import annotations

import logging
from typing import Protocol

from services.storage.errors import NotLeaderOrFollowerError
from services.storage.fetch_params import FetchedPartition, PartitionFetch
from services.storage.replica import Replica
from services.storage.replica_manager import ReplicaManager
from strand.log.log import PartitionLog

log = logging.getLogger(__name__)


class IsrExpansion(Protocol):
    """Told when a follower of a led partition made progress (it may rejoin the ISR)."""

    def follower_progressed(self, replica: Replica, broker: int) -> None: ...


class FollowerFetchStep:
    """What a fetch from a follower does before reading a partition."""

    def __init__(self, manager: ReplicaManager, isr: IsrExpansion | None = None) -> None:
        self.manager = manager
        self.isr = isr

    def before_read(self, follower: int, replica: Replica, request: PartitionFetch,
                    result: FetchedPartition) -> bool:
        """Whether to read the partition: False when the follower's log diverges (the
        answer, set on ``result``, is where to truncate to). Raises the partition's
        error when ``follower`` is no replica of it."""
        if follower not in replica.record.replicas or follower == self.manager.node_id:
            raise NotLeaderOrFollowerError(
                f"broker {follower} is not a follower of {request.topic}-{request.partition}")
        partition_log = replica.log
        diverging = diverging_epoch(partition_log, request.last_fetched_epoch,
                                    request.fetch_offset)
        if diverging is not None:
            result.diverging_epoch = diverging
            result.high_watermark = partition_log.high_watermark
            result.log_start_offset = partition_log.log_start_offset
            result.log_end_offset = partition_log.log_end_offset
            log.info("follower log diverges", extra={
                "topic": request.topic, "partition": request.partition,
                "follower": follower, "fetch_offset": request.fetch_offset,
                "last_fetched_epoch": request.last_fetched_epoch,
                "epoch": diverging[0], "end_offset": diverging[1]})
            return False
        self._record_progress(replica, follower, request.fetch_offset)
        return True

    def _record_progress(self, replica: Replica, follower: int, fetch_offset: int) -> None:
        state = replica.leader_state
        if state is None or fetch_offset > replica.log.log_end_offset:
            return  # out of range: the read answers OFFSET_OUT_OF_RANGE
        state.update_follower(follower, fetch_offset, replica.log.log_end_offset,
                              self.manager.clock())
        self.manager.maybe_advance_high_watermark(replica)
        if self.isr is not None:
            self.isr.follower_progressed(replica, follower)


def diverging_epoch(leader_log: PartitionLog, last_fetched_epoch: int,
                    fetch_offset: int) -> tuple[int, int] | None:
    """(epoch, end offset) when a follower whose last batch has ``last_fetched_epoch``
    and whose log ends at ``fetch_offset`` diverges from ``leader_log``, else None."""
    if last_fetched_epoch < 0:
        return None
    epoch, end = leader_log.end_offset_for_epoch(last_fetched_epoch)
    if epoch < 0 or end < fetch_offset or epoch < last_fetched_epoch:
        return epoch, end
    return None
