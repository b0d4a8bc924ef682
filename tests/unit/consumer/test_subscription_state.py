"""The consumer's SubscriptionState (strand/consumer/subscription_state.py): how
partitions are chosen, the assignment and each partition's position, and the
listeners told when positions move under the fetches in flight."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from strand import Consumer, TopicPartition
from strand.consumer.subscription_state import SubscriptionState, SubscriptionType
from strand.errors import CorruptRecordError

TP0, TP1, TP2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


@pytest.fixture
def repositioned() -> Counter:
    return Counter()


@pytest.fixture
def subs(repositioned: Counter) -> SubscriptionState:
    state = SubscriptionState()
    state.add_reposition_listener(repositioned)
    return state


# ------------------------------------------------------------------- subscription type


def kind(subs: SubscriptionState) -> SubscriptionType:
    """The subscription type, read afresh (mypy would keep ``subs.type`` narrowed to
    what an earlier assertion saw, across the calls that change it)."""
    return subs.type


def test_assign_and_subscribe_exclude_each_other(subs: SubscriptionState) -> None:
    subs.assign_from_user([TP0])
    assert kind(subs) == SubscriptionType.USER_ASSIGNED
    with pytest.raises(ValueError, match="exclude each other"):
        subs.subscribe(["t"], None)
    with pytest.raises(ValueError, match="exclude each other"):
        subs.subscribe_pattern(re.compile("t.*"), None)
    assert kind(subs) == SubscriptionType.USER_ASSIGNED and not subs.subscribed
    subs.assign_from_user([])  # unassign(): free to subscribe again
    assert kind(subs) == SubscriptionType.NONE
    assert subs.subscribe(["t"], None)
    assert kind(subs) == SubscriptionType.AUTO_TOPICS
    with pytest.raises(ValueError, match="exclude each other"):
        subs.assign_from_user([TP0])
    with pytest.raises(ValueError, match="exclude each other"):
        subs.assign_from_user([])  # unassign() does not end a subscription either
    subs.unsubscribe()
    assert kind(subs) == SubscriptionType.NONE
    subs.assign_from_user([TP0])
    assert subs.assigned_partitions() == {TP0}


def test_topics_and_a_pattern_may_replace_each_other(subs: SubscriptionState) -> None:
    listener = object()
    assert subs.subscribe(["b", "a", "a"], listener)
    assert subs.subscribed and subs.topics == ("a", "b") and subs.listener is listener
    assert not subs.subscribe(["a", "b"], listener)  # unchanged: no rejoin needed
    pattern = re.compile("m.*")
    subs.subscribe_pattern(pattern, None)
    assert kind(subs) == SubscriptionType.AUTO_PATTERN and subs.pattern is pattern
    assert subs.change_subscription(["m2", "m1"])
    assert subs.topics == ("m1", "m2")
    assert not subs.change_subscription(["m1", "m2"])
    assert subs.subscribe(["a"], None)
    assert subs.pattern is None and kind(subs) == SubscriptionType.AUTO_TOPICS


def test_a_pattern_is_not_subscribed_until_its_first_match(subs: SubscriptionState) -> None:
    subs.subscribe_pattern(re.compile("x.*"), None)
    assert not subs.subscribed and subs.topics == ()
    assert subs.change_subscription([])  # matching nothing is a topic list too
    assert subs.subscribed and subs.topics == ()


def test_unsubscribe_forgets_everything(subs: SubscriptionState,
                                        repositioned: Counter) -> None:
    subs.subscribe_pattern(re.compile("t"), object())
    subs.change_subscription(["t"])
    subs.assign_from_subscribed([TP0], fresh=[TP0])
    calls = repositioned.calls
    subs.unsubscribe()
    assert (subs.type, subs.pattern, subs.listener, subs.subscribed, subs.topics) == (
        SubscriptionType.NONE, None, None, False, ())
    assert subs.assigned_partitions() == set() and repositioned.calls == calls + 1


# ----------------------------------------------------------------------- assignment


def test_user_assignment_keeps_the_state_of_kept_partitions(
        subs: SubscriptionState, repositioned: Counter) -> None:
    subs.assign_from_user([TP0, TP1])
    assert repositioned.calls == 1
    subs.seek(TP0, 7)
    kept = subs.state(TP0)
    subs.assign_from_user([TP2, TP0])
    assert repositioned.calls == 3
    assert subs.state(TP0) is kept and kept.position == 7
    assert subs.state(TP2).position is None and not subs.state(TP2).awaiting_committed
    assert [tp for tp, _ in subs.assigned_states()] == [TP2, TP0]  # the order given
    assert subs.get(TP1) is None and not subs.is_assigned(TP1)
    with pytest.raises(ValueError, match="not assigned"):
        subs.state(TP1)


def test_the_group_assignment_starts_fresh_partitions_at_their_committed_offsets(
        subs: SubscriptionState, repositioned: Counter) -> None:
    subs.subscribe(["t"], None)
    subs.assign_from_subscribed([TP0, TP1], fresh=[TP0, TP1])
    subs.seek(TP0, 3)  # a seek (say in the listener) wins over the committed offset
    assert subs.awaiting_committed() == [TP1]
    kept = subs.state(TP0)
    subs.assign_from_subscribed([TP0, TP1], fresh=[TP1])  # TP1 taken away and given back
    assert subs.state(TP0) is kept and subs.state(TP1).awaiting_committed
    calls = repositioned.calls
    subs.apply_committed({TP0: 10, TP1: 42})
    assert subs.positions() == {TP0: 3, TP1: 42}  # TP0 was not waiting: left alone
    assert subs.awaiting_committed() == [] and repositioned.calls == calls + 1


def test_nothing_committed_leaves_the_position_to_auto_offset_reset(
        subs: SubscriptionState) -> None:
    subs.subscribe(["t"], None)
    subs.assign_from_subscribed([TP0, TP1], fresh=[TP0, TP1])
    subs.apply_committed({TP0: None, TP2: 5})  # TP2: taken away meanwhile
    state = subs.state(TP0)
    assert not state.awaiting_committed and state.position is None and state.reset is None
    assert subs.awaiting_committed() == [TP1] and subs.get(TP2) is None


def test_positions_are_those_known(subs: SubscriptionState) -> None:
    subs.assign_from_user([TP0, TP1, TP2])
    subs.seek(TP0, 1)
    subs.seek(TP2, 2)
    assert subs.positions() == {TP0: 1, TP2: 2}
    assert subs.positions({TP2, TP1}) == {TP2: 2}


# ------------------------------------------------------------ seeking and resetting


def test_seek_starts_over_and_drops_what_is_pending(subs: SubscriptionState,
                                                    repositioned: Counter) -> None:
    subs.assign_from_user([TP0])
    state = subs.state(TP0)
    state.error = CorruptRecordError("bad batch")
    state.retry_at = 99.0
    version, calls = state.version, repositioned.calls
    subs.seek(TP0, 5)
    after = subs.state(TP0)  # the same state, read afresh (mypy narrowed ``state``)
    assert after is state
    assert (after.position, after.fetch_offset, after.error, after.retry_at) == (5, 5, None, 0)
    assert state.version == version + 1 and repositioned.calls == calls + 1
    with pytest.raises(ValueError, match="not assigned"):
        subs.seek(TP2, 1)
    assert repositioned.calls == calls + 1


def test_reset_requests_check_every_partition_first(subs: SubscriptionState,
                                                    repositioned: Counter) -> None:
    subs.assign_from_user([TP0, TP1])
    subs.seek(TP0, 5)
    subs.seek(TP1, 6)
    calls = repositioned.calls
    with pytest.raises(ValueError, match="not assigned"):
        subs.request_reset([TP0, TP2], "earliest")
    assert subs.positions() == {TP0: 5, TP1: 6} and repositioned.calls == calls
    subs.request_reset([TP1], "latest")
    assert subs.state(TP1).reset == "latest" and subs.positions() == {TP0: 5}
    subs.request_reset(None, "earliest")  # every assigned partition
    assert subs.positions() == {} and subs.state(TP0).reset == "earliest"
    assert repositioned.calls == calls + 2


# ------------------------------------------------------------------ fetching, pausing


def test_fetchable_partitions_are_unpaused_with_a_position_and_nothing_pending(
        subs: SubscriptionState) -> None:
    subs.assign_from_user([TP0, TP1, TP2])
    subs.seek(TP0, 0)
    subs.seek(TP1, 0)
    assert [tp for tp, s in subs.assigned_states() if s.fetchable] == [TP0, TP1]
    subs.pause([TP0])
    subs.state(TP1).error = CorruptRecordError("bad batch")
    assert not any(s.fetchable for _, s in subs.assigned_states())
    subs.resume([TP0])
    assert subs.state(TP0).fetchable


def test_pause_and_resume(subs: SubscriptionState, repositioned: Counter) -> None:
    subs.assign_from_user([TP0, TP1])
    calls = repositioned.calls
    subs.pause([TP0, TP1])
    assert subs.paused() == {TP0, TP1} and repositioned.calls == calls  # nothing moved
    subs.resume([TP1])
    assert subs.paused() == {TP0} and repositioned.calls == calls + 1
    with pytest.raises(ValueError, match="not assigned"):
        subs.pause([TP2])


def test_errors_of_paused_partitions_wait_for_their_resume(subs: SubscriptionState) -> None:
    subs.assign_from_user([TP0, TP1])
    error = CorruptRecordError("bad batch")
    subs.state(TP0).error = error
    subs.pause([TP0])
    assert subs.take_error() is None
    subs.resume([TP0])
    assert subs.take_error() is error and subs.take_error() is None


# --------------------------------------------------------------------- the Consumer


@pytest.fixture
def consumer() -> Iterator[Consumer]:
    with Consumer("127.0.0.1:1", group_id="g", enable_auto_commit=False) as member:
        yield member


def test_the_consumer_refuses_to_mix_assign_and_subscribe(consumer: Consumer) -> None:
    consumer.assign([TP0])
    with pytest.raises(ValueError, match="exclude each other"):
        consumer.subscribe(["t"])
    assert consumer.subscription() == set() and consumer.assignment() == {TP0}
    consumer.unassign()
    consumer.subscribe(["t"])
    with pytest.raises(ValueError, match="exclude each other"):
        consumer.assign([TP1])
    assert consumer.subscription() == {"t"}
    consumer.unsubscribe()
    consumer.assign([TP1])
    assert consumer.assignment() == {TP1}
