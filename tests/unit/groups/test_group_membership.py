"""The group membership state machine (services/groups/membership.py), driven with an
explicit clock: joins and generations, the initial rebalance delay, sync, heartbeats,
session expiry, static membership, leaving, and generation-fenced commits."""

from __future__ import annotations

from services.groups.membership import Group, GroupState, JoinOutcome, Protocol
from strand.errors import ErrorCode

RANGE = (Protocol("range", b"sub-range"),)
SESSION = 10_000
REBALANCE = 30_000


def state(group: Group) -> GroupState:
    """The group's state (a call, so that mypy does not narrow it across mutations)."""
    return group.state


def join(group: Group, member_id: str = "", now: float = 0, *,
         instance: str | None = None, protocols: tuple[Protocol, ...] = RANGE,
         client: str = "c") -> JoinOutcome | None:
    return group.join(member_id, instance, client, "consumer", protocols, SESSION, REBALANCE,
                      now)


def new_member(group: Group, now: float = 0, **kwargs: object) -> str:
    """KIP-394: the first join gets an id (MEMBER_ID_REQUIRED), the second joins."""
    first = join(group, "", now, **kwargs)  # type: ignore[arg-type]
    assert first is not None and first.error == ErrorCode.MEMBER_ID_REQUIRED
    assert join(group, first.member_id, now, **kwargs) is None  # type: ignore[arg-type]
    return first.member_id


def stable_group(members: int = 2) -> tuple[Group, list[str]]:
    group = Group("g", initial_rebalance_delay_ms=0)
    ids = [new_member(group) for _ in range(members)]
    assert group.rebalance_due(0)
    answers, removed = group.complete_rebalance(0)
    assert not removed and set(answers) == set(ids)
    leader = group.leader_id
    assignments = {m: m.encode() for m in ids}
    assert group.sync(leader, group.generation, None, assignments, 0) == (ErrorCode.NONE,
                                                                          leader.encode())
    group.assignments_delivered(0)  # the coordinator: stored and answered
    assert state(group) == GroupState.STABLE
    return group, ids


def test_members_need_an_id_first_then_join_a_new_generation() -> None:
    group = Group("g", initial_rebalance_delay_ms=0)
    a = new_member(group)
    assert state(group) == GroupState.PREPARING_REBALANCE
    assert group.rebalance_due(0)
    answers, _ = group.complete_rebalance(0)
    assert state(group) == GroupState.COMPLETING_REBALANCE
    outcome = answers[a]
    assert (outcome.error, outcome.generation, outcome.protocol, outcome.leader_id) == (
        ErrorCode.NONE, 1, "range", a)
    assert outcome.members == ((a, None, b"sub-range"),)  # the leader sees subscriptions


def test_an_unknown_member_id_is_refused() -> None:
    group = Group("g")
    outcome = join(group, "made-up")
    assert outcome is not None and outcome.error == ErrorCode.UNKNOWN_MEMBER_ID


def test_the_initial_delay_gathers_a_starting_fleet_into_one_rebalance() -> None:
    group = Group("g", initial_rebalance_delay_ms=3000)
    new_member(group, now=0)
    assert not group.rebalance_due(1000)
    new_member(group, now=2500)  # extends the delay to 5500
    assert not group.rebalance_due(5000)
    assert group.rebalance_due(5500)
    answers, _ = group.complete_rebalance(0)
    assert len(answers) == 2 and group.generation == 1


def test_followers_wait_for_the_leaders_sync() -> None:
    group = Group("g", initial_rebalance_delay_ms=0)
    a, b = new_member(group), new_member(group)
    group.complete_rebalance(0)
    follower = b if group.leader_id == a else a
    assert group.sync(follower, 1, None, None, 0) == (ErrorCode.NONE, None)  # waits
    error, mine = group.sync(group.leader_id, 1, None, {a: b"A", b: b"B"}, 0)
    assert error == ErrorCode.NONE and state(group) == GroupState.STABLE
    assert mine == (b"A" if group.leader_id == a else b"B")
    assert group.sync(follower, 1, None, None, 0) == (ErrorCode.NONE,
                                                       b"A" if follower == a else b"B")


