"""One consumer group's membership, as Kafka's group coordinator keeps it
(``GroupMetadata`` / ``GroupCoordinator``), without any I/O or timers: the async
coordinator feeds it requests and the time, and acts on what it answers.

States::

    EMPTY --join--> PREPARING_REBALANCE --all joined / timeout--> COMPLETING_REBALANCE
      ^                  ^      |                                      | leader's sync
      |                  |      v                                      v
      +--last leaves-----+---- STABLE <--------------------------------+
    (DEAD: the group was deleted or its shard moved away)

* Join (KIP-394): a member without an id gets one and MEMBER_ID_REQUIRED, and
  joins again with it. Every join (re)starts a rebalance unless it is a known
  member joining with unchanged protocols while the group is stable (then it
  simply gets the current generation back: the leader's answer).
* A rebalance completes once every member has joined again, or when the largest
  rebalance timeout has passed (members that did not rejoin are removed). A group
  that was empty waits ``initial_rebalance_delay_ms`` more, extended by each new
  join up to the rebalance timeout, so a starting fleet joins in one rebalance.
* Completing: a new generation, a protocol every member supports (the most
  preferred), a leader (the old one if it stayed, else the first to join). The
  leader gets every member's subscription and sends the assignment with its sync.
* Static members (KIP-345, ``group.instance.id``): a rejoin with a known instance
  id replaces (fences) the old member id and keeps its assignment; a static member
  leaving on its own does not trigger a rebalance until its session times out.
* Heartbeats keep members alive (``session_timeout_ms``); during a rebalance they
  answer REBALANCE_IN_PROGRESS so that members rejoin.
* Offset commits are fenced by generation (a zombie's commit is refused).
"""

from __future__ import annotations

import enum
import itertools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from strand.errors import ErrorCode

__all__ = ["Group", "GroupState", "JoinOutcome", "Member", "Protocol"]

_member_ids = itertools.count(1)


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class Protocol:
    name: str  # an assignor: "range", "roundrobin", "sticky", "cooperative-sticky"
    metadata: bytes  # the member's subscription, opaque to the coordinator


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    last_heard_ms: float
    joined_generation: int = -1  # the generation this member last joined (-1: pending)
    assignment: bytes = b""
    awaiting_join: bool = False
    # Waiting for its assignment (the leader's sync, then its write): alive, as a
    # member waiting in its join is (Kafka's hasSatisfiedHeartbeat).
    awaiting_sync: bool = False
    client_host: str = ""  # where its join came from, as the gateway saw it

    @property
    def waiting(self) -> bool:
        return self.awaiting_join or self.awaiting_sync

    def supports(self, protocol: str) -> bool:
        return any(p.name == protocol for p in self.protocols)

    def metadata(self, protocol: str) -> bytes:
        return next(p.metadata for p in self.protocols if p.name == protocol)


@dataclass(frozen=True, slots=True)
class JoinOutcome:
    """What a member's JoinGroup is answered (once the rebalance completes)."""

    error: ErrorCode
    member_id: str
    generation: int = -1
    protocol: str = ""
    leader_id: str = ""
    # For the leader only: every member's (member id, instance id, subscription).
    members: tuple[tuple[str, str | None, bytes], ...] = ()


def new_member_id(client_id: str) -> str:
    return f"{client_id or 'member'}-{uuid.uuid4().hex[:12]}-{next(_member_ids)}"


