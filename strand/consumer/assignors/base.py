"""What every partition assignor shares: subscriptions, assignments, the assignor contract.

In Kafka's group protocol the coordinator does not assign partitions: the group
*leader* (a client) runs an assignor over every member's subscription and the
partition counts of the subscribed topics, and the coordinator relays the result
(Kafka's ``ConsumerPartitionAssignor``). Everything here is pure computation: no
I/O, no clock, no randomness, and the same input always gives the same output.

Also here: the sticky assignors' member user data (owned partitions + generation,
the role of Kafka's ``StickyAssignor`` user data schema v1) and its byte format,
since the coordinator relays user data as opaque bytes.
"""

from __future__ import annotations

import enum
import struct
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from strand.client.structs import TopicPartition

__all__ = [
    "DEFAULT_GENERATION",
    "MEMBER_DATA_VERSION",
    "Assignment",
    "MemberData",
    "PartitionAssignor",
    "RebalanceProtocol",
    "Subscription",
    "UserDataError",
    "common_rebalance_protocol",
    "decode_member_data",
    "encode_member_data",
    "member_order",
    "subscribed_partitions",
]

DEFAULT_GENERATION = -1  # Kafka's AbstractStickyAssignor.DEFAULT_GENERATION: "no generation"


class RebalanceProtocol(enum.Enum):
    """Kafka's ``RebalanceProtocol``. EAGER: every member revokes everything before it
    rejoins. COOPERATIVE (KIP-429): members keep their partitions across the rebalance
    and revoke only those the new assignment takes away, which then move in a
    follow-up rebalance. ``id`` orders them: a group uses the highest one all its
    members' assignors support."""

    EAGER = 0
    COOPERATIVE = 1

    @property
    def id(self) -> int:
        return self.value


@dataclass(frozen=True)
class Subscription:
    """One member's subscription as the leader sees it (Kafka's
    ``ConsumerProtocolSubscription`` v3): the topics, the assignor's opaque user data,
    the partitions the member owns now (v1), the generation it last had an assignment
    in (v2, -1: none) and, for static membership and rack awareness, its
    ``group.instance.id`` and ``client.rack``. Sequences given for the tuple fields are
    stored as tuples."""

    topics: tuple[str, ...]
    user_data: bytes = b""
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation: int = DEFAULT_GENERATION
    group_instance_id: str | None = None
    rack_id: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.topics, str):
            raise TypeError("Subscription.topics is a sequence of topic names, not one string")
        object.__setattr__(self, "topics", tuple(self.topics))
        object.__setattr__(
            self, "owned_partitions", tuple(TopicPartition(*tp) for tp in self.owned_partitions)
        )


