"""Partition reassignment (KIP-455) as pure decisions on a partition record.

1. ``start``: the replica list becomes target + the replicas being removed;
   ``adding`` (target replicas not yet replicas) start following and copying the
   data, everything else keeps serving as before.
2. ``complete`` (called on every metadata change): once every adding replica is in
   the ISR, the replica list becomes the target, the ISR keeps only target
   replicas, and if the leader is being removed the first in-sync target replica
   takes over (new leader epoch). The removed replicas then delete their copies.
3. ``cancel``: back to the original replicas; replicas that were being added leave.

Changing the replication factor is a reassignment to a longer or shorter list.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

from strand.cluster.model import NO_LEADER, PartitionRecord
from strand.errors import (
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
)

__all__ = ["cancel", "complete", "start"]


def start(record: PartitionRecord, target: Sequence[int], live: Collection[int],
          min_insync_replicas: int = 1) -> PartitionRecord:
    """``min_insync_replicas``: the topic's; fewer target replicas are refused (no
    acks=all write could succeed on them)."""
    name = f"{record.topic}-{record.partition}"
    target = list(target)
    if not target:
        raise InvalidReplicaAssignmentError(f"the target replicas of {name} are empty")
    if len(target) < min_insync_replicas:
        raise InvalidReplicationFactorError(
            f"{name} cannot move to {len(target)} replica(s): its topic has "
            f"min.insync.replicas={min_insync_replicas}, so no acks=all write could "
            f"succeed; lower min.insync.replicas first or give at least "
            f"{min_insync_replicas} replicas")
    if len(set(target)) != len(target):
        raise InvalidReplicaAssignmentError(f"the target replicas of {name} repeat a broker")
    dead = [r for r in target if r not in live]
    if dead:
        raise InvalidReplicaAssignmentError(
            f"brokers {dead} are not alive: they cannot receive replicas of {name}")
    if record.reassigning:
        raise InvalidRequestError(
            f"{name} is already being reassigned to {list(record.target_replicas)}; "
            "cancel that first")
    if tuple(target) == record.replicas:
        return record
    removing = tuple(r for r in record.replicas if r not in target)
    adding = tuple(r for r in target if r not in record.replicas)
    started = dataclasses.replace(
        record, replicas=(*target, *removing), adding=adding, removing=removing,
        partition_epoch=record.partition_epoch + 1)
    return complete(started, live) or started


def complete(record: PartitionRecord, live: Collection[int]) -> PartitionRecord | None:
    """The finished record once every adding replica is in sync, else None."""
    if not record.reassigning or any(r not in record.isr for r in record.adding):
        return None
    target = record.target_replicas
    isr = tuple(r for r in target if r in record.isr)
    if not isr:  # only removals, and no kept replica in sync yet: wait for one
        return None
    leader = record.leader
    if leader not in target:
        leader = next((r for r in isr if r in live), NO_LEADER)
    return dataclasses.replace(
        record, replicas=target, isr=isr, leader=leader, adding=(), removing=(),
        leader_epoch=record.leader_epoch + (1 if leader != record.leader else 0),
        partition_epoch=record.partition_epoch + 1)


def cancel(record: PartitionRecord, live: Collection[int]) -> PartitionRecord:
    name = f"{record.topic}-{record.partition}"
    if not record.reassigning:
        raise InvalidRequestError(f"{name} is not being reassigned")
    original = tuple(r for r in record.replicas if r not in record.adding)
    isr = tuple(r for r in original if r in record.isr)
    if not isr:
        raise InvalidRequestError(
            f"cannot cancel the reassignment of {name}: none of its original replicas "
            f"{list(original)} is in sync any more")
    leader = record.leader
    if leader not in original:
        leader = next((r for r in isr if r in live and r in original), NO_LEADER)
    return dataclasses.replace(
        record, replicas=original, isr=isr, leader=leader, adding=(), removing=(),
        leader_epoch=record.leader_epoch + (1 if leader != record.leader else 0),
        partition_epoch=record.partition_epoch + 1)
