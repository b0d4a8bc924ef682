"""Kafka's rack-aware replica assignment (KIP-36), reimplemented from reading
``AdminUtils.assignReplicasToBrokers`` (core/src/main/scala/kafka/admin/AdminUtils.scala,
the ZooKeeper-era code that ``kafka-topics --create``/``--alter --partitions`` and
``kafka-reassign-partitions --generate`` use), as the baseline Strand's placement is
measured against (test_placement_quality.py). Not used by Strand itself.

Kafka draws two random numbers for a new topic: the start index into the
rack-alternated broker list (the first partition's leader) and the initial replica
shift. Here both are parameters, so every run is the same; ``addPartitions`` fixes
both itself from the topic's partition 0, exactly as Kafka does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class KafkaBroker:
    id: int
    rack: str


def rack_alternated(brokers: Sequence[KafkaBroker]) -> list[int]:
    """``getRackAlternatedBrokerList``: racks sorted by name, each rack's brokers by id,
    one broker from each rack in turn (racks that run out are skipped)."""
    by_rack: dict[str, list[int]] = {}
    for broker in brokers:
        by_rack.setdefault(broker.rack, []).append(broker.id)
    columns = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    return [column[i] for i in range(max(map(len, columns))) for column in columns
            if i < len(column)]


def replica_index(first: int, shift: int, k: int, brokers: int) -> int:
    """``replicaIndex``: the k-th candidate after the leader at ``first``."""
    return (first + 1 + (shift + k) % (brokers - 1)) % brokers


def assign_rack_aware(brokers: Sequence[KafkaBroker], partitions: int,
                      replication_factor: int, start_index: int, replica_shift: int,
                      start_partition: int = 0) -> dict[int, list[int]]:
    """``assignReplicasToBrokersRackAware``: partitions ``start_partition`` onwards.

    The leader of partition ``p`` is the alternated list's entry ``p + start_index``;
    the followers walk the list from the leader with a stride that grows by one each
    time the partition id wraps the list, skipping a broker whose rack already holds a
    replica while some rack holds none, and a broker that already holds one."""
    rack_of = {b.id: b.rack for b in brokers}
    arranged = rack_alternated(brokers)
    count, racks = len(arranged), len(set(rack_of.values()))
    shift = replica_shift
    assignment: dict[int, list[int]] = {}
    for partition in range(start_partition, start_partition + partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start_index) % count
        replicas = [arranged[first]]
        racks_used = {rack_of[replicas[0]]}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[replica_index(first, shift * racks, k, count)]
                rack = rack_of[broker]
                k += 1
                if ((rack not in racks_used or len(racks_used) == racks)
                        and (broker not in replicas or len(replicas) == count)):
                    replicas.append(broker)
                    racks_used.add(rack)
                    break
        assignment[partition] = replicas
    return assignment


def add_partitions(brokers: Sequence[KafkaBroker], existing: Mapping[int, Sequence[int]],
                   total: int) -> dict[int, list[int]]:
    """``addPartitions`` (``kafka-topics --alter --partitions``): the new partitions
    only; the existing ones are left as they are. Kafka takes as fixed start index (and
    replica shift) the position, in the brokers sorted by id, of the first broker whose
    id is at least partition 0's leader, and uses it as a position in the
    rack-alternated list, as its code does."""
    leader = existing[0][0]
    by_id = sorted(b.id for b in brokers)
    start = next((i for i, broker in enumerate(by_id) if broker >= leader), 0)
    return assign_rack_aware(brokers, total - len(existing), len(existing[0]), start, start,
                             start_partition=len(existing))
