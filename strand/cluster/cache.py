"""An in-memory view of the cluster's metadata, fed key by key from etcd.

Pure domain code: whoever watches etcd calls :meth:`MetadataCache.apply` for each
event (a value, or None for a deletion) and the cache answers routing questions.
Waiters can block until the metadata changes (no polling).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from strand.cluster.keys import KeySpace
from strand.cluster.model import (
    NO_LEADER,
    BrokerRegistration,
    ControllerRecord,
    CoordinatorRecord,
    PartitionRecord,
    TopicRecord,
)
from strand.security.state import SecurityState
from strand.service.aio import wait_event


class MetadataCache:
    def __init__(self, keys: KeySpace) -> None:
        self.keys = keys
        self.brokers: dict[int, BrokerRegistration] = {}
        # Each broker's incarnation: its registration's epoch (the lease id), or the etcd
        # mod revision for a registration without one. A new one means the broker
        # registered again, i.e. restarted; a broker updating its own registration
        # (shutting down, offline replicas) keeps its incarnation.
        self.broker_incarnations: dict[int, int] = {}
        self.topics: dict[str, TopicRecord] = {}
        self.partitions: dict[tuple[str, int], PartitionRecord] = {}
        # etcd mod revision of each partition record: the compare of a CAS update.
        self.partition_revisions: dict[tuple[str, int], int] = {}
        self.coordinators: dict[str, CoordinatorRecord] = {}
        self.group_shard_owners: dict[int, CoordinatorRecord] = {}
        self.txn_coordinators: dict[str, CoordinatorRecord] = {}
        self.txn_shard_owners: dict[int, CoordinatorRecord] = {}
        self.controller: ControllerRecord | None = None
        self.controller_epoch = -1  # create revision of the election key
        self.security = SecurityState()  # SCRAM users and ACLs
        self.revision = 0
        self._changed = asyncio.Event()

    def apply(self, key: str, value: bytes | None, *, create_revision: int = 0,
              revision: int = 0) -> None:
        parsed = self.keys.parse(key)
        if parsed is not None:
            if parsed.kind == "broker":
                if value is None:
                    self.brokers.pop(parsed.node_id, None)
                    self.broker_incarnations.pop(parsed.node_id, None)
                else:
                    registration = BrokerRegistration.from_json(value)
                    self.brokers[parsed.node_id] = registration
                    self.broker_incarnations[parsed.node_id] = registration.epoch or revision
            elif parsed.kind == "topic":
                if value is None:
                    self.topics.pop(parsed.topic, None)
                else:
                    self.topics[parsed.topic] = TopicRecord.from_json(value)
            elif parsed.kind == "partition":
                tp = (parsed.topic, parsed.partition)
                if value is None:
                    self.partitions.pop(tp, None)
                    self.partition_revisions.pop(tp, None)
                else:
                    self.partitions[tp] = PartitionRecord.from_json(value)
                    self.partition_revisions[tp] = revision
            elif parsed.kind in ("coordinator", "txn_coordinator"):
                instances = (self.coordinators if parsed.kind == "coordinator"
                             else self.txn_coordinators)
                if value is None:
                    instances.pop(parsed.name, None)
                else:
                    instances[parsed.name] = CoordinatorRecord.from_json(value)
            elif parsed.kind in ("group_shard", "txn_shard"):
                owners = (self.group_shard_owners if parsed.kind == "group_shard"
                          else self.txn_shard_owners)
                if value is None:
                    owners.pop(parsed.partition, None)
                else:
                    owners[parsed.partition] = CoordinatorRecord.from_json(value)
            elif parsed.kind == "user":
                self.security.apply_user(parsed.name, value)
            elif parsed.kind == "acl":
                self.security.apply_acl(parsed.name, value)
            elif parsed.kind == "quota":
                self.security.apply_quota(parsed.name, value)
            elif parsed.kind == "controller":
                if value is None:
                    self.controller, self.controller_epoch = None, -1
                else:
                    self.controller = ControllerRecord.from_json(value)
                    self.controller_epoch = create_revision
        self.revision = max(self.revision, revision)

    def snapshot(self) -> MetadataCache:
        """A copy that later events do not change, for decisions made off the event
        loop (the records are immutable, so the maps are copied, not the records)."""
        copy = MetadataCache(self.keys)
        copy.brokers = dict(self.brokers)
        copy.broker_incarnations = dict(self.broker_incarnations)
        copy.topics = dict(self.topics)
        copy.partitions = dict(self.partitions)
        copy.partition_revisions = dict(self.partition_revisions)
        copy.coordinators = dict(self.coordinators)
        copy.group_shard_owners = dict(self.group_shard_owners)
        copy.txn_coordinators = dict(self.txn_coordinators)
        copy.txn_shard_owners = dict(self.txn_shard_owners)
        copy.controller, copy.controller_epoch = self.controller, self.controller_epoch
        copy.security = self.security.copy()
        copy.revision = self.revision
        return copy

    def known_keys(self) -> set[str]:
        """Every key this cache holds a record for (to diff against a fresh snapshot)."""
        keys = {self.keys.broker(n) for n in self.brokers}
        keys |= {self.keys.topic(t) for t in self.topics}
        keys |= {self.keys.partition(t, p) for t, p in self.partitions}
        keys |= {self.keys.coordinator(c) for c in self.coordinators}
        keys |= {self.keys.group_shard(k) for k in self.group_shard_owners}
        keys |= {self.keys.txn_coordinator(c) for c in self.txn_coordinators}
        keys |= {self.keys.txn_shard(k) for k in self.txn_shard_owners}
        keys |= {self.keys.user(name) for name in self.security.users}
        keys |= {self.keys.acl(key) for key in self.security.acl_keys()}
        keys |= {self.keys.quota(entity.key()) for entity, _ in self.security.quotas.items()}
        if self.controller is not None:
            keys.add(self.keys.controller)
        return keys

    def notify(self) -> None:
        """Wake everyone waiting in :meth:`wait_changed` (after a batch of events)."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_changed(self, timeout: float | None = None) -> bool:
        return await wait_event(self._changed, timeout)

    def leader_of(self, topic: str, partition: int) -> BrokerRegistration | None:
        record = self.partitions.get((topic, partition))
        if record is None or record.leader == NO_LEADER:
            return None
        return self.brokers.get(record.leader)

    def partitions_of(self, topic: str) -> list[PartitionRecord]:
        """Partitions of an existing topic (records of a topic whose own record is
        missing are leftovers of an interrupted create or delete, and not served)."""
        record = self.topics.get(topic)
        if record is None:
            return []
        return sorted((r for (t, p), r in self.partitions.items()
                       if t == topic and p < record.partitions), key=lambda r: r.partition)

    def hosted_by(self, node_id: int) -> Iterable[PartitionRecord]:
        return (r for (t, p), r in self.partitions.items()
                if node_id in r.replicas and t in self.topics
                and p < self.topics[t].partitions)

    async def wait_for_revision(self, revision: int, timeout: float) -> bool:
        """Block until the watch has delivered ``revision`` (read-your-writes)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.revision < revision:
            remaining = deadline - loop.time()
            if remaining <= 0 or not await self.wait_changed(remaining):
                return self.revision >= revision
        return True
