"""Partition leadership and ISR decisions (services/controller/leadership.py).

The functions are pure: a partition record and the live / shutting-down brokers in,
the next record (or None, or a typed error) out. Each rule of the module docstring is
checked on hand-picked records, then hypothesis checks the safety properties of
``elect_leader`` and ``apply_isr_change`` on random records and membership views:

* a clean election only ever picks a live, not-stopping member of the old ISR;
* the ISR never becomes empty, never gains a broker that is neither a replica nor an
  old ISR member, and always contains the leader;
* epochs never decrease; ``leader_epoch`` moves exactly when the leader does and
  ``partition_epoch`` exactly when anything does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.controller.leadership import (
    IsrChange,
    apply_isr_change,
    elect_leader,
    move_leadership_away,
    preferred_leader,
)
from strand.cluster.model import NO_LEADER, PartitionRecord
from strand.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidRequestError,
    InvalidUpdateVersionError,
    NotLeaderOrFollowerError,
    StrandError,
    UnknownLeaderEpochError,
)

PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

LEADER_EPOCH = 4
PARTITION_EPOCH = 9
ALL = frozenset({1, 2, 3})

# ---------------------------------------------------------------- helpers


def record(
    replicas: Sequence[int] = (1, 2, 3),
    isr: Sequence[int] | None = None,
    leader: int = 1,
    leader_epoch: int = LEADER_EPOCH,
    partition_epoch: int = PARTITION_EPOCH,
) -> PartitionRecord:
    """A partition record of topic "orders", partition 0 (the ISR defaults to all replicas)."""
    return PartitionRecord(
        topic="orders",
        partition=0,
        replicas=tuple(replicas),
        leader=leader,
        leader_epoch=leader_epoch,
        isr=tuple(replicas if isr is None else isr),
        partition_epoch=partition_epoch,
    )


def changed(before: PartitionRecord, after: PartitionRecord | None) -> PartitionRecord:
    """``after``, checked to be a real change of ``before`` with the epochs bumped right."""
    assert after is not None, "expected a change"
    assert after.partition_epoch == before.partition_epoch + 1
    bump = 1 if after.leader != before.leader else 0
    assert after.leader_epoch == before.leader_epoch + bump
    assert (after.topic, after.partition, after.replicas) == (
        before.topic, before.partition, before.replicas)
    return after


def change(
    new_isr: Sequence[int],
    broker_id: int = 1,
    leader_epoch: int = LEADER_EPOCH,
    partition_epoch: int = PARTITION_EPOCH,
) -> IsrChange:
    return IsrChange(broker_id=broker_id, leader_epoch=leader_epoch,
                     partition_epoch=partition_epoch, new_isr=tuple(new_isr))


# ---------------------------------------------------------------- elect_leader: ISR upkeep


def test_nothing_to_do_returns_none() -> None:
    assert elect_leader(record(), ALL) is None


def test_nothing_to_do_with_unclean_enabled_returns_none() -> None:
    assert elect_leader(record(isr=(1, 2)), ALL, unclean=True) is None


def test_live_brokers_outside_the_replicas_change_nothing() -> None:
    assert elect_leader(record(), {1, 2, 3, 4, 5}) is None


def test_dead_follower_leaves_the_isr_and_the_leader_stays() -> None:
    before = record()
    after = changed(before, elect_leader(before, {1, 3}))
    assert after.leader == 1
    assert after.isr == (1, 3)
    assert after.leader_epoch == LEADER_EPOCH  # the leader did not change


def test_stopping_follower_leaves_the_isr_and_the_leader_stays() -> None:
    before = record()
    after = changed(before, elect_leader(before, ALL, shutting_down={2}))
    assert (after.leader, after.isr, after.leader_epoch) == (1, (1, 3), LEADER_EPOCH)


def test_dead_and_stopping_followers_leave_together() -> None:
    before = record(replicas=(1, 2, 3, 4))
    after = changed(before, elect_leader(before, {1, 3, 4}, shutting_down={4}))
    assert (after.leader, after.isr, after.leader_epoch) == (1, (1, 3), LEADER_EPOCH)


def test_all_followers_gone_leaves_the_leader_alone_in_the_isr() -> None:
    before = record()
    after = changed(before, elect_leader(before, {1}))
    assert (after.leader, after.isr) == (1, (1,))


def test_a_dead_replica_outside_the_isr_changes_nothing() -> None:
    assert elect_leader(record(isr=(1, 2)), {1, 2}) is None


def test_isr_is_put_back_in_replica_order() -> None:
    """The ISR is kept in replica order; an out-of-order ISR is normalized on change."""
    before = record(replicas=(3, 1, 2), isr=(2, 1, 3), leader=3)
    after = changed(before, elect_leader(before, {1, 2, 3}, shutting_down={1}))
    assert after.isr == (3, 2)
    assert after.leader == 3


# ---------------------------------------------------------------- elect_leader: elections


def test_dead_leader_is_replaced_by_the_next_in_sync_replica() -> None:
    before = record()
    after = changed(before, elect_leader(before, {2, 3}))
    assert after.leader == 2
    assert after.isr == (2, 3)
    assert after.leader_epoch == LEADER_EPOCH + 1


def test_stopping_leader_is_replaced_by_the_next_in_sync_replica() -> None:
    before = record()
    after = changed(before, elect_leader(before, ALL, shutting_down={1}))
    assert (after.leader, after.isr) == (2, (2, 3))


def test_new_leader_is_first_in_replica_order_not_isr_order() -> None:
    """Replica order decides, even when the stored ISR lists members differently."""
    before = record(replicas=(1, 2, 3), isr=(3, 2, 1), leader=1)
    after = changed(before, elect_leader(before, {2, 3}))
    assert after.leader == 2
    assert after.isr == (2, 3)


def test_replica_order_decides_with_an_unusual_replica_order() -> None:
    before = record(replicas=(5, 9, 7), isr=(5, 9, 7), leader=5)
    after = changed(before, elect_leader(before, {7, 9}))
    assert after.leader == 9
    assert after.isr == (9, 7)


def test_a_live_replica_outside_the_isr_is_skipped() -> None:
    before = record(isr=(1, 3))
    after = changed(before, elect_leader(before, {2, 3}))
    assert after.leader == 3  # not 2, although 2 comes first and is alive
    assert after.isr == (3,)


def test_dead_leader_and_dead_follower_at_once() -> None:
    before = record(replicas=(1, 2, 3, 4))
    after = changed(before, elect_leader(before, {3, 4}))
    assert (after.leader, after.isr) == (3, (3, 4))


def test_leaderless_partition_gets_a_leader_from_the_isr() -> None:
    before = record(leader=NO_LEADER, isr=(2, 3))
    after = changed(before, elect_leader(before, ALL))
    assert (after.leader, after.isr) == (2, (2, 3))
    assert after.leader_epoch == LEADER_EPOCH + 1


def test_live_leader_outside_the_isr_is_replaced_from_the_isr() -> None:
    """A record whose leader is not in its ISR (inconsistent) is repaired by an election."""
    before = record(leader=1, isr=(2, 3))
    after = changed(before, elect_leader(before, ALL))
    assert (after.leader, after.isr) == (2, (2, 3))


def test_shutting_down_brokers_are_never_elected() -> None:
    before = record()
    after = changed(before, elect_leader(before, {2, 3}, shutting_down={2}))
    assert (after.leader, after.isr) == (3, (3,))


def test_shutting_down_brokers_are_never_elected_uncleanly_either() -> None:
    before = record(isr=(1,))
    after = changed(before, elect_leader(before, {2, 3}, unclean=True, shutting_down={2}))
    assert (after.leader, after.isr) == (3, (3,))


# ---------------------------------------------------------------- elect_leader: no live ISR member


def test_no_live_isr_member_leaves_the_partition_leaderless_keeping_the_isr() -> None:
    before = record(isr=(1,))
    after = changed(before, elect_leader(before, {2, 3}))
    assert after.leader == NO_LEADER
    assert after.isr == (1,)  # never empty: its last member holds every acked record
    assert after.leader_epoch == LEADER_EPOCH + 1


def test_whole_isr_dying_at_once_keeps_the_last_isr() -> None:
    before = record(isr=(1, 2))
    after = changed(before, elect_leader(before, {3}))
    assert after.leader == NO_LEADER
    assert after.isr == (1, 2)


def test_everybody_dead_keeps_the_isr() -> None:
    before = record()
    after = changed(before, elect_leader(before, set()))
    assert (after.leader, after.isr) == (NO_LEADER, (1, 2, 3))


def test_leaderless_partition_without_live_isr_member_is_left_alone() -> None:
    """No churn: a leaderless partition whose ISR is still gone gets no new epochs."""
    assert elect_leader(record(isr=(1,), leader=NO_LEADER), {2, 3}) is None
    assert elect_leader(record(isr=(1,), leader=NO_LEADER), set()) is None


def test_last_isr_member_coming_back_leads_again() -> None:
    first = record(isr=(1,))
    leaderless = changed(first, elect_leader(first, {2, 3}))
    back = changed(leaderless, elect_leader(leaderless, ALL))
    assert (back.leader, back.isr) == (1, (1,))
    assert back.leader_epoch == LEADER_EPOCH + 2
    assert back.partition_epoch == PARTITION_EPOCH + 2


def test_any_member_of_a_kept_isr_can_lead_when_it_comes_back() -> None:
    first = record(isr=(1, 2))
    leaderless = changed(first, elect_leader(first, {3}))
    back = changed(leaderless, elect_leader(leaderless, {2, 3}))
    assert (back.leader, back.isr) == (2, (2,))


def test_a_stopping_sole_isr_member_coming_back_is_not_elected() -> None:
    leaderless = record(isr=(1,), leader=NO_LEADER)
    assert elect_leader(leaderless, ALL, shutting_down={1}) is None


def test_clean_election_never_picks_outside_the_isr() -> None:
    before = record(isr=(1,))
    after = changed(before, elect_leader(before, {2, 3}, unclean=False))
    assert after.leader == NO_LEADER
    assert 2 not in after.isr and 3 not in after.isr


def test_stopping_sole_in_sync_leader_keeps_leading_until_it_exits() -> None:
    """A stopping broker is not an eligible leader, but when it is the only in-sync
    replica and still alive it keeps serving (no leaderless gap, no early unclean
    election); once it is gone the usual rules apply."""
    before = record(isr=(1,))
    assert elect_leader(before, ALL, shutting_down={1}) is None
    assert elect_leader(before, ALL, shutting_down={1}, unclean=True) is None
    after = changed(before, elect_leader(before, {2, 3}, shutting_down={1}))
    assert (after.leader, after.isr) == (NO_LEADER, (1,))


# ---------------------------------------------------------------- elect_leader: unclean election


def test_unclean_election_picks_the_first_live_replica_outside_the_isr() -> None:
    before = record(isr=(1,))
    after = changed(before, elect_leader(before, {2, 3}, unclean=True))
    assert after.leader == 2
    assert after.isr == (2,)
    assert after.leader_epoch == LEADER_EPOCH + 1


def test_unclean_election_follows_replica_order() -> None:
    before = record(replicas=(1, 3, 2), isr=(1,))
    after = changed(before, elect_leader(before, {2, 3}, unclean=True))
    assert (after.leader, after.isr) == (3, (3,))


def test_unclean_election_from_a_leaderless_partition() -> None:
    before = record(isr=(1,), leader=NO_LEADER)
    after = changed(before, elect_leader(before, {3}, unclean=True))
    assert (after.leader, after.isr) == (3, (3,))


def test_unclean_enabled_still_prefers_a_live_isr_member() -> None:
    before = record(isr=(1, 3))
    after = changed(before, elect_leader(before, {2, 3}, unclean=True))
    assert (after.leader, after.isr) == (3, (3,))


def test_unclean_enabled_keeps_a_live_leader() -> None:
    before = record(isr=(1,))
    assert elect_leader(before, ALL, unclean=True) is None


def test_unclean_election_without_any_live_replica_stays_leaderless() -> None:
    before = record(isr=(1,))
    after = changed(before, elect_leader(before, set(), unclean=True))
    assert (after.leader, after.isr) == (NO_LEADER, (1,))


# ---------------------------------------------------------------- elect_leader: properties


@st.composite
def records(draw: st.DrawFn) -> PartitionRecord:
    """Replicas are distinct ids, the ISR a non-empty subset in any order, the leader an
    ISR member or -1."""
    replicas = draw(st.lists(st.integers(0, 7), min_size=1, max_size=5, unique=True))
    isr = draw(st.lists(st.sampled_from(replicas), min_size=1, max_size=len(replicas),
                        unique=True))
    leader = draw(st.sampled_from([NO_LEADER, *isr]))
    return record(replicas=replicas, isr=isr, leader=leader,
                  leader_epoch=draw(st.integers(0, 1_000)),
                  partition_epoch=draw(st.integers(0, 1_000)))


brokers = st.frozensets(st.integers(0, 8), max_size=9)


def in_replica_order(rec: PartitionRecord, members: Collection[int]) -> bool:
    positions = [rec.replicas.index(m) for m in members]
    return positions == sorted(positions)


@PROPS
@given(before=records(), live=brokers, stopping=brokers)
def test_clean_election_properties(before: PartitionRecord, live: frozenset[int],
                                   stopping: frozenset[int]) -> None:
    result = elect_leader(before, live, unclean=False, shutting_down=stopping)
    after = before if result is None else result

    def eligible(broker: int) -> bool:
        return broker in live and broker not in stopping

    if after.leader != NO_LEADER:
        assert after.leader in before.isr, "a clean election picked outside the old ISR"
        keeps_stopping_sole_leader = (
            after.leader == before.leader and before.leader in live and after.isr == (after.leader,)
            and not any(eligible(r) for r in before.isr))
        assert eligible(after.leader) or keeps_stopping_sole_leader, \
            "elected a dead or stopping broker"
        assert after.leader in after.isr
        assert all(eligible(r) or r == after.leader for r in after.isr), \
            "an ineligible broker stayed in the ISR"
    elif result is not None:
        assert not any(eligible(r) for r in before.isr), "leaderless with a live ISR member"
    assert after.isr, "the ISR became empty"
    assert set(after.isr) <= set(before.replicas) | set(before.isr)
    assert len(set(after.isr)) == len(after.isr)

    assert after.leader_epoch >= before.leader_epoch
    assert after.partition_epoch >= before.partition_epoch
    leader_moved = after.leader != before.leader
    assert (after.leader_epoch > before.leader_epoch) == leader_moved
    assert after.leader_epoch == before.leader_epoch + leader_moved
    if result is not None:
        assert after.partition_epoch == before.partition_epoch + 1
        assert (after.leader, after.isr) != (before.leader, before.isr)
        assert in_replica_order(before, after.isr)
        assert dataclasses.replace(after, leader=before.leader, isr=before.isr,
                                   leader_epoch=before.leader_epoch,
                                   partition_epoch=before.partition_epoch) == before

    # A live, in-sync, not-stopping leader is never replaced.
    if before.leader != NO_LEADER and eligible(before.leader) and before.leader in before.isr:
        assert after.leader == before.leader
    # A leader is found whenever an eligible ISR member exists: the first in replica order.
    candidates = [r for r in before.replicas if r in before.isr and eligible(r)]
    if candidates and before.leader not in candidates:
        assert after.leader == candidates[0]
    if candidates:
        assert after.leader != NO_LEADER


@PROPS
@given(before=records(), live=brokers, stopping=brokers, unclean=st.booleans())
def test_election_is_idempotent(before: PartitionRecord, live: frozenset[int],
                                stopping: frozenset[int], unclean: bool) -> None:
    once = elect_leader(before, live, unclean=unclean, shutting_down=stopping)
    if once is not None:
        assert elect_leader(once, live, unclean=unclean, shutting_down=stopping) is None


@PROPS
@given(before=records(), live=brokers, stopping=brokers)
def test_unclean_election_properties(before: PartitionRecord, live: frozenset[int],
                                     stopping: frozenset[int]) -> None:
    clean = elect_leader(before, live, shutting_down=stopping)
    result = elect_leader(before, live, unclean=True, shutting_down=stopping)
    after = before if result is None else result

    def eligible(broker: int) -> bool:
        return broker in live and broker not in stopping

    if after.leader == NO_LEADER or after.leader in before.isr:
        # Nothing unclean happened: the same decision as a clean election.
        assert result == clean
        return
    # Unclean: only when no ISR member can lead; the first eligible replica; ISR = [it].
    assert not any(eligible(r) for r in before.isr)
    assert after.leader == next(r for r in before.replicas if eligible(r))
    assert after.isr == (after.leader,)
    assert after.leader_epoch == before.leader_epoch + 1
    assert after.partition_epoch == before.partition_epoch + 1


# ---------------------------------------------------------------- move_leadership_away


def test_move_leadership_to_another_live_in_sync_replica() -> None:
    before = record()
    after = changed(before, move_leadership_away(before, 1, ALL, {1}))
    assert after.leader == 2
    assert after.isr == (2, 3)  # the stopping broker leaves the ISR too
    assert after.leader_epoch == LEADER_EPOCH + 1


def test_move_leadership_when_the_stopping_set_does_not_name_the_broker_yet() -> None:
    before = record()
    after = changed(before, move_leadership_away(before, 1, ALL, ()))
    assert (after.leader, after.isr) == (2, (2, 3))


def test_move_leadership_skips_other_stopping_and_dead_brokers() -> None:
    before = record(replicas=(1, 2, 3, 4))
    after = changed(before, move_leadership_away(before, 1, {1, 2, 3}, {1, 3}))
    assert (after.leader, after.isr) == (2, (2,))


def test_move_leadership_never_to_a_replica_outside_the_isr() -> None:
    before = record(isr=(1,))
    assert move_leadership_away(before, 1, ALL, {1}) is None


def test_sole_in_sync_leader_keeps_leading() -> None:
    before = record(isr=(1,))
    assert move_leadership_away(before, 1, ALL, {1}) is None


def test_leader_whose_other_isr_members_are_stopping_keeps_leading() -> None:
    """Nobody eligible can take over: the stopping leader keeps leading, and the other
    stopping member leaves the ISR."""
    before = record(isr=(1, 2))
    after = changed(before, move_leadership_away(before, 1, ALL, {1, 2}))
    assert (after.leader, after.isr, after.leader_epoch) == (1, (1,), before.leader_epoch)


def test_stopping_follower_leaves_the_isr() -> None:
    before = record()
    after = changed(before, move_leadership_away(before, 2, ALL, {2}))
    assert after.leader == 1
    assert after.isr == (1, 3)
    assert after.leader_epoch == LEADER_EPOCH


def test_stopping_follower_outside_the_isr_changes_nothing() -> None:
    assert move_leadership_away(record(isr=(1, 3)), 2, ALL, {2}) is None


def test_stopping_sole_isr_member_of_a_leaderless_partition_changes_nothing() -> None:
    assert move_leadership_away(record(isr=(2,), leader=NO_LEADER), 2, ALL, {2}) is None


# ---------------------------------------------------------------- preferred_leader


def test_preferred_leader_is_restored_when_alive_and_in_sync() -> None:
    before = record(leader=2)
    after = changed(before, preferred_leader(before, ALL))
    assert after.leader == 1
    assert after.isr == before.isr
    assert after.leader_epoch == LEADER_EPOCH + 1


def test_preferred_leader_follows_the_replica_order() -> None:
    before = record(replicas=(3, 1, 2), leader=1)
    after = changed(before, preferred_leader(before, ALL))
    assert after.leader == 3


def test_preferred_leader_of_a_leaderless_partition() -> None:
    before = record(leader=NO_LEADER)
    after = changed(before, preferred_leader(before, ALL))
    assert after.leader == 1


def test_preferred_leader_already_leading() -> None:
    assert preferred_leader(record(), ALL) is None


def test_preferred_leader_not_restored_when_dead() -> None:
    assert preferred_leader(record(leader=2), {2, 3}) is None


def test_preferred_leader_not_restored_when_out_of_sync() -> None:
    assert preferred_leader(record(leader=2, isr=(2, 3)), ALL) is None


def test_preferred_leader_not_restored_when_shutting_down() -> None:
    assert preferred_leader(record(leader=2), ALL, shutting_down={1}) is None


def test_preferred_leader_without_replicas() -> None:
    assert preferred_leader(record(replicas=(), isr=(), leader=NO_LEADER), ALL) is None


# ---------------------------------------------------------------- apply_isr_change: refusals


def refused(error: type[StrandError], code: ErrorCode, before: PartitionRecord,
            request: IsrChange, live: Collection[int] = ALL,
            shutting_down: Collection[int] = ()) -> None:
    with pytest.raises(error) as info:
        apply_isr_change(before, request, live, shutting_down)
    assert info.value.code is code
    assert "orders-0" in str(info.value)


def test_change_from_a_broker_that_does_not_lead() -> None:
    refused(NotLeaderOrFollowerError, ErrorCode.NOT_LEADER_OR_FOLLOWER, record(),
            change((2, 3), broker_id=2))


def test_change_for_a_leaderless_partition() -> None:
    refused(NotLeaderOrFollowerError, ErrorCode.NOT_LEADER_OR_FOLLOWER,
            record(leader=NO_LEADER), change((1,), broker_id=1))


def test_change_with_an_older_leader_epoch_is_fenced() -> None:
    refused(FencedLeaderEpochError, ErrorCode.FENCED_LEADER_EPOCH, record(),
            change((1, 2), leader_epoch=LEADER_EPOCH - 1))


def test_change_with_a_newer_leader_epoch_is_unknown() -> None:
    refused(UnknownLeaderEpochError, ErrorCode.UNKNOWN_LEADER_EPOCH, record(),
            change((1, 2), leader_epoch=LEADER_EPOCH + 1))


@pytest.mark.parametrize("partition_epoch", [PARTITION_EPOCH - 1, PARTITION_EPOCH + 1])
def test_change_based_on_another_partition_epoch(partition_epoch: int) -> None:
    refused(InvalidUpdateVersionError, ErrorCode.INVALID_UPDATE_VERSION, record(),
            change((1, 2), partition_epoch=partition_epoch))


def test_leader_epoch_is_checked_before_the_partition_epoch() -> None:
    refused(FencedLeaderEpochError, ErrorCode.FENCED_LEADER_EPOCH, record(),
            change((1, 2), leader_epoch=LEADER_EPOCH - 1, partition_epoch=0))


def test_new_isr_without_the_leader() -> None:
    refused(InvalidRequestError, ErrorCode.INVALID_REQUEST, record(), change((2, 3)))


def test_empty_new_isr() -> None:
    refused(InvalidRequestError, ErrorCode.INVALID_REQUEST, record(), change(()))


def test_new_isr_with_a_broker_that_is_not_a_replica() -> None:
    refused(InvalidRequestError, ErrorCode.INVALID_REQUEST, record(isr=(1,)),
            change((1, 4)), live={1, 2, 3, 4})


def test_adding_a_dead_broker_is_ineligible() -> None:
    refused(IneligibleReplicaError, ErrorCode.INELIGIBLE_REPLICA, record(isr=(1, 2)),
            change((1, 2, 3)), live={1, 2})


def test_adding_a_stopping_broker_is_ineligible() -> None:
    refused(IneligibleReplicaError, ErrorCode.INELIGIBLE_REPLICA, record(isr=(1, 2)),
            change((1, 2, 3)), shutting_down={3})


def test_refusals_leave_the_record_alone() -> None:
    before = record(isr=(1, 2))
    snapshot = dataclasses.replace(before)
    with pytest.raises(IneligibleReplicaError):
        apply_isr_change(before, change((1, 2, 3)), {1, 2})
    assert before == snapshot


# ---------------------------------------------------------------- apply_isr_change: accepted


def test_shrink_is_accepted() -> None:
    before = record()
    after = changed(before, apply_isr_change(before, change((1, 2)), ALL))
    assert after.isr == (1, 2)
    assert (after.leader, after.leader_epoch) == (1, LEADER_EPOCH)


def test_shrink_is_accepted_even_if_the_removed_broker_is_dead() -> None:
    before = record()
    after = changed(before, apply_isr_change(before, change((1, 2)), {1, 2}))
    assert after.isr == (1, 2)


def test_shrink_to_the_leader_alone() -> None:
    before = record()
    after = changed(before, apply_isr_change(before, change((1,)), ALL))
    assert after.isr == (1,)


def test_expand_with_a_live_broker_is_accepted() -> None:
    before = record(isr=(1, 2))
    after = changed(before, apply_isr_change(before, change((1, 2, 3)), ALL))
    assert after.isr == (1, 2, 3)
    assert (after.leader, after.leader_epoch) == (1, LEADER_EPOCH)


def test_members_already_in_the_isr_need_not_be_alive() -> None:
    """Only added members are checked; a dead member already in sync may stay."""
    before = record(replicas=(1, 2, 3, 4), isr=(1, 2))
    after = changed(before, apply_isr_change(before, change((1, 2, 4)), {1, 4}))
    assert after.isr == (1, 2, 4)


def test_new_isr_is_stored_in_replica_order_without_duplicates() -> None:
    before = record(replicas=(3, 1, 2), isr=(3, 1), leader=1)
    after = changed(before, apply_isr_change(before, change((2, 1, 2, 3, 1)), ALL))
    assert after.isr == (3, 1, 2)


def test_no_op_returns_the_same_record_object() -> None:
    before = record(isr=(1, 2))
    assert apply_isr_change(before, change((1, 2)), ALL) is before
    assert apply_isr_change(before, change((2, 1)), ALL) is before
    assert apply_isr_change(before, change((1, 2, 1)), ALL) is before


def test_changes_chain_on_the_returned_partition_epoch() -> None:
    first = record()
    shrunk = changed(first, apply_isr_change(first, change((1, 3)), ALL))
    with pytest.raises(InvalidUpdateVersionError):
        apply_isr_change(shrunk, change((1, 2, 3)), ALL)
    expanded = changed(shrunk, apply_isr_change(
        shrunk, change((1, 2, 3), partition_epoch=shrunk.partition_epoch), ALL))
    assert expanded.isr == (1, 2, 3)
    assert expanded.partition_epoch == PARTITION_EPOCH + 2
    assert expanded.leader_epoch == LEADER_EPOCH


@PROPS
@given(
    before=records().filter(lambda r: r.leader != NO_LEADER),
    proposal=st.lists(st.integers(0, 8), max_size=8),
    live=brokers,
    stopping=brokers,
)
def test_isr_change_outcomes(before: PartitionRecord, proposal: list[int],
                             live: frozenset[int], stopping: frozenset[int]) -> None:
    """From the current leader and epochs, the outcome follows the rules exactly."""
    request = change(proposal, broker_id=before.leader, leader_epoch=before.leader_epoch,
                     partition_epoch=before.partition_epoch)
    added = set(proposal) - set(before.isr)
    if before.leader not in proposal or not set(proposal) <= set(before.replicas):
        expected: type[StrandError] | None = InvalidRequestError
    elif any(r not in live or r in stopping for r in added):
        expected = IneligibleReplicaError
    else:
        expected = None
    if expected is not None:
        with pytest.raises(expected):
            apply_isr_change(before, request, live, stopping)
        return
    after = apply_isr_change(before, request, live, stopping)
    wanted = tuple(r for r in before.replicas if r in proposal)
    if wanted == before.isr:
        assert after is before
        return
    after = changed(before, after)
    assert after.isr == wanted
    assert (after.leader, after.leader_epoch) == (before.leader, before.leader_epoch)
