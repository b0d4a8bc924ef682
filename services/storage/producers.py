"""DescribeProducers (KIP-664): what a partition leader knows of each producer id.

For every requested partition this node leads: per producer id its epoch, last
sequence and timestamp, the coordinator epoch of its last transaction marker and the
first offset of its open transaction (Kafka's ``DescribeProducers``). Operators use it
to find hanging transactions (an open transaction the coordinator no longer knows of
holds the last stable offset back) and to build the ABORT marker that ends one. Only
the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere): a follower may lag behind it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from services.storage.disk import DiskExecutor
from services.storage.errors import fail_partition
from services.storage.replica import Replica
from services.storage.replica_manager import ReplicaManager
from strand.log.producer_state import ProducerStateEntry

NONE = -1  # the wire's "not known" for a sequence, timestamp, epoch or offset


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int

    @classmethod
    def of(cls, entry: ProducerStateEntry) -> ActiveProducer:
        start = entry.current_txn_first_offset
        return cls(entry.producer_id, entry.producer_epoch, entry.last_seq,
                   entry.last_timestamp, entry.coordinator_epoch,
                   NONE if start is None else start)


@dataclass(slots=True)
class PartitionProducers:
    topic: str
    partition: int
    error_code: int = 0
    error_message: str = ""
    producers: list[ActiveProducer] = field(default_factory=list)


class ProducerLookup:
    def __init__(self, manager: ReplicaManager, disk: DiskExecutor) -> None:
        self.manager = manager
        self.disk = disk

    async def describe(self, partitions: Sequence[tuple[str, int]]) -> list[PartitionProducers]:
        """One answer per (topic, partition), in the order asked."""
        answers = [PartitionProducers(topic, partition) for topic, partition in partitions]
        found: list[tuple[PartitionProducers, Replica]] = []
        for answer in answers:
            try:
                found.append((answer, self.manager.leader_replica(answer.topic,
                                                                  answer.partition)))
            except Exception as exc:
                fail_partition(answer, exc, "describe producers")
        if not found:
            return answers

        def read_all() -> None:
            # In a disk thread: the producer state is copied under the log's lock, which
            # an append holds while it writes.
            for answer, replica in found:
                try:
                    answer.producers = sorted(
                        (ActiveProducer.of(e) for e in replica.log.producer_state().values()),
                        key=lambda p: p.producer_id)
                except Exception as exc:
                    fail_partition(answer, exc, "describe producers")

        try:
            await self.disk.run(read_all, [replica for _, replica in found])
        except Exception as exc:
            for answer, _ in found:
                fail_partition(answer, exc, "describe producers")
        return answers
