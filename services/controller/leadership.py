"""Partition leadership and ISR decisions, as pure functions of a partition record and
the set of live brokers (docs/architecture.md §3). No etcd, no gRPC: the controller applies what
these return with compare-and-swap, and the tests drive them directly.

Rules (Kafka's, in its KRaft form):

* A broker that is not alive (its lease expired) or is shutting down leaves every
  ISR at once (the controller passes a broker whose replica of the partition is
  offline as shutting down, for that partition); the ISR never becomes empty,
  though: its last member stays, so that when it comes back it can lead again
  without losing acknowledged records.
* A partition whose leader left gets the first replica, in replica order, that is
  in the (new) ISR, alive and not shutting down. If there is none the partition is
  leaderless (-1), unless ``unclean.leader.election.enable`` allows the first live
  replica outside the ISR (which may lose acknowledged records: an opt-in). A
  leader that is shutting down but still alive and the only one in sync keeps
  leading until it exits (controlled shutdown cannot move what nobody else has).
* Every leader change bumps ``leader_epoch``; every change of any kind bumps
  ``partition_epoch`` (the CAS version).
* The preferred leader (first replica) is restored when it is alive and in the ISR.
* A leader may change the ISR (shrink lagging followers, expand caught-up ones); the
  change must name the current leader epoch and partition epoch, keep the leader in
  the ISR, stay within the replicas, and add only live brokers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

from strand.cluster.model import NO_LEADER, PartitionRecord
from strand.errors import (
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidRequestError,
    InvalidUpdateVersionError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)

__all__ = ["IsrChange", "apply_isr_change", "elect_leader", "move_leadership_away",
           "preferred_leader"]


@dataclasses.dataclass(frozen=True, slots=True)
class IsrChange:
    """A leader's request to change the ISR of one partition."""

    broker_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]


def _changed(record: PartitionRecord, *, leader: int, isr: Sequence[int]) -> PartitionRecord:
    leader_epoch = record.leader_epoch + (1 if leader != record.leader else 0)
    return dataclasses.replace(record, leader=leader, isr=tuple(isr), leader_epoch=leader_epoch,
                               partition_epoch=record.partition_epoch + 1)


def _keep_in_order(record: PartitionRecord, members: Collection[int]) -> list[int]:
    """``members`` in replica order (the ISR is kept sorted that way)."""
    return [r for r in record.replicas if r in members]


def elect_leader(record: PartitionRecord, live: Collection[int], *, unclean: bool = False,
                 shutting_down: Collection[int] = ()) -> PartitionRecord | None:
    """The record after reacting to the live brokers, or None if nothing changes.

    Removes dead and stopping brokers from the ISR (keeping its last member), and
    elects a new leader when the current one is gone (see the module docstring).
    """
    def eligible(broker: int) -> bool:
        return broker in live and broker not in shutting_down

    isr = [r for r in record.isr if eligible(r)]
    if not isr:
        # Keep the last in-sync member(s): they hold every acknowledged record.
        isr = list(record.isr)
    leader = record.leader
    if leader == NO_LEADER or not eligible(leader) or leader not in isr:
        leader = next((r for r in _keep_in_order(record, isr) if eligible(r)), NO_LEADER)
        stopping_sole_leader = (record.leader in live and record.leader in shutting_down
                                and record.leader in record.isr)
        if leader == NO_LEADER and stopping_sole_leader:
            # Nobody else is in sync: the stopping leader serves until it exits rather
            # than leave the partition leaderless (or to an unclean election) early.
            leader = record.leader
            isr = [leader]
        elif leader == NO_LEADER and unclean:
            leader = next((r for r in record.replicas if eligible(r)), NO_LEADER)
            if leader != NO_LEADER:
                isr = [leader]
    if leader != NO_LEADER:
        isr = [r for r in isr if eligible(r) or r == leader]
    isr = _keep_in_order(record, isr) or isr
    if leader == record.leader and tuple(isr) == record.isr:
        return None
    return _changed(record, leader=leader, isr=isr)


def move_leadership_away(record: PartitionRecord, broker: int, live: Collection[int],
                         shutting_down: Collection[int]) -> PartitionRecord | None:
    """Controlled shutdown of ``broker``: lead elsewhere (if another ISR member can) and
    leave the ISR. A sole in-sync leader keeps leading (nobody else has its data)."""
    stopping = set(shutting_down) | {broker}
    changed = elect_leader(record, live, shutting_down=stopping)
    if changed is not None and changed.leader == NO_LEADER and record.leader == broker:
        return None  # nobody can take over: keep serving until the process exits
    return changed


def preferred_leader(record: PartitionRecord, live: Collection[int],
                     shutting_down: Collection[int] = ()) -> PartitionRecord | None:
    """Leadership back to the first replica when it is alive and in sync, else None."""
    if not record.replicas:
        return None
    preferred = record.replicas[0]
    if (record.leader == preferred or preferred not in record.isr or preferred not in live
            or preferred in shutting_down):
        return None
    return _changed(record, leader=preferred, isr=record.isr)


def apply_isr_change(record: PartitionRecord, change: IsrChange, live: Collection[int],
                     shutting_down: Collection[int] = ()) -> PartitionRecord:
    """The record with the leader's ISR change applied; typed errors when it is refused."""
    name = f"{record.topic}-{record.partition}"
    if change.broker_id != record.leader:
        raise NotLeaderOrFollowerError(
            f"broker {change.broker_id} does not lead {name} (the leader is {record.leader})")
    if change.leader_epoch < record.leader_epoch:
        raise FencedLeaderEpochError(
            f"leader epoch {change.leader_epoch} of {name} is older than {record.leader_epoch}")
    if change.leader_epoch > record.leader_epoch:
        raise UnknownLeaderEpochError(
            f"leader epoch {change.leader_epoch} of {name} is newer than {record.leader_epoch}")
    if change.partition_epoch != record.partition_epoch:
        raise InvalidUpdateVersionError(
            f"partition epoch {change.partition_epoch} of {name} is not the current "
            f"{record.partition_epoch}")
    new_isr = list(dict.fromkeys(change.new_isr))
    if record.leader not in new_isr:
        raise InvalidRequestError(f"the new ISR of {name} must contain its leader")
    outside = [r for r in new_isr if r not in record.replicas]
    if outside:
        raise InvalidRequestError(f"brokers {outside} are not replicas of {name}")
    added = [r for r in new_isr if r not in record.isr]
    ineligible = [r for r in added if r not in live or r in shutting_down]
    if ineligible:
        raise IneligibleReplicaError(
            f"brokers {ineligible} cannot join the ISR of {name}: not alive or shutting down")
    ordered = _keep_in_order(record, new_isr)
    if tuple(ordered) == record.isr:
        return record
    return _changed(record, leader=record.leader, isr=ordered)
