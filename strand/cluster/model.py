"""The metadata records kept in etcd (docs/architecture.md §5), as JSON values.

JSON keeps etcd readable with ``etcdctl get --prefix /strand`` while debugging; the
records are small and written rarely (membership, admin, leadership changes).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from strand.errors import UnknownServerError

NO_LEADER = -1


def _dump(value: dict[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A storage node, present in etcd only while its lease lives."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    # Set by the node itself when it begins a controlled shutdown: leaders stop
    # counting it for the high watermark and the controller moves its leaderships.
    shutting_down: bool = False
    # The broker epoch (KIP-380): the id of the lease this registration lives under,
    # new with every registration. Requests only the broker itself may make carry it.
    epoch: int = 0
    # Replicas the node cannot write or trust (Kafka's offline replicas of a failed log
    # directory), as (topic, partition): they leave the ISR and lose their leadership
    # to an in-sync replica; the node removes them from here once recovered.
    offline_replicas: tuple[tuple[str, int], ...] = ()

    def is_offline(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self.offline_replicas

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def to_json(self) -> bytes:
        raw = asdict(self)
        if not self.shutting_down:
            del raw["shutting_down"]
        if not self.epoch:
            del raw["epoch"]
        if self.offline_replicas:
            raw["offline_replicas"] = [list(tp) for tp in self.offline_replicas]
        else:
            del raw["offline_replicas"]
        return _dump(raw)

    @classmethod
    def from_json(cls, data: bytes) -> BrokerRegistration:
        raw = json.loads(data)
        offline = tuple((str(t), int(p)) for t, p in raw.get("offline_replicas", ()))
        return cls(int(raw["node_id"]), str(raw["host"]), int(raw["port"]), raw.get("rack"),
                   bool(raw.get("shutting_down", False)), int(raw.get("epoch", 0)), offline)


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    topic_id: str
    partitions: int
    replication_factor: int
    config: dict[str, str] = field(default_factory=dict)
    internal: bool = False

    def to_json(self) -> bytes:
        return _dump(asdict(self))

    @classmethod
    def from_json(cls, data: bytes) -> TopicRecord:
        raw = json.loads(data)
        return cls(
            name=str(raw["name"]),
            topic_id=str(raw["topic_id"]),
            partitions=int(raw["partitions"]),
            replication_factor=int(raw["replication_factor"]),
            config={str(k): str(v) for k, v in raw.get("config", {}).items()},
            internal=bool(raw.get("internal", False)),
        )


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    """Replica placement and leadership of one partition.

    ``replicas`` is ordered: the first is the preferred leader. Every change bumps
    ``partition_epoch`` (compare-and-swap in etcd); every leader change bumps
    ``leader_epoch`` (stamped on batches, KIP-101). During a reassignment (KIP-455)
    ``replicas`` holds the target replicas followed by the ones being removed;
    ``adding`` are target replicas still copying the data, ``removing`` the replicas
    that go once every adding one is in the ISR.
    """

    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int = 0
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    def to_json(self) -> bytes:
        # Built by hand: asdict() deep-copies every field and made serialization the
        # bulk of creating a large topic (issue 11).
        raw: dict[str, Any] = {
            "topic": self.topic, "partition": self.partition, "replicas": list(self.replicas),
            "leader": self.leader, "leader_epoch": self.leader_epoch, "isr": list(self.isr),
            "partition_epoch": self.partition_epoch}
        if self.reassigning:
            raw["adding"], raw["removing"] = list(self.adding), list(self.removing)
        return _dump(raw)

    @classmethod
    def from_json(cls, data: bytes) -> PartitionRecord:
        raw = json.loads(data)
        return cls(
            topic=str(raw["topic"]),
            partition=int(raw["partition"]),
            replicas=tuple(int(r) for r in raw["replicas"]),
            leader=int(raw["leader"]),
            leader_epoch=int(raw["leader_epoch"]),
            isr=tuple(int(r) for r in raw["isr"]),
            partition_epoch=int(raw.get("partition_epoch", 0)),
            adding=tuple(int(r) for r in raw.get("adding", ())),
            removing=tuple(int(r) for r in raw.get("removing", ())),
        )


@dataclass(frozen=True, slots=True)
class ControllerRecord:
    """Value of the election key: who the active controller is and where to reach it."""

    controller_id: str
    address: str

    def to_json(self) -> bytes:
        return _dump(asdict(self))

    @classmethod
    def from_json(cls, data: bytes) -> ControllerRecord:
        raw = json.loads(data)
        return cls(str(raw["controller_id"]), str(raw["address"]))


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """A coordinator instance (``coordinators/<id>`` for groups, ``txn-coordinators/<id>``
    for transactions, bound to its lease), or the owner of a shard (``shards/groups/<k>``,
    ``shards/txns/<k>``: the same record, the owner's)."""

    instance_id: str
    address: str

    def to_json(self) -> bytes:
        return _dump(asdict(self))

    @classmethod
    def from_json(cls, data: bytes) -> CoordinatorRecord:
        raw = json.loads(data)
        return cls(str(raw["instance_id"]), str(raw["address"]))


# -- producer ids (KIP-730) ---------------------------------------------------------------

PRODUCER_ID_BLOCK_SIZE = 1000  # as Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
MAX_PRODUCER_ID = 2**63 - 1  # producer ids are int64 >= 0 on the wire and in batches
# The top 2^40 ids are never granted: the coordinators' own shard writers use them
# (strand.coordination.shard_fence), so no client can ever hold one.
FIRST_RESERVED_PRODUCER_ID = MAX_PRODUCER_ID - 2**40 + 1


@dataclass(frozen=True, slots=True)
class ProducerIdsBlock:
    """``size`` consecutive producer ids from ``first``, granted to one coordinator
    instance (Kafka's ProducerIdsBlock)."""

    first: int
    size: int

    def __post_init__(self) -> None:
        if self.first < 0 or self.size < 1 or self.last > MAX_PRODUCER_ID:
            raise ValueError(f"not a block of int64 producer ids: first {self.first}, "
                             f"size {self.size}")

    @property
    def last(self) -> int:
        return self.first + self.size - 1

    @property
    def next_first(self) -> int:
        """The first id of the block granted after this one."""
        return self.first + self.size


@dataclass(frozen=True, slots=True)
class ProducerIdBlockRecord:
    """The value of ``pid-block``: the first id of the next block to grant, and who got
    the last one (for operators; Kafka's ProducerIdsRecord). Only the active controller
    writes it, fenced by its election and compared on its revision, so every block is
    granted once, whichever controller grants the next."""

    next_producer_id: int
    coordinator_id: str = ""
    coordinator_epoch: int = 0

    def to_json(self) -> bytes:
        return _dump(asdict(self))

    @classmethod
    def from_json(cls, data: bytes) -> ProducerIdBlockRecord:
        raw = json.loads(data)
        return cls(int(raw["next_producer_id"]), str(raw.get("coordinator_id", "")),
                   int(raw.get("coordinator_epoch", 0)))


def next_producer_ids_block(record: ProducerIdBlockRecord | None,
                            size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdsBlock:
    """The block to grant after ``record`` (None: nothing granted yet, start at 0).

    As Kafka, blocks end before the ids nobody may be granted (here the reserved top
    of the int64 range, ``FIRST_RESERVED_PRODUCER_ID``); past them
    UnknownServerError, as Kafka's "exhausted all producerIds" (nothing a caller can
    retry: the cluster has granted every id).
    """
    first = 0 if record is None else record.next_producer_id
    if first < 0 or first > FIRST_RESERVED_PRODUCER_ID - size:
        raise UnknownServerError(
            f"producer ids exhausted: no block of {size} is left after {first}, every int64 "
            "producer id has been granted; new producers cannot get an id in this cluster")
    return ProducerIdsBlock(first, size)