def test_a_new_member_rebalances_and_old_members_learn_by_heartbeat() -> None:
    group, (a, b) = stable_group()
    assert group.heartbeat(a, 1, None, 100) == ErrorCode.NONE
    c = new_member(group, now=200)
    assert state(group) == GroupState.PREPARING_REBALANCE
    assert group.heartbeat(a, 1, None, 300) == ErrorCode.REBALANCE_IN_PROGRESS
    assert not group.rebalance_due(300)  # a and b have not rejoined yet
    assert join(group, a, 400) is None and join(group, b, 400) is None
    assert group.rebalance_due(400)
    answers, removed = group.complete_rebalance(400)
    assert set(answers) == {a, b, c} and not removed and group.generation == 2


def test_members_that_do_not_rejoin_in_time_are_removed() -> None:
    group, (a, b) = stable_group()
    new_member(group, now=1000)
    assert join(group, a, 2000) is None
    assert not group.rebalance_due(2000)
    assert group.rebalance_due(1000 + REBALANCE)  # b never rejoined
    answers, removed = group.complete_rebalance(1000 + REBALANCE)
    assert removed == [b] and b not in answers


def test_session_expiry_removes_a_silent_member_and_rebalances() -> None:
    group, (a, b) = stable_group()
    assert group.heartbeat(a, 1, None, 9000) == ErrorCode.NONE
    assert group.expire(SESSION + 1) == [b]
    assert state(group) == GroupState.PREPARING_REBALANCE
    assert group.heartbeat(b, 1, None, SESSION + 2) == ErrorCode.UNKNOWN_MEMBER_ID


def test_the_last_member_leaving_empties_the_group() -> None:
    group, (a, b) = stable_group()
    assert group.leave(a, 10) == ErrorCode.NONE
    assert state(group) == GroupState.PREPARING_REBALANCE
    assert group.leave(b, 20) == ErrorCode.NONE
    assert group.rebalance_due(20)
    answers, _ = group.complete_rebalance(0)
    assert answers == {} and state(group) == GroupState.EMPTY
    assert group.leave(b, 30) == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_zombie_from_an_old_generation_is_fenced() -> None:
    group, (a, b) = stable_group()
    new_member(group, now=10)
    join(group, a, 20)
    join(group, b, 20)
    group.complete_rebalance(0)
    group.sync(group.leader_id, 2, None, {}, 30)
    assert group.check_commit(a, 1) == ErrorCode.ILLEGAL_GENERATION
    assert group.heartbeat(a, 1, None, 40) == ErrorCode.ILLEGAL_GENERATION
    assert group.check_commit(a, 2) == ErrorCode.NONE
    assert group.check_commit("", -1) == ErrorCode.GROUP_NOT_EMPTY  # members present


