"""Kafka's CooperativeStickyAssignor (``cooperative-sticky``, KIP-429) and the helpers the
cooperative protocol needs around it.

It computes the same balanced, sticky target as ``sticky``, but members keep their
partitions while the group rebalances, so a partition may not be given to one
member while another still owns it. A partition the target moves from A to B is
therefore left out of this round's assignment: A, seeing it is no longer assigned,
revokes it (commits, stops fetching) and rejoins; in that follow-up rebalance nobody
owns it and B gets it. Partitions nobody owned (new partitions, or those of members
that left) are assigned at once.

Owned partitions and generation travel in the subscription's ``owned_partitions``
and ``generation`` fields (ConsumerProtocol v1/v2); the user data only repeats the
generation, for subscriptions that lack it (Kafka's cooperative user data v0).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from strand.client.structs import TopicPartition
from strand.consumer.assignors.base import (
    DEFAULT_GENERATION,
    Assignment,
    MemberData,
    RebalanceProtocol,
    Subscription,
    UserDataError,
    decode_member_data,
    encode_member_data,
)
from strand.consumer.assignors.sticky import AbstractStickyAssignor

__all__ = [
    "CooperativeStickyAssignor",
    "partitions_to_revoke",
    "validate_cooperative_assignment",
]

log = logging.getLogger(__name__)

_Assigned = Mapping[str, Assignment] | Mapping[str, Iterable[TopicPartition]]


class CooperativeStickyAssignor(AbstractStickyAssignor):
    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def member_data(self, subscription: Subscription) -> MemberData:
        """Owned partitions from the subscription; its generation, or when it has none
        (-1) the one in the user data (undecodable user data: no generation, as
        Kafka's DEFAULT_GENERATION)."""
        generation = subscription.generation
        if generation == DEFAULT_GENERATION and subscription.user_data:
            try:
                generation = decode_member_data(subscription.user_data).generation
            except UserDataError as e:
                log.warning("ignoring a member's generation: %s", e)
        return MemberData(subscription.owned_partitions, generation)

    def subscription_user_data(self, owned: Iterable[TopicPartition], generation: int) -> bytes:
        return encode_member_data(MemberData((), generation))

    def _assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        target, ownership = self.sticky_target(partitions_per_topic, subscriptions)
        owners = ownership.owners()
        # Held back: what another member (validly) owns, and what two members claimed
        # in the same generation (Kafka's partitionsTransferringOwnership).
        return {member: [tp for tp in partitions
                         if tp not in ownership.contested and owners.get(tp, member) == member]
                for member, partitions in target.items()}


def _partitions(assignment: _Assigned, member: str) -> set[TopicPartition]:
    value = assignment.get(member, ())
    return set(value.partitions if isinstance(value, Assignment) else value)


def partitions_to_revoke(
    owned: Mapping[str, Iterable[TopicPartition]], assignment: _Assigned
) -> dict[str, tuple[TopicPartition, ...]]:
    """For every member in ``owned`` (member id -> the partitions it owned going into the
    rebalance), the partitions it owns that ``assignment`` no longer gives it, sorted:
    what it must revoke. A member absent from ``assignment`` revokes everything. Under
    the cooperative protocol a member with anything to revoke rejoins at once (the
    follow-up rebalance); under the eager one members revoke everything anyway."""
    return {member: tuple(sorted(set(parts) - _partitions(assignment, member)))
            for member, parts in sorted(owned.items())}


def validate_cooperative_assignment(
    owned: Mapping[str, Iterable[TopicPartition]], assignment: _Assigned
) -> None:
    """Raise ``ValueError`` if ``assignment`` gives a member a partition that another
    member of it is only now revoking (Kafka's ConsumerCoordinator
    validateCooperativeAssignment): such a partition would be owned twice at once.
    Members of ``owned`` absent from ``assignment`` (they left) are not considered."""
    current = {m: parts for m, parts in owned.items() if m in assignment}
    revoked: dict[TopicPartition, str] = {}
    for member, parts in partitions_to_revoke(current, assignment).items():
        revoked.update((tp, member) for tp in parts)
    clashes = []
    for member in sorted(assignment):
        added = _partitions(assignment, member) - set(owned.get(member, ()))
        clashes += [f"{tp} to {member} (still owned by {revoked[tp]})"
                    for tp in sorted(added) if tp in revoked]
    if clashes:
        raise ValueError("cooperative assignment gives out partitions before their owners "
                         "revoke them: " + ", ".join(clashes))
