"""Kafka's client-side partition assignors for consumer groups.

The group leader runs one of these over every member's :class:`Subscription` and the
partition counts of the subscribed topics, and the coordinator relays the resulting
:class:`Assignment` of each member. Names are Kafka's, so a member's protocol list
("range", "roundrobin", "sticky", "cooperative-sticky") means what it means in Kafka::

    assignor = assignor_for("cooperative-sticky")
    assignments = assignor.assign({"t0": 3, "t1": 3},
                                  {"C0": Subscription(("t0", "t1")),
                                   "C1": Subscription(("t0", "t1"))})
"""

from __future__ import annotations

from strand.consumer.assignors.base import (
    DEFAULT_GENERATION,
    MEMBER_DATA_VERSION,
    Assignment,
    MemberData,
    PartitionAssignor,
    RebalanceProtocol,
    Subscription,
    UserDataError,
    common_rebalance_protocol,
    decode_member_data,
    encode_member_data,
    member_order,
)
from strand.consumer.assignors.cooperative_sticky import (
    CooperativeStickyAssignor,
    partitions_to_revoke,
    validate_cooperative_assignment,
)
from strand.consumer.assignors.range import RangeAssignor
from strand.consumer.assignors.round_robin import RoundRobinAssignor
from strand.consumer.assignors.sticky import AbstractStickyAssignor, StickyAssignor

__all__ = [
    "ASSIGNORS",
    "DEFAULT_GENERATION",
    "MEMBER_DATA_VERSION",
    "AbstractStickyAssignor",
    "Assignment",
    "CooperativeStickyAssignor",
    "MemberData",
    "PartitionAssignor",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "UserDataError",
    "assignor_for",
    "common_rebalance_protocol",
    "decode_member_data",
    "encode_member_data",
    "member_order",
    "partitions_to_revoke",
    "validate_cooperative_assignment",
]

ASSIGNORS: dict[str, type[PartitionAssignor]] = {
    cls.name: cls
    for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}


def assignor_for(name: str) -> PartitionAssignor:
    """A new assignor of this Kafka name; ``ValueError`` naming the known ones if unknown."""
    try:
        return ASSIGNORS[name]()
    except KeyError:
        raise ValueError(f"unknown partition assignor {name!r}; known: "
                         f"{', '.join(sorted(ASSIGNORS))}") from None
