"""The faults: each one is injected into real processes, held, then healed.

- kill-leader: SIGKILL the storage node leading a random partition; held lease
  TTL + 2 s; healed by restarting it (same port, same data directory).
- pause-leader: SIGSTOP that node (a zombie leader); held lease TTL + 2 s; SIGCONT.
- kill-controller: SIGKILL the active controller; held lease TTL + 2 s; restart.
- restart-etcd: SIGKILL etcd; held 1 s .. TTL + 2 s; restarted on the same data
  directory and ports.
- partition-node: cut a partition leader off from its peers, the gateway and the
  controllers (``proxy.py``), etcd staying reachable; held 2 x TTL + 2 s; reconnect.
- kill-coordinator: SIGKILL the group coordinator instance owning the chaos group's
  shard (``shards/groups/<k>`` in etcd); held TTL + 2 s (the other instance takes
  the shard over from __consumer_offsets); restart (it may take the shard back).
- kill-transaction-coordinator: SIGKILL the transaction coordinator owning the shard
  of a live transactional id of the workloads (``shards/txns/<k>``); held TTL + 2 s
  (the other instance takes the shard over from __transaction_state and finishes
  what it finds in Prepare*); restart.
- pause-coordinator: SIGSTOP the owner of the group's shard or of a transactional
  id's shard (a coin decides), longer than its lease (TTL + 2 s): the other instance
  takes over while the paused one still believes it owns the shard; SIGCONT.

The three leader faults aim, with probability ``offsets_share``, at the leader of
the group's partition of ``__consumer_offsets`` instead of a random partition of the
chaos topic (that node usually leads a chaos partition too: the note says).

Held longer than the lease TTL so that leases really expire (a paused leader's
registration vanishes, a standby controller takes over): what happens when the
victim comes back is the interesting part. Leaders and the active controller are
looked up in etcd at injection time, so the faults follow leadership as it moves.
"""

from __future__ import annotations

import random
import signal
from dataclasses import dataclass

from strand.coordination.shards import GROUP_TOPIC

from .harness import CONTROLLERS, COORDINATORS, STORAGE_NODES, TXN_COORDINATORS, ChaosCluster

KINDS = ("kill-leader", "pause-leader", "kill-controller", "restart-etcd", "partition-node",
         "kill-coordinator", "kill-transaction-coordinator", "pause-coordinator")


@dataclass
class Injected:
    kind: str
    target: str  # the process hurt (storage-2, controller-0, etcd)
    hold: float  # seconds to leave it hurt
    note: str = ""


class Faults:
    def __init__(self, cluster: ChaosCluster, topic: str, partitions: int,
                 rng: random.Random, offsets_share: float = 0.0) -> None:
        self.cluster, self.topic, self.partitions, self.rng = cluster, topic, partitions, rng
        self.ttl = cluster.lease_ttl
        self.offsets_share = offsets_share

    def _leader(self) -> tuple[str, str]:
        """A random partition's current leader (from etcd), as (process, note): with
        probability ``offsets_share``, the group's partition of __consumer_offsets."""
        if self.rng.random() < self.offsets_share:
            shard = self.cluster.group_shard()
            state = self.cluster.partitions(GROUP_TOPIC).get(shard) if shard is not None \
                else None
            if state is not None and state.leader in STORAGE_NODES:
                also = sorted(p for p, s in self.cluster.partitions(self.topic).items()
                              if s.leader == state.leader)
                return (f"storage-{state.leader}",
                        f"leader of {GROUP_TOPIC}-{shard} (epoch {state.leader_epoch}, isr "
                        f"{list(state.isr)}; also leads {self.topic} {also})")
        partition = self.rng.randrange(self.partitions)
        state = self.cluster.partitions(self.topic).get(partition)
        if state is not None and state.leader in STORAGE_NODES:
            return (f"storage-{state.leader}",
                    f"leader of {self.topic}-{partition} (epoch {state.leader_epoch}, "
                    f"isr {list(state.isr)})")
        node = self.rng.choice(STORAGE_NODES)  # no leader known: any node will do
        return f"storage-{node}", f"{self.topic}-{partition} had no leader; random node"

    def inject(self, kind: str) -> Injected:
        cluster = self.cluster
        if kind == "kill-leader":
            target, note = self._leader()
            cluster.kill(target)
            return Injected(kind, target, self.ttl + 2, note)
        if kind == "pause-leader":
            target, note = self._leader()
            cluster.signal(target, signal.SIGSTOP)
            return Injected(kind, target, self.ttl + 2, note)
        if kind == "kill-controller":
            active = cluster.active_controller()
            target = active if active in CONTROLLERS else self.rng.choice(CONTROLLERS)
            cluster.kill(target)
            return Injected(kind, target, self.ttl + 2,
                            "the active one" if active == target else "no active one known")
        if kind == "restart-etcd":
            cluster.kill("etcd")
            return Injected(kind, "etcd", round(self.rng.uniform(1, self.ttl + 2), 1))
        if kind == "partition-node":
            target, note = self._leader()
            silenced = cluster.cut(target)
            return Injected(kind, target, 2 * self.ttl + 2,
                            f"{note}; {silenced} connections silenced")
        if kind == "kill-coordinator":
            target, note = self._group_coordinator()
            cluster.kill(target)
            return Injected(kind, target, self.ttl + 2, note)
        if kind == "kill-transaction-coordinator":
            target, note = self._txn_coordinator()
            cluster.kill(target)
            return Injected(kind, target, self.ttl + 2, note)
        if kind == "pause-coordinator":
            target, note = (self._txn_coordinator() if self.rng.random() < 0.5
                            else self._group_coordinator())
            cluster.signal(target, signal.SIGSTOP)
            return Injected(kind, target, self.ttl + 2, note)
        raise ValueError(f"unknown fault {kind!r}; known: {', '.join(KINDS)}")

    def _group_coordinator(self) -> tuple[str, str]:
        owner = self.cluster.shard_owner()
        if owner is not None and owner in COORDINATORS:
            return owner, f"owner of the group's shard {self.cluster.group_shard()}"
        return self.rng.choice(COORDINATORS), "no owner of the group's shard known; a random one"

    def _txn_coordinator(self) -> tuple[str, str]:
        """The owner of a random live transactional id's shard (from etcd)."""
        if self.cluster.txn_ids:
            txn_id = self.rng.choice(self.cluster.txn_ids)
            owner = self.cluster.txn_shard_owner(txn_id)
            if owner is not None and owner in TXN_COORDINATORS:
                return owner, (f"owner of shard {self.cluster.txn_shard(txn_id)} of "
                               f"__transaction_state ({txn_id!r})")
        return self.rng.choice(TXN_COORDINATORS), "no transactional id's owner known; a random one"

    def heal(self, fault: Injected) -> None:
        cluster = self.cluster
        if fault.kind in ("kill-leader", "kill-controller", "restart-etcd",
                          "kill-coordinator", "kill-transaction-coordinator"):
            cluster.restart(fault.target)
        elif fault.kind in ("pause-leader", "pause-coordinator"):
            cluster.signal(fault.target, signal.SIGCONT)
        elif fault.kind == "partition-node":
            cluster.heal(fault.target)


def schedule(kinds: list[str], rng: random.Random) -> list[str]:
    """One round of a rotating mix: every kind once, in a random order."""
    round_ = list(kinds)
    rng.shuffle(round_)
    return round_