@dataclass
class Group:
    group_id: str
    initial_rebalance_delay_ms: int = 3000
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str = ""
    protocol: str = ""
    leader_id: str = ""
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_member_ids: set[str] = field(default_factory=set)  # KIP-394: id given, not joined
    rebalance_deadline_ms: float = 0.0
    initial_delay_until_ms: float = 0.0

    # -- joining ------------------------------------------------------------------------------

    def join(self, member_id: str, group_instance_id: str | None, client_id: str,
             protocol_type: str, protocols: Sequence[Protocol], session_timeout_ms: int,
             rebalance_timeout_ms: int, now_ms: float, client_host: str = ""
             ) -> JoinOutcome | None:
        """Handle a JoinGroup. Returns an immediate answer (an error, MEMBER_ID_REQUIRED,
        or the current generation for an unchanged stable member), or None: the member
        waits for the rebalance to complete (:meth:`complete_rebalance`)."""
        if self.state == GroupState.DEAD:
            return JoinOutcome(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if not protocols or (self.protocol_type and protocol_type != self.protocol_type):
            return JoinOutcome(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if self.members and not any(
                all(m.supports(p.name) for m in self.members.values()
                    if m.member_id != member_id) for p in protocols):
            return JoinOutcome(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        protocols = tuple(protocols)
        if group_instance_id is not None:
            known = self.static_members.get(group_instance_id)
            if known is not None and member_id and member_id != known:
                return JoinOutcome(ErrorCode.FENCED_INSTANCE_ID, member_id)
            if known is not None and not member_id:
                return self._replace_static(known, group_instance_id, client_id, protocols,
                                            session_timeout_ms, rebalance_timeout_ms, now_ms,
                                            client_host)
            if known is None and not member_id:
                member_id = new_member_id(client_id)
                self.pending_member_ids.add(member_id)
        if not member_id:
            member_id = new_member_id(client_id)
            self.pending_member_ids.add(member_id)
            return JoinOutcome(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        member = self.members.get(member_id)
        if member is None:
            if member_id not in self.pending_member_ids:
                return JoinOutcome(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            self.pending_member_ids.discard(member_id)
            member = Member(member_id, group_instance_id, client_id, protocols,
                            session_timeout_ms, rebalance_timeout_ms, now_ms,
                            client_host=client_host)
            self.members[member_id] = member
            if group_instance_id is not None:
                self.static_members[group_instance_id] = member_id
            self.protocol_type = protocol_type
            member.awaiting_join = True
            self.prepare_rebalance(now_ms, new_member=True)
            return None
        member.last_heard_ms = now_ms
        member.client_host = client_host or member.client_host
        unchanged = (member.protocols == protocols
                     and member.joined_generation == self.generation)
        member.protocols = protocols
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        if self.state == GroupState.STABLE and unchanged and member_id != self.leader_id:
            return self._outcome_for(member)
        member.awaiting_join = True
        if self.state != GroupState.PREPARING_REBALANCE:
            self.prepare_rebalance(now_ms, new_member=False)
        return None

    def _replace_static(self, old_id: str, instance_id: str, client_id: str,
                        protocols: tuple[Protocol, ...], session_timeout_ms: int,
                        rebalance_timeout_ms: int, now_ms: float, client_host: str
                        ) -> JoinOutcome | None:
        """A static member restarted: a new member id fences the old one; with the group
        stable and the same protocols it keeps its assignment without a rebalance."""
        old = self.members.pop(old_id)
        member = Member(new_member_id(client_id), instance_id, client_id, protocols,
                        session_timeout_ms, rebalance_timeout_ms, now_ms,
                        joined_generation=old.joined_generation, assignment=old.assignment,
                        client_host=client_host)
        self.members[member.member_id] = member
        self.static_members[instance_id] = member.member_id
        if self.leader_id == old_id:
            self.leader_id = member.member_id
        if self.state == GroupState.STABLE and old.protocols == protocols:
            return self._outcome_for(member)
        member.awaiting_join = True
        if self.state != GroupState.PREPARING_REBALANCE:
            self.prepare_rebalance(now_ms, new_member=False)
        return None

    def prepare_rebalance(self, now_ms: float, new_member: bool) -> None:
        """Start a rebalance (PreparingRebalance): the members must join again. Also
        called by the coordinator when storing a completed assignment failed."""
        was_empty = self.state == GroupState.EMPTY
        self.state = GroupState.PREPARING_REBALANCE
        for member in self.members.values():
            if member.awaiting_sync:  # its sync is answered REBALANCE_IN_PROGRESS now
                member.awaiting_sync = False
                member.last_heard_ms = now_ms
        timeout = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        if was_empty:
            self.rebalance_deadline_ms = now_ms + timeout
            self.initial_delay_until_ms = min(now_ms + self.initial_rebalance_delay_ms,
                                              self.rebalance_deadline_ms)
        else:
            self.rebalance_deadline_ms = max(self.rebalance_deadline_ms, now_ms + timeout) \
                if self.rebalance_deadline_ms > now_ms else now_ms + timeout
            if new_member and self.initial_delay_until_ms > now_ms:
                # Still in the initial delay: each new member extends it (KIP-134).
                self.initial_delay_until_ms = min(now_ms + self.initial_rebalance_delay_ms,
                                                  self.rebalance_deadline_ms)

    # -- completing a rebalance ---------------------------------------------------------------

    def rebalance_due(self, now_ms: float) -> bool:
        """Every member has joined again (after the initial delay), or time is up."""
        if self.state != GroupState.PREPARING_REBALANCE:
            return False
        if now_ms >= self.rebalance_deadline_ms:
            return True
        if now_ms < self.initial_delay_until_ms:
            return False
        return all(m.awaiting_join for m in self.members.values())

    def next_deadline_ms(self) -> float | None:
        """When :meth:`rebalance_due` may next turn true by time alone."""
        if self.state != GroupState.PREPARING_REBALANCE:
            return None
        if self.initial_delay_until_ms > 0 and all(m.awaiting_join
                                                   for m in self.members.values()):
            return min(self.initial_delay_until_ms, self.rebalance_deadline_ms)
        return self.rebalance_deadline_ms

    def complete_rebalance(self, now_ms: float) -> tuple[dict[str, JoinOutcome], list[str]]:
        """Close the join phase: (answer per joined member, member ids removed because
        they did not rejoin in time). Every member's session starts again now, as
        Kafka's does: one that waited in its join longer than its session timeout
        is not expired for it."""
        removed = [m.member_id for m in self.members.values() if not m.awaiting_join]
        for member_id in removed:
            self._remove(member_id)
        self.initial_delay_until_ms = 0.0
        if not self.members:
            self.generation += 1
            self.state = GroupState.EMPTY
            self.protocol = self.leader_id = ""
            return {}, removed
        self.generation += 1
        self.protocol = self._select_protocol()
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members))
        self.state = GroupState.COMPLETING_REBALANCE
        answers = {}
        for member in self.members.values():
            member.awaiting_join = False
            member.last_heard_ms = now_ms
            member.joined_generation = self.generation
            member.assignment = b""
            answers[member.member_id] = self._outcome_for(member)
        return answers, removed

    def _select_protocol(self) -> str:
        """The protocol every member supports that ranks best in members' preferences
        (Kafka: each member votes for its most preferred candidate)."""
        members = list(self.members.values())
        candidates = [p.name for p in members[0].protocols
                      if all(m.supports(p.name) for m in members)]
        votes = {name: 0 for name in candidates}
        for member in members:
            choice = next(p.name for p in member.protocols if p.name in votes)
            votes[choice] += 1
        return max(candidates, key=lambda name: (votes[name], -candidates.index(name)))

    def _outcome_for(self, member: Member) -> JoinOutcome:
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if member.member_id == self.leader_id:
            members = tuple((m.member_id, m.group_instance_id, m.metadata(self.protocol))
                            for m in self.members.values())
        return JoinOutcome(ErrorCode.NONE, member.member_id, self.generation, self.protocol,
                           self.leader_id, members)

    # -- sync, heartbeat, leave ---------------------------------------------------------------

    def _check_instance(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """The group is alive and no newer member holds this static instance."""
        if self.state == GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group_instance_id is not None:
            known = self.static_members.get(group_instance_id)
            if known is not None and known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        return ErrorCode.NONE

    def check_member(self, member_id: str, generation: int,
                     group_instance_id: str | None = None) -> ErrorCode:
        error = self._check_instance(member_id, group_instance_id)
        if error != ErrorCode.NONE:
            return error
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != self.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def sync(self, member_id: str, generation: int, group_instance_id: str | None,
             assignments: dict[str, bytes] | None, now_ms: float
             ) -> tuple[ErrorCode, bytes | None]:
        """(error, assignment). Assignment None with NONE: wait for the leader's sync.
        The leader's sync (``assignments`` given) makes the group STABLE."""
        error = self.check_member(member_id, generation, group_instance_id)
        if error != ErrorCode.NONE:
            return error, b""
        member = self.members[member_id]
        member.last_heard_ms = now_ms
        if self.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS, b""
        if self.state == GroupState.STABLE:
            return ErrorCode.NONE, member.assignment
        if member_id == self.leader_id and assignments is not None:
            for target in self.members.values():
                target.assignment = assignments.get(target.member_id, b"")
                target.awaiting_sync = True  # until the assignment is stored and sent
            self.state = GroupState.STABLE
            return ErrorCode.NONE, member.assignment
        member.awaiting_sync = True
        return ErrorCode.NONE, None

    def assignments_delivered(self, now_ms: float) -> None:
        """The leader's assignment is stored and every waiting member has its answer:
        their sessions count from now."""
        for member in self.members.values():
            if member.awaiting_sync:
                member.awaiting_sync = False
                member.last_heard_ms = now_ms

    def heartbeat(self, member_id: str, generation: int, group_instance_id: str | None,
                  now_ms: float) -> ErrorCode:
        error = self.check_member(member_id, generation, group_instance_id)
        if error == ErrorCode.ILLEGAL_GENERATION and self.state == GroupState.PREPARING_REBALANCE:
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error not in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS):
            return error
        self.members[member_id].last_heard_ms = now_ms
        if self.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, member_id: str, now_ms: float) -> ErrorCode:
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._remove(member_id)
        self._after_departure(now_ms)
        return ErrorCode.NONE

    def expire(self, now_ms: float) -> list[str]:
        """Remove members not heard from within their session timeout (members waiting
        in a join or a sync count as heard: the rebalance timeout covers them)."""
        gone = [m.member_id for m in self.members.values()
                if not m.waiting and now_ms - m.last_heard_ms > m.session_timeout_ms]
        for member_id in gone:
            self._remove(member_id)
        if gone:
            self._after_departure(now_ms)
        return gone

    def next_expiry_ms(self) -> float | None:
        times = [m.last_heard_ms + m.session_timeout_ms for m in self.members.values()
                 if not m.waiting]
        return min(times) if times else None

    def _remove(self, member_id: str) -> None:
        member = self.members.pop(member_id)
        if member.group_instance_id is not None and \
                self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]

    def _after_departure(self, now_ms: float) -> None:
        if self.state == GroupState.PREPARING_REBALANCE:
            return  # the join phase in progress accounts for it
        if not self.members:
            self.state = GroupState.EMPTY
            self.generation += 1
            self.protocol = self.leader_id = ""
            return
        self.prepare_rebalance(now_ms, new_member=False)

    # -- offsets ------------------------------------------------------------------------------

    def check_txn_commit(self, member_id: str, generation: int,
                         group_instance_id: str | None = None) -> ErrorCode:
        """May a transactional producer commit offsets for this member (KIP-447)?
        Kafka's rules: a named member must be in the group, a generation (>= 0) must
        be the current one; a producer without the consumer's group metadata (no
        member, generation -1) is not checked."""
        error = self._check_instance(member_id, group_instance_id)
        if error != ErrorCode.NONE:
            return error
        if member_id and member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation >= 0 and generation != self.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def check_commit(self, member_id: str, generation: int,
                     group_instance_id: str | None = None) -> ErrorCode:
        """May this member commit offsets now? A standalone commit (no member id,
        generation -1, as an admin's reset makes) is allowed only while the group has no
        members: GROUP_NOT_EMPTY otherwise (Kafka answers UNKNOWN_MEMBER_ID, which
        misleads: no member is named, the group is busy)."""
        if self.state == GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not member_id and generation < 0:
            return ErrorCode.NONE if not self.members else ErrorCode.GROUP_NOT_EMPTY
        error = self.check_member(member_id, generation, group_instance_id)
        if error != ErrorCode.NONE:
            return error
        if self.state == GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE
