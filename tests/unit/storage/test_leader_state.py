"""What a partition leader knows of its followers (services/storage/leader_state.py).

Hand-picked cases for each rule of the module docstring (Kafka's ``Replica`` fetch
state, ``Partition.maybeIncrementLeaderHW`` with its ISR-eligibility rule, ISR
expansion and shrinking, refused proposals backing off), then hypothesis:

* the HW rule evaluated independently on arbitrary leader states (offsets known or
  not, caught up recently / long ago / never, joining or leaving the ISR, eligible
  or not);
* a model of a leadership (appends, follower fetches, time passing, ISR proposals
  that commit or fail, controller removals, brokers stopping) checking the HW's
  safety: it never moves back, never passes the leader's log end offset, and never
  passes what a member of the maximal ISR has replicated.

Times are milliseconds on a clock far from zero (as ``monotonic_ms`` is on a running
host); the one test that starts the clock at zero says why.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.storage.leader_state import NEVER, UNKNOWN_OFFSET, FollowerState, LeaderState

PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

LAG = 10_000.0  # replica.lag.time.max.ms
T0 = 5_000_000.0  # when the leadership begins
LEADER = 1
LEADER_EPOCH = 3
PARTITION_EPOCH = 7


def leading(
    replicas: tuple[int, ...] = (1, 2, 3),
    isr: tuple[int, ...] | None = None,
    epoch_start_offset: int = 0,
    now_ms: float = T0,
) -> LeaderState:
    """Broker 1 starts leading at ``now_ms`` (the ISR defaults to all replicas)."""
    return LeaderState.begin(LEADER, replicas, replicas if isr is None else isr,
                             LEADER_EPOCH, PARTITION_EPOCH, epoch_start_offset, now_ms)


def follower(state: LeaderState, broker: int) -> FollowerState:
    return state.followers[broker]


# ---------------------------------------------------------------- begin


def test_begin_tracks_every_follower_but_not_the_leader() -> None:
    state = leading(replicas=(1, 2, 3, 4), isr=(1, 2))
    assert set(state.followers) == {2, 3, 4}
    assert state.isr == (1, 2)
    assert (state.leader, state.leader_epoch, state.partition_epoch) == (
        LEADER, LEADER_EPOCH, PARTITION_EPOCH)
    assert state.pending_isr is None
    for f in state.followers.values():
        assert f.log_end_offset == UNKNOWN_OFFSET
        assert f.last_fetch_leader_end_offset == UNKNOWN_OFFSET


def test_begin_gives_in_sync_followers_a_full_lag_period() -> None:
    state = leading(replicas=(1, 2, 3), isr=(1, 2))
    assert follower(state, 2).last_caught_up_ms == T0
    assert follower(state, 3).last_caught_up_ms == NEVER


# ---------------------------------------------------------------- update_follower


def test_fetch_at_the_leader_end_offset_is_caught_up_now() -> None:
    state = leading()
    f = state.update_follower(2, 100, 100, T0 + 50)
    assert f is follower(state, 2)
    assert f.last_caught_up_ms == T0 + 50
    assert f.log_end_offset == 100
    assert (f.last_fetch_leader_end_offset, f.last_fetch_ms) == (100, T0 + 50)


def test_fetch_beyond_the_leader_end_offset_is_caught_up_now() -> None:
    state = leading()
    state.update_follower(2, 101, 100, T0 + 50)
    assert follower(state, 2).last_caught_up_ms == T0 + 50


def test_fetch_behind_but_past_the_previous_leader_end_offset_counts_the_previous_fetch() -> None:
    """Kafka's lastCaughtUpTimeMs rule: asking for at least what the leader had at the
    previous fetch means the follower was caught up as of that previous fetch."""
    state = leading(isr=(1,))
    state.update_follower(2, 40, 100, T0 + 1_000)  # behind: not caught up
    assert follower(state, 2).last_caught_up_ms == NEVER
    state.update_follower(2, 100, 150, T0 + 2_000)  # has all the leader had at T0+1000
    assert follower(state, 2).last_caught_up_ms == T0 + 1_000
    state.update_follower(2, 120, 180, T0 + 3_000)  # not even what it had at T0+2000
    assert follower(state, 2).last_caught_up_ms == T0 + 1_000


def test_fetch_exactly_at_the_previous_leader_end_offset_counts_the_previous_fetch() -> None:
    state = leading(isr=(1,))
    state.update_follower(2, 10, 60, T0 + 100)
    state.update_follower(2, 60, 90, T0 + 200)
    assert follower(state, 2).last_caught_up_ms == T0 + 100


def test_fetch_behind_both_leaves_last_caught_up_unchanged() -> None:
    state = leading()
    state.update_follower(2, 100, 100, T0 + 100)  # caught up at T0+100
    state.update_follower(2, 100, 200, T0 + 200)  # had all of T0+100: caught up then
    assert follower(state, 2).last_caught_up_ms == T0 + 100
    state.update_follower(2, 150, 300, T0 + 300)  # short of 200 (leader's end at T0+200)
    f = follower(state, 2)
    assert f.last_caught_up_ms == T0 + 100
    assert (f.log_end_offset, f.last_fetch_leader_end_offset, f.last_fetch_ms) == (
        150, 300, T0 + 300)


def test_first_fetch_of_a_leadership_behind_the_leader_is_not_caught_up() -> None:
    """Before any fetch the previous leader end offset is unknown: no previous-fetch credit."""
    state = leading(isr=(1,))
    state.update_follower(3, 0, 100, T0 + 100)
    assert follower(state, 3).last_caught_up_ms == NEVER


def test_in_sync_follower_keeps_its_begin_credit_when_its_first_fetch_is_behind() -> None:
    state = leading()
    state.update_follower(2, 10, 100, T0 + 100)
    assert follower(state, 2).last_caught_up_ms == T0


def test_last_caught_up_never_moves_back() -> None:
    state = leading()
    state.update_follower(2, 100, 100, T0 + 500)
    state.update_follower(2, 100, 100, T0 + 400)  # a clock that stepped back
    assert follower(state, 2).last_caught_up_ms == T0 + 500


def test_log_end_offset_follows_the_fetch_offset_down_after_truncation() -> None:
    state = leading()
    state.update_follower(2, 100, 100, T0 + 100)
    state.update_follower(2, 80, 100, T0 + 200)
    assert follower(state, 2).log_end_offset == 80


def test_fetch_from_a_non_replica_or_the_leader_is_ignored() -> None:
    state = leading()
    assert state.update_follower(9, 100, 100, T0) is None
    assert state.update_follower(LEADER, 100, 100, T0) is None
    assert set(state.followers) == {2, 3}


@PROPS
@given(st.lists(st.tuples(st.integers(0, 500), st.integers(0, 500), st.floats(0, 5_000)),
                max_size=30))
def test_last_caught_up_is_monotonic_and_never_in_the_future(
        fetches: list[tuple[int, int, float]]) -> None:
    state = leading(isr=(1,))
    now = T0
    previous = follower(state, 2).last_caught_up_ms
    for fetch_offset, leader_end, step in fetches:
        now += step
        f = state.update_follower(2, fetch_offset, leader_end, now)
        assert f is not None
        assert previous <= f.last_caught_up_ms <= now
        if fetch_offset >= leader_end:
            assert f.last_caught_up_ms == now
        previous = f.last_caught_up_ms


# ---------------------------------------------------------------- high_watermark


def test_high_watermark_is_the_minimum_over_the_leader_and_the_isr() -> None:
    state = leading()
    state.update_follower(2, 80, 100, T0 + 10)
    state.update_follower(3, 60, 100, T0 + 10)
    assert state.high_watermark(0, 100, T0 + 20, LAG) == 60
    state.update_follower(3, 100, 100, T0 + 30)
    assert state.high_watermark(60, 100, T0 + 40, LAG) == 80


def test_high_watermark_is_the_leader_end_offset_when_followers_have_it_all() -> None:
    state = leading()
    state.update_follower(2, 120, 100, T0 + 10)
    state.update_follower(3, 100, 100, T0 + 10)
    assert state.high_watermark(0, 100, T0 + 20, LAG) == 100


def test_high_watermark_of_a_leader_alone_in_the_isr() -> None:
    state = leading(replicas=(1,), isr=(1,))
    assert state.high_watermark(5, 42, T0, LAG) == 42


def test_high_watermark_waits_while_an_isr_follower_is_unheard() -> None:
    state = leading()
    state.update_follower(2, 100, 100, T0 + 10)
    assert state.high_watermark(30, 100, T0 + 20, LAG) == 30  # 3 has not fetched yet
    state.update_follower(3, 90, 100, T0 + 30)
    assert state.high_watermark(30, 100, T0 + 40, LAG) == 90


def test_high_watermark_waits_for_an_unheard_isr_follower_even_after_the_lag() -> None:
    """Waiting is not bounded by the lag: shrinking the ISR is what unblocks it."""
    state = leading()
    now = T0 + 10 * LAG
    state.update_follower(2, 100, 100, now)
    assert state.high_watermark(30, 100, now, LAG) == 30
    assert state.shrink_proposal(now, LAG) == (1, 2)


def test_high_watermark_never_goes_backwards() -> None:
    state = leading()
    state.update_follower(2, 50, 100, T0 + 10)
    state.update_follower(3, 50, 100, T0 + 10)
    assert state.high_watermark(70, 100, T0 + 20, LAG) == 70
    assert state.high_watermark(120, 100, T0 + 20, LAG) == 120


def test_follower_outside_the_isr_caught_up_within_the_lag_holds_the_high_watermark() -> None:
    """It is about to join the ISR (Kafka's shouldWaitForReplicaToJoinIsr)."""
    state = leading(isr=(1, 2))
    state.update_follower(3, 10, 10, T0 + 100)  # caught up at T0+100
    state.update_follower(2, 20, 20, T0 + 200)
    assert state.high_watermark(0, 20, T0 + 300, LAG) == 10
    assert state.high_watermark(0, 20, T0 + 100 + LAG, LAG) == 10  # boundary: within


def test_follower_outside_the_isr_not_caught_up_within_the_lag_does_not_hold_it() -> None:
    state = leading(isr=(1, 2))
    state.update_follower(3, 10, 10, T0 + 100)
    state.update_follower(2, 20, 20, T0 + 200)
    assert state.high_watermark(0, 20, T0 + 100 + LAG + 1, LAG) == 20


def test_follower_outside_the_isr_never_caught_up_does_not_hold_it() -> None:
    state = leading(isr=(1, 2))
    state.update_follower(3, 5, 100, T0 + 100)
    state.update_follower(2, 100, 100, T0 + 100)
    assert state.high_watermark(0, 100, T0 + 200, LAG) == 100


def test_follower_outside_the_isr_that_never_fetched_does_not_hold_it() -> None:
    state = leading(isr=(1, 2))
    state.update_follower(2, 100, 100, T0 + 100)
    assert state.high_watermark(0, 100, T0 + 200, LAG) == 100


def test_never_caught_up_follower_does_not_hold_the_high_watermark_early_in_the_clock() -> None:
    """Never having caught up is not a point in time: on a clock that starts near zero
    (a fake clock, or ``monotonic_ms`` shortly after boot) a follower that only ever
    fetched far behind still does not count as caught up within the lag."""
    state = leading(isr=(1, 2), now_ms=0.0)
    state.update_follower(3, 5, 100, 1_000.0)  # far behind: never caught up
    state.update_follower(2, 100, 100, 1_000.0)
    assert follower(state, 3).last_caught_up_ms == NEVER
    assert state.high_watermark(0, 100, 2_000.0, LAG) == 100


def test_ineligible_follower_outside_the_isr_does_not_hold_the_high_watermark() -> None:
    """Kafka's isReplicaIsrEligible: a caught-up follower on a broker that is dead or
    shutting down will not join the ISR, so the HW does not wait for it."""
    state = leading(isr=(1, 2))
    state.update_follower(3, 10, 10, T0 + 100)  # caught up at T0+100
    state.update_follower(2, 20, 20, T0 + 200)
    assert state.high_watermark(0, 20, T0 + 300, LAG, eligible=lambda b: b != 3) == 20
    assert state.high_watermark(0, 20, T0 + 300, LAG, eligible=lambda b: True) == 10


def test_eligibility_does_not_release_isr_members() -> None:
    """Only the ISR change (by the controller or a shrink) lets the HW pass a member."""
    state = leading()
    state.update_follower(2, 20, 20, T0 + 100)
    state.update_follower(3, 10, 20, T0 + 100)
    assert state.high_watermark(0, 20, T0 + 200, LAG, eligible=lambda b: False) == 10


def test_eligibility_does_not_release_a_pending_expansion_member() -> None:
    state = leading(isr=(1, 2))
    state.update_follower(3, 15, 15, T0 + 100)
    state.update_follower(2, 20, 20, T0 + 100)
    state.propose((1, 2, 3))
    assert state.high_watermark(0, 20, T0 + 200, LAG, eligible=lambda b: b != 3) == 15


def test_follower_taken_out_of_the_isr_stops_holding_the_high_watermark() -> None:
    """Removed by the controller (dead or stopping), it was caught up a moment ago but
    must catch up again before it counts."""
    state = leading()
    state.update_follower(2, 20, 20, T0 + 100)
    state.update_follower(3, 10, 10, T0 + 100)
    assert state.high_watermark(0, 20, T0 + 200, LAG) == 10
    assert state.apply_record((1, 2, 3), (1, 2), PARTITION_EPOCH + 1, T0 + 300)
    assert follower(state, 3).last_caught_up_ms == NEVER
    assert state.high_watermark(10, 20, T0 + 300, LAG) == 20


def test_follower_taken_out_counts_again_once_it_catches_up() -> None:
    state = leading()
    state.update_follower(2, 20, 20, T0 + 100)
    state.apply_record((1, 2, 3), (1, 2), PARTITION_EPOCH + 1, T0 + 200)
    state.update_follower(3, 20, 20, T0 + 300)  # caught up again
    state.update_follower(2, 30, 30, T0 + 400)
    assert state.high_watermark(20, 30, T0 + 400, LAG) == 20  # waits for 3 to rejoin
    assert state.high_watermark(20, 30, T0 + 300 + LAG + 1, LAG) == 30


def test_our_own_committed_shrink_also_resets_the_removed_follower() -> None:
    state = leading()
    state.update_follower(2, 20, 20, T0 + 2 * LAG)
    now = T0 + 2 * LAG
    proposal = state.shrink_proposal(now, LAG)
    assert proposal == (1, 2)
    state.propose(proposal)
    state.update_follower(3, 20, 20, now + 1)  # 3 catches up while the shrink is in flight
    state.apply_record((1, 2, 3), proposal, PARTITION_EPOCH + 1, now + 2)
    assert follower(state, 3).last_caught_up_ms == NEVER


def test_followers_staying_in_the_isr_keep_their_last_caught_up() -> None:
    state = leading(replicas=(1, 2, 3, 4))
    state.update_follower(2, 20, 20, T0 + 100)
    state.apply_record((1, 2, 3, 4), (1, 2), PARTITION_EPOCH + 1, T0 + 200)
    assert follower(state, 2).last_caught_up_ms == T0 + 100


def test_pending_expansion_member_counts_for_the_high_watermark() -> None:
    """The maximal ISR: a proposed member counts before the controller commits it."""
    state = leading(isr=(1, 2))
    state.update_follower(3, 15, 15, T0 + 100)
    state.update_follower(2, 20, 20, T0 + 2 * LAG)
    now = T0 + 3 * LAG  # 3 is no longer "recently caught up"
    assert state.high_watermark(0, 20, now, LAG) == 20
    state.propose((1, 2, 3))
    assert state.maximal_isr == {1, 2, 3}
    assert state.high_watermark(0, 20, now, LAG) == 15


def test_pending_shrink_keeps_the_removed_member_counting_until_committed() -> None:
    state = leading()
    state.update_follower(2, 20, 20, T0 + 2 * LAG)
    state.update_follower(3, 15, 15, T0 + 100)
    now = T0 + 3 * LAG
    state.propose((1, 2))
    assert state.maximal_isr == {1, 2, 3}
    assert state.high_watermark(0, 20, now, LAG) == 15
    assert state.apply_record((1, 2, 3), (1, 2), PARTITION_EPOCH + 1, now)
    assert state.maximal_isr == {1, 2}
    assert state.high_watermark(15, 20, now, LAG) == 20


def test_failed_expansion_stops_counting_its_member() -> None:
    state = leading(isr=(1, 2))
    state.update_follower(3, 15, 15, T0 + 100)
    state.update_follower(2, 20, 20, T0 + 2 * LAG)
    now = T0 + 3 * LAG
    state.propose((1, 2, 3))
    state.proposal_failed()
    assert state.pending_isr is None
    assert state.high_watermark(0, 20, now, LAG) == 20


def test_follower_removed_from_the_replicas_no_longer_counts() -> None:
    state = leading()
    state.update_follower(2, 20, 20, T0 + 100)
    state.update_follower(3, 5, 20, T0 + 100)
    assert state.high_watermark(0, 20, T0 + 200, LAG) == 5
    state.apply_record((1, 2), (1, 2), PARTITION_EPOCH + 1, T0 + 300)
    assert state.high_watermark(5, 20, T0 + 400, LAG) == 20


@st.composite
def leader_states(draw: st.DrawFn) -> LeaderState:
    """A leadership of broker 1 over followers 2-5 in any state: offsets known or not,
    caught up recently, long ago or never; in the ISR, joining it or leaving it through a
    pending proposal, or outside it."""
    roles = draw(st.dictionaries(st.sampled_from([2, 3, 4, 5]),
                                 st.sampled_from(["isr", "joining", "leaving", "outside"])))
    isr = (LEADER, *(b for b, role in roles.items() if role in ("isr", "leaving")))
    state = leading(replicas=(LEADER, *roles), isr=isr)
    if any(role in ("joining", "leaving") for role in roles.values()):
        state.propose((LEADER, *(b for b, role in roles.items() if role in ("isr", "joining"))))
    for broker in roles:
        f = follower(state, broker)
        f.log_end_offset = draw(st.one_of(st.just(UNKNOWN_OFFSET), st.integers(0, 100)))
        f.last_caught_up_ms = draw(st.sampled_from(
            [NEVER, T0 - 5 * LAG, T0 - LAG - 1, T0 - LAG, T0 - 1, T0]))
    return state


@settings(PROPS, max_examples=600)
@given(state=leader_states(), current=st.integers(0, 10), leader_end=st.integers(0, 120),
       ineligible=st.frozensets(st.sampled_from([2, 3, 4, 5])))
def test_high_watermark_follows_the_rule(state: LeaderState, current: int, leader_end: int,
                                         ineligible: frozenset[int]) -> None:
    """The docstring's HW rule, evaluated independently on arbitrary states."""
    now = T0

    def eligible(broker: int) -> bool:
        return broker not in ineligible

    members = set(state.isr) | set(state.pending_isr or ())
    counted = [f for f in state.followers.values()
               if f.broker in members
               or (now - f.last_caught_up_ms <= LAG and eligible(f.broker))]
    if any(f.log_end_offset == UNKNOWN_OFFSET and f.broker in members for f in counted):
        expected = current  # waiting to hear from an in-sync follower
    else:
        offsets = [f.log_end_offset for f in counted if f.log_end_offset != UNKNOWN_OFFSET]
        expected = max(current, min([leader_end, *offsets]))
    assert state.high_watermark(current, leader_end, now, LAG, eligible) == expected


# ---------------------------------------------------------------- shrink_proposal


def test_no_shrink_right_after_begin() -> None:
    """Followers get a full lag period at ``begin``, even if they have not fetched yet."""
    state = leading()
    assert state.shrink_proposal(T0, LAG) is None
    assert state.shrink_proposal(T0 + LAG, LAG) is None  # boundary: still within the lag


def test_shrink_after_the_lag_without_catching_up() -> None:
    state = leading()
    state.update_follower(2, 100, 100, T0 + LAG)
    now = T0 + LAG + 1
    assert state.lagging(now, LAG) == [3]
    assert state.shrink_proposal(now, LAG) == (1, 2)


def test_follower_fetching_but_behind_is_shrunk_after_the_lag() -> None:
    state = leading()
    for i in range(1, 12):
        state.update_follower(2, 100 * i, 100 * i, T0 + 1_000 * i)
        state.update_follower(3, 100 * (i - 3) if i > 3 else 0, 100 * i, T0 + 1_000 * i)
    # 3 never asked for what the leader had at its previous fetch: not caught up since T0.
    assert state.shrink_proposal(T0 + 11_000, LAG) == (1, 2)


def test_follower_that_keeps_catching_up_is_never_shrunk() -> None:
    state = leading()
    for i in range(1, 50):
        now = T0 + 1_000 * i
        state.update_follower(2, 10 * i, 10 * i, now)
        state.update_follower(3, 10 * (i - 1), 10 * i, now)  # one step behind each time
        assert state.shrink_proposal(now, LAG) is None


def test_shrink_keeps_the_leader_and_the_isr_order() -> None:
    state = leading(replicas=(1, 4, 2, 3), isr=(1, 4, 2, 3))
    state.update_follower(2, 10, 10, T0 + 2 * LAG)
    now = T0 + 2 * LAG
    assert state.shrink_proposal(now, LAG) == (1, 2)
    state.update_follower(4, 10, 10, now)
    state.update_follower(3, 10, 10, now)
    assert state.shrink_proposal(now, LAG) is None


def test_shrink_ignores_followers_outside_the_isr() -> None:
    state = leading(isr=(1, 2))
    state.update_follower(2, 10, 10, T0 + 2 * LAG)
    assert state.shrink_proposal(T0 + 2 * LAG, LAG) is None


def test_no_shrink_while_a_proposal_is_pending() -> None:
    state = leading()
    now = T0 + 2 * LAG
    state.propose((1, 2, 3))
    assert state.shrink_proposal(now, LAG) is None
    state.proposal_failed()
    assert state.shrink_proposal(now, LAG) == (1,)


# ---------------------------------------------------------------- expand_proposal


def test_expand_a_follower_that_reached_the_high_watermark() -> None:
    state = leading(isr=(1, 2))
    state.update_follower(3, 50, 60, T0 + 100)
    assert state.expand_proposal(3, 50) == (1, 2, 3)
    assert state.expand_proposal(3, 40) == (1, 2, 3)


def test_no_expand_below_the_high_watermark() -> None:
    state = leading(isr=(1, 2))
    state.update_follower(3, 49, 60, T0 + 100)
    assert state.expand_proposal(3, 50) is None


def test_no_expand_before_the_start_of_the_leader_epoch() -> None:
    """At the HW is not enough: its log may still hold another epoch's records."""
    state = leading(isr=(1, 2), epoch_start_offset=80)
    state.update_follower(3, 70, 90, T0 + 100)
    assert state.expand_proposal(3, 60) is None
    state.update_follower(3, 80, 90, T0 + 200)
    assert state.expand_proposal(3, 60) == (1, 2, 3)


def test_no_expand_of_an_isr_member() -> None:
    state = leading()
    state.update_follower(3, 100, 100, T0 + 100)
    assert state.expand_proposal(3, 50) is None
    assert state.expand_proposal(LEADER, 50) is None


def test_no_expand_while_a_proposal_is_pending() -> None:
    state = leading(isr=(1,))
    state.update_follower(2, 100, 100, T0 + 100)
    state.update_follower(3, 100, 100, T0 + 100)
    proposal = state.expand_proposal(2, 100)
    assert proposal == (1, 2)
    state.propose(proposal)
    assert state.expand_proposal(3, 100) is None
    assert state.expand_proposal(2, 100) is None


def test_no_expand_of_a_follower_never_heard_or_unknown() -> None:
    state = leading(isr=(1, 2))
    assert state.expand_proposal(3, 0) is None
    assert state.expand_proposal(9, 0) is None


def test_no_expand_of_an_ineligible_broker() -> None:
    """A broker that is dead or shutting down is not proposed (the controller would
    refuse it with INELIGIBLE_REPLICA)."""
    state = leading(isr=(1, 2))
    state.update_follower(3, 100, 100, T0 + 100)
    assert state.expand_proposal(3, 50, T0 + 100, eligible=lambda b: b != 3) is None
    assert state.expand_proposal(3, 50, T0 + 100, eligible=lambda b: True) == (1, 2, 3)


# ---------------------------------------------------------------- refused proposals back off


def test_refused_proposal_backs_off_expansion() -> None:
    state = leading(isr=(1, 2))
    state.update_follower(3, 100, 100, T0 + 100)
    state.propose((1, 2, 3))
    state.proposal_failed(T0 + 200, 500.0)
    assert state.pending_isr is None
    assert state.expand_proposal(3, 50, T0 + 699) is None
    assert state.expand_proposal(3, 50, T0 + 700) == (1, 2, 3)


def test_refused_proposal_backs_off_shrinking() -> None:
    state = leading()
    now = T0 + 2 * LAG
    state.propose((1,))
    state.proposal_failed(now, 500.0)
    assert state.shrink_proposal(now + 499, LAG) is None
    assert state.shrink_proposal(now + 500, LAG) == (1,)


def test_failure_without_a_backoff_allows_an_immediate_retry() -> None:
    state = leading()
    now = T0 + 2 * LAG
    state.propose((1,))
    state.proposal_failed()
    assert state.shrink_proposal(now, LAG) == (1,)


# ---------------------------------------------------------------- apply_record


def test_newer_record_is_adopted_and_clears_the_proposal() -> None:
    state = leading(isr=(1, 2))
    state.propose((1, 2, 3))
    assert state.apply_record((1, 2, 3), (1, 2, 3), PARTITION_EPOCH + 1, T0 + 100) is True
    assert state.isr == (1, 2, 3)
    assert state.partition_epoch == PARTITION_EPOCH + 1
    assert state.pending_isr is None


def test_newer_record_with_the_same_isr_still_clears_the_proposal() -> None:
    """The controller moved on (another change, or ours refused): the proposal is dead."""
    state = leading(isr=(1, 2))
    state.propose((1, 2, 3))
    assert state.apply_record((1, 2, 3), (1, 2), PARTITION_EPOCH + 2, T0 + 100) is False
    assert state.pending_isr is None
    assert state.partition_epoch == PARTITION_EPOCH + 2


def test_older_record_is_ignored() -> None:
    state = leading(isr=(1, 2))
    state.propose((1, 2, 3))
    assert state.apply_record((1, 2, 3, 4), (1,), PARTITION_EPOCH - 1, T0 + 100) is False
    assert state.isr == (1, 2)
    assert state.partition_epoch == PARTITION_EPOCH
    assert state.pending_isr == (1, 2, 3)
    assert set(state.followers) == {2, 3}


def test_record_of_the_same_epoch_keeps_the_proposal() -> None:
    state = leading(isr=(1, 2))
    state.propose((1, 2, 3))
    assert state.apply_record((1, 2, 3), (1, 2), PARTITION_EPOCH, T0 + 100) is False
    assert state.pending_isr == (1, 2, 3)
    assert state.partition_epoch == PARTITION_EPOCH


def test_new_replicas_get_follower_entries_and_removed_ones_lose_them() -> None:
    state = leading(replicas=(1, 2, 3), isr=(1, 2))
    state.update_follower(2, 100, 100, T0 + 100)
    kept = follower(state, 2)
    state.apply_record((1, 2, 4), (1, 2), PARTITION_EPOCH + 1, T0 + 200)
    assert set(state.followers) == {2, 4}
    assert follower(state, 2) is kept  # its progress is not forgotten
    assert follower(state, 4).log_end_offset == UNKNOWN_OFFSET
    assert LEADER not in state.followers


def test_older_record_does_not_touch_the_followers() -> None:
    state = leading(replicas=(1, 2, 3))
    state.apply_record((1, 4), (1,), PARTITION_EPOCH - 1, T0 + 200)
    assert set(state.followers) == {2, 3}


def test_new_isr_member_without_a_fetch_holds_the_high_watermark() -> None:
    """A replica that joins the ISR by a record before this leader heard from it is
    waited for, like every in-sync follower with an unknown offset."""
    state = leading(replicas=(1, 2), isr=(1, 2))
    state.update_follower(2, 100, 100, T0 + 100)
    state.apply_record((1, 2, 4), (1, 2, 4), PARTITION_EPOCH + 1, T0 + 200)
    assert state.high_watermark(50, 100, T0 + 300, LAG) == 50


# ---------------------------------------------------------------- a model of a leadership


@dataclass
class Follower:
    """What the model knows of a follower: the offset it has really replicated."""

    log_end_offset: int = 0


operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 50)),
        st.tuples(st.just("fetch"), st.sampled_from([2, 3, 4]), st.integers(0, 60)),
        st.tuples(st.just("tick"), st.sampled_from([1.0, LAG / 2, LAG, LAG + 1, 3 * LAG])),
        st.tuples(st.just("shrink")),
        st.tuples(st.just("expand"), st.sampled_from([2, 3, 4])),
        st.tuples(st.just("commit")),
        st.tuples(st.just("fail")),
        st.tuples(st.just("remove"), st.sampled_from([2, 3, 4])),
        st.tuples(st.just("stop"), st.sampled_from([2, 3, 4])),
    ),
    max_size=60,
)


@settings(PROPS, max_examples=600)
@given(isr=st.sampled_from([(1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), (1, 3)]), ops=operations)
def test_high_watermark_is_safe(isr: tuple[int, ...], ops: list[tuple[object, ...]]) -> None:
    """Under any interleaving (fetches, appends, time, shrink and expand proposals that
    commit or fail, controller removals, brokers stopping), the HW never moves back,
    never passes the leader's log end offset, and never passes what a member of the
    maximal ISR has replicated."""
    replicas = (1, 2, 3, 4)
    now = T0
    leader_end = 0
    hw = 0
    partition_epoch = PARTITION_EPOCH
    state = LeaderState.begin(LEADER, replicas, isr, LEADER_EPOCH, partition_epoch, 0, now)
    real = {b: Follower() for b in replicas if b != LEADER}
    stopping: set[int] = set()

    def eligible(broker: int) -> bool:
        return broker not in stopping

    for op in ops:
        kind = op[0]
        if kind == "append":
            assert isinstance(op[1], int)
            leader_end += op[1]
        elif kind == "fetch":
            assert isinstance(op[1], int) and isinstance(op[2], int)
            broker, progress = op[1], op[2]
            f = real[broker]
            f.log_end_offset = min(leader_end, f.log_end_offset + progress)
            # As the fetch handler does: record progress, move the HW, maybe expand.
            state.update_follower(broker, f.log_end_offset, leader_end, now)
            hw = state.high_watermark(hw, leader_end, now, LAG, eligible)
            proposal = state.expand_proposal(broker, hw, now, eligible)
            if proposal is not None:
                state.propose(proposal)
        elif kind == "tick":
            assert isinstance(op[1], float)
            now += op[1]
        elif kind == "shrink":
            proposal = state.shrink_proposal(now, LAG)
            if proposal is not None:
                state.propose(proposal)
        elif kind == "expand":
            assert isinstance(op[1], int)
            proposal = state.expand_proposal(op[1], hw, now, eligible)
            if proposal is not None:
                assert real[op[1]].log_end_offset >= hw
                state.propose(proposal)
        elif kind == "commit" and state.pending_isr is not None:
            partition_epoch += 1
            assert state.apply_record(replicas, state.pending_isr, partition_epoch, now)
            assert state.pending_isr is None
        elif kind == "fail":
            state.proposal_failed(now, 500.0)
        elif kind == "remove":  # the controller takes a (dead) follower out of the ISR
            assert isinstance(op[1], int)
            if op[1] in state.isr:
                partition_epoch += 1
                smaller = tuple(r for r in state.isr if r != op[1])
                assert state.apply_record(replicas, smaller, partition_epoch, now)
        elif kind == "stop":  # a broker starts its controlled shutdown
            assert isinstance(op[1], int)
            stopping.add(op[1])

        new_hw = state.high_watermark(hw, leader_end, now, LAG, eligible)
        assert new_hw >= hw, "the high watermark moved back"
        hw = new_hw
        assert hw <= leader_end
        assert LEADER in state.isr
        for member in state.maximal_isr - {LEADER}:
            assert hw <= real[member].log_end_offset, (
                f"HW {hw} passed in-sync follower {member} at {real[member].log_end_offset}")