@dataclass(frozen=True)
class Assignment:
    """What the leader gives one member: its partitions (sorted by topic, then
    partition) and assignor user data (empty for Kafka's four assignors)."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes = b""


class PartitionAssignor(ABC):
    """Kafka's ``ConsumerPartitionAssignor``. ``assign`` gives every member in
    ``subscriptions`` an :class:`Assignment` (possibly empty); partitions of topics
    missing from ``partitions_per_topic`` are not assigned, as in Kafka, where the
    leader only assigns topics it has metadata for."""

    name: ClassVar[str]
    # Most preferred first, as Kafka's supportedProtocols(); rebalance_protocol is the first.
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    @property
    def rebalance_protocol(self) -> RebalanceProtocol:
        return self.supported_protocols[0]

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        for topic, count in partitions_per_topic.items():
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"topic {topic!r}: partition count must be an int >= 0, "
                                 f"got {count!r}")
        if not subscriptions:
            return {}
        raw = self._assign(partitions_per_topic, subscriptions)
        return {member: Assignment(tuple(sorted(raw.get(member, ()))))
                for member in sorted(subscriptions)}

    @abstractmethod
    def _assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        """Partitions per member id; ``assign`` sorts them and fills in absent members."""

    def subscription_user_data(
        self, owned: Iterable[TopicPartition], generation: int
    ) -> bytes:
        """The user data a member puts in its next subscription, given the partitions it
        owns and the generation it got them in (Kafka's subscriptionUserData after
        onAssignment). Empty unless the assignor needs memory across rebalances."""
        return b""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def common_rebalance_protocol(assignors: Iterable[PartitionAssignor]) -> RebalanceProtocol:
    """The protocol a consumer configured with these assignors uses: the highest one they
    all support (Kafka's ConsumerCoordinator constructor). Raises if there is none."""
    common: set[RebalanceProtocol] | None = None
    for assignor in assignors:
        protocols = set(assignor.supported_protocols)
        common = protocols if common is None else common & protocols
    if not common:
        raise ValueError("the assignors support no rebalance protocol in common")
    return max(common, key=lambda p: p.id)


def member_order(subscriptions: Mapping[str, Subscription]) -> list[str]:
    """Member ids in Kafka's ``MemberInfo`` order: static members (with a
    ``group.instance.id``) first, by instance id, then dynamic members by member id. The
    member id breaks ties between equal instance ids, which Kafka leaves to hash order."""

    def key(member: str) -> tuple[int, str, str]:
        instance = subscriptions[member].group_instance_id
        return (0, instance, member) if instance is not None else (1, member, "")

    return sorted(subscriptions, key=key)


def subscribed_partitions(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> dict[str, int]:
    """The partition counts of the topics someone subscribes to and that exist (count >
    0), sorted by topic name."""
    topics = {t for s in subscriptions.values() for t in s.topics}
    return {t: partitions_per_topic[t] for t in sorted(topics)
            if partitions_per_topic.get(t, 0) > 0}


# -- the sticky assignors' member data ------------------------------------------------------

MEMBER_DATA_VERSION = 1


class UserDataError(ValueError):
    """Subscription user data that is not a valid member-data encoding."""


@dataclass(frozen=True)
class MemberData:
    """What a sticky member remembers between rebalances (Kafka's
    ``AbstractStickyAssignor.MemberData``): the partitions it owns and the generation
    it was given them in (``DEFAULT_GENERATION``: unknown)."""

    partitions: tuple[TopicPartition, ...] = ()
    generation: int = DEFAULT_GENERATION


_HEADER = struct.Struct(">hii")  # version, generation, topic count
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def encode_member_data(data: MemberData) -> bytes:
    """Encode member data, big-endian, in version 1 of this format::

        int16  version          1
        int32  generation       -1: unknown
        int32  topic_count
        topic_count times, topics sorted by name:
          int16  name_length    >= 1, then the name in UTF-8
          int32  partition_count
          int32  partition      partition_count times, ascending, each >= 0

    It carries what Kafka's StickyAssignor user data v1 carries (its topic/partitions
    array and generation), behind an explicit version. A reader of version 1 decodes
    any later version by its version-1 fields and ignores what follows them, so that
    a newer member can add fields without breaking an older leader."""
    by_topic: dict[str, set[int]] = {}
    for topic, partition in data.partitions:
        by_topic.setdefault(topic, set()).add(partition)
    out = [_HEADER.pack(MEMBER_DATA_VERSION, data.generation, len(by_topic))]
    for topic in sorted(by_topic):
        name = topic.encode()
        if not 0 < len(name) <= 0x7FFF:
            raise ValueError(f"topic name of {len(name)} bytes cannot be encoded")
        partitions = sorted(by_topic[topic])
        if partitions[0] < 0:
            raise ValueError(f"negative partition in {topic!r}: {partitions[0]}")
        out += [_INT16.pack(len(name)), name, _INT32.pack(len(partitions)),
                struct.pack(f">{len(partitions)}i", *partitions)]
    return b"".join(out)


def decode_member_data(raw: bytes) -> MemberData:
    """Decode :func:`encode_member_data`'s format; raise :class:`UserDataError` saying
    what is wrong and where, for anything that is not a valid encoding."""
    buf = memoryview(raw)
    pos = 0

    def take(n: int, what: str) -> memoryview:
        nonlocal pos
        if n > len(buf) - pos:
            raise UserDataError(f"member data truncated at byte {pos}: {what} needs {n} "
                                f"bytes, {len(buf) - pos} left")
        pos += n
        return buf[pos - n:pos]

    version, generation, topic_count = _HEADER.unpack(take(_HEADER.size, "the header"))
    if version < MEMBER_DATA_VERSION:
        raise UserDataError(f"member data version {version} is not a known version "
                            f"(expected >= {MEMBER_DATA_VERSION})")
    if generation < DEFAULT_GENERATION:
        raise UserDataError(f"member data generation {generation} is negative")
    if not 0 <= topic_count <= (len(buf) - pos) // 7:
        raise UserDataError(f"member data topic count {topic_count} is impossible for "
                            f"{len(buf) - pos} remaining bytes")
    partitions: list[TopicPartition] = []
    for _ in range(topic_count):
        (name_length,) = _INT16.unpack(take(2, "a topic name length"))
        if name_length < 1:
            raise UserDataError(f"member data topic name length {name_length} at byte {pos - 2}")
        try:
            topic = bytes(take(name_length, "a topic name")).decode()
        except UnicodeDecodeError as e:
            raise UserDataError(f"member data topic name is not UTF-8: {e}") from None
        (count,) = _INT32.unpack(take(4, f"the partition count of {topic!r}"))
        if count < 0:
            raise UserDataError(f"member data partition count {count} for {topic!r}")
        values = struct.unpack(f">{count}i", take(4 * count, f"the partitions of {topic!r}"))
        if any(p < 0 for p in values):
            raise UserDataError(f"member data has a negative partition for {topic!r}")
        partitions += (TopicPartition(topic, p) for p in values)
    if version == MEMBER_DATA_VERSION and pos != len(buf):
        raise UserDataError(f"member data version 1 has {len(buf) - pos} trailing bytes")
    return MemberData(tuple(partitions), generation)

