"""What a fetch asks for and what it answers, for consumers and followers alike.

As in Kafka (``FetchParams``), one request type serves both: ``replica_id`` says who
fetches (None for a consumer, else the broker id of a follower replica) and
``isolation`` how far it may read. Followers read up to the log end offset; consumers
below the high watermark (below the last stable offset for read_committed). The
Fetch and ReplicaFetch RPCs both become one of these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from services.storage.append_traces import TracedAppend


class FetchIsolation(Enum):
    """The bound of what a fetch may read (exclusive)."""

    LOG_END = "log end offset"  # followers: everything appended
    HIGH_WATERMARK = "high watermark"  # consumers, read_uncommitted
    TXN_COMMITTED = "last stable offset"  # consumers, read_committed


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1  # -1: the fetcher does not know it (no check)
    # Followers only: the epoch of their last batch (-1: empty log), for the divergence
    # check, and their log start offset (sent as Kafka does; the leader does not use it).
    last_fetched_epoch: int = -1
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class FetchParams:
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partitions: Sequence[PartitionFetch]
    replica_id: int | None = None  # None: a consumer
    isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK

    def __post_init__(self) -> None:
        if self.is_from_follower != (self.isolation is FetchIsolation.LOG_END):
            raise ValueError("followers, and only they, read up to the log end offset")

    @classmethod
    def from_consumer(cls, *, max_wait_ms: int, min_bytes: int, max_bytes: int,
                      read_committed: bool, partitions: Sequence[PartitionFetch]
                      ) -> FetchParams:
        isolation = (FetchIsolation.TXN_COMMITTED if read_committed
                     else FetchIsolation.HIGH_WATERMARK)
        return cls(max_wait_ms, min_bytes, max_bytes, partitions, None, isolation)

    @classmethod
    def from_follower(cls, replica_id: int, *, max_wait_ms: int, min_bytes: int,
                      max_bytes: int, partitions: Sequence[PartitionFetch]) -> FetchParams:
        return cls(max_wait_ms, min_bytes, max_bytes, partitions, replica_id,
                   FetchIsolation.LOG_END)

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id is not None


@dataclass(slots=True)
class FetchedPartition:
    """One partition of a fetch's answer (the wire answers take the fields they carry)."""

    topic: str
    partition: int
    error_code: int = 0
    error_message: str = ""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    diverging_epoch: tuple[int, int] | None = None  # followers: (epoch, end offset)
    records: bytes = b""
    # read_committed: (producer id, first offset) of the aborted transactions overlapping
    # ``records``, in marker order.
    aborted_transactions: list[tuple[int, int]] = field(default_factory=list)
    # Followers: the leader's traced appends among ``records`` (append_traces).
    traces: Sequence[TracedAppend] = ()