def test_commits_wait_out_the_sync_phase() -> None:
    group = Group("g", initial_rebalance_delay_ms=0)
    a = new_member(group)
    group.complete_rebalance(0)
    assert group.check_commit(a, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    group.sync(a, 1, None, {a: b"x"}, 0)
    assert group.check_commit(a, 1) == ErrorCode.NONE


def test_standalone_commits_only_into_an_empty_group() -> None:
    group = Group("g")
    assert group.check_commit("", -1) == ErrorCode.NONE


def test_a_static_member_restarting_keeps_its_assignment_without_a_rebalance() -> None:
    group = Group("g", initial_rebalance_delay_ms=0)
    first = join(group, "", 0, instance="host-1")
    assert first is None  # static members skip MEMBER_ID_REQUIRED
    old_id = next(iter(group.members))
    group.complete_rebalance(0)
    group.sync(old_id, 1, "host-1", {old_id: b"mine"}, 0)
    outcome = join(group, "", 100, instance="host-1")  # restarted: no member id
    assert outcome is not None and outcome.error == ErrorCode.NONE
    assert outcome.member_id != old_id and outcome.generation == 1
    assert state(group) == GroupState.STABLE
    assert group.sync(outcome.member_id, 1, "host-1", None, 100) == (ErrorCode.NONE, b"mine")
    # The old incarnation is fenced.
    assert group.heartbeat(old_id, 1, "host-1", 100) == ErrorCode.FENCED_INSTANCE_ID
    fenced = join(group, old_id, 100, instance="host-1")
    assert fenced is not None and fenced.error == ErrorCode.FENCED_INSTANCE_ID


def test_members_must_share_an_assignor() -> None:
    group = Group("g", initial_rebalance_delay_ms=0)
    new_member(group, protocols=(Protocol("range", b""), Protocol("sticky", b"")))
    refused = join(group, "", 0, protocols=(Protocol("roundrobin", b""),))
    assert refused is not None and refused.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_the_protocol_is_the_one_members_prefer() -> None:
    group = Group("g", initial_rebalance_delay_ms=0)
    both = (Protocol("cooperative-sticky", b""), Protocol("range", b""))
    new_member(group, protocols=both)
    new_member(group, protocols=both)
    new_member(group, protocols=(Protocol("range", b""), Protocol("cooperative-sticky", b"")))
    answers, _ = group.complete_rebalance(0)
    assert {a.protocol for a in answers.values()} == {"cooperative-sticky"}


def test_a_stable_follower_rejoining_unchanged_gets_the_current_generation() -> None:
    group, (a, b) = stable_group()
    follower = b if group.leader_id == a else a
    outcome = join(group, follower, 50)
    assert outcome is not None and outcome.generation == 1 and state(group) == GroupState.STABLE


def test_a_long_join_does_not_count_against_the_members_session() -> None:
    group, (a, b) = stable_group()
    new_member(group, now=1000)
    assert join(group, a, 1000) is None  # a waits in its join for b, far past its session
    # b, busy between polls, heartbeats (told to rejoin); a, in its join, never expires.
    assert group.heartbeat(b, 1, None, 1000 + SESSION * 2) == ErrorCode.REBALANCE_IN_PROGRESS
    assert group.expire(1000 + SESSION * 2 + 1) == []
    late = 1000 + REBALANCE - 1
    assert join(group, b, late) is None
    answers, removed = group.complete_rebalance(late)
    assert not removed and len(answers) == 3
    assert group.expire(late + SESSION - 1) == []  # the session counts from completion
    assert group.next_expiry_ms() == late + SESSION


def test_members_waiting_for_their_assignment_are_not_expired() -> None:
    group = Group("g", initial_rebalance_delay_ms=0)
    a, b = new_member(group), new_member(group)
    group.complete_rebalance(0)
    follower = b if group.leader_id == a else a
    # The follower waits in its sync for the leader's assignment, past its session.
    assert group.sync(follower, 1, None, None, 100) == (ErrorCode.NONE, None)
    assert group.heartbeat(group.leader_id, 1, None, SESSION) == ErrorCode.NONE
    assert group.expire(SESSION + 500) == []
    # The leader syncs; the assignment is being stored: nobody expires meanwhile.
    error, _ = group.sync(group.leader_id, 1, None, {a: b"A", b: b"B"}, SESSION + 600)
    assert error == ErrorCode.NONE and state(group) == GroupState.STABLE
    assert group.expire(3 * SESSION) == [] and group.next_expiry_ms() is None
    group.assignments_delivered(3 * SESSION)  # stored and answered: sessions restart
    assert group.next_expiry_ms() == 4 * SESSION
    assert sorted(group.expire(4 * SESSION + 1)) == sorted([a, b])


def test_a_rebalance_releases_members_waiting_in_their_sync() -> None:
    group = Group("g", initial_rebalance_delay_ms=0)
    a, b = new_member(group), new_member(group)
    group.complete_rebalance(0)
    follower = b if group.leader_id == a else a
    assert group.sync(follower, 1, None, None, 100) == (ErrorCode.NONE, None)
    assert group.leave(group.leader_id, 200) == ErrorCode.NONE  # the rebalance answers it
    assert group.next_expiry_ms() == 200 + SESSION
