"""Where a partition the group gives a member starts (strand/consumer/group_mode.py),
with the group calls stubbed: at its committed offset, by ``auto_offset_reset`` only
once the group says nothing is committed, and never by a silent reset when fetching
the committed offsets fails (it is tried again by the next poll)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from strand import Consumer, TopicPartition
from strand.consumer.coordinator import Rebalance
from strand.errors import CoordinatorNotAvailableError

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


class StubGroup:
    """Stands in for the coordinator's network calls."""

    def __init__(self, consumer: Consumer) -> None:
        self.coordinator = consumer._group.coordinator  # type: ignore[union-attr]
        self.committed: dict[TopicPartition, int | None] = {}
        self.failures = 0
        self.rebalance: Rebalance | None = None
        self.coordinator.ensure_active = self.ensure_active  # type: ignore[method-assign]
        self.coordinator.committed = self.fetch  # type: ignore[method-assign]

    def ensure_active(self, timeout_s: float, before_join: object = None) -> Rebalance | None:
        result, self.rebalance = self.rebalance, None
        if result is not None:
            self.coordinator.owned = (self.coordinator.owned - result.revoked) | result.assigned
        return result

    def fetch(self, partitions: list[TopicPartition], timeout_s: float | None = None
              ) -> dict[TopicPartition, int | None]:
        if self.failures:
            self.failures -= 1
            raise CoordinatorNotAvailableError("no coordinator serves group 'g' right now")
        return {tp: self.committed.get(tp) for tp in partitions}


@pytest.fixture
def consumer() -> Iterator[Consumer]:
    with Consumer("127.0.0.1:1", group_id="g", enable_auto_commit=False) as member:
        member.subscribe(["t"])
        yield member


def test_a_failed_committed_fetch_leaves_the_partition_waiting_not_reset(
        consumer: Consumer) -> None:
    group, assigned = StubGroup(consumer), []

    class Listener:
        def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
            assigned.append(partitions)

    consumer.subscribe(["t"], listener=Listener())
    group.rebalance = Rebalance(assigned={TP0, TP1})
    group.committed = {TP0: 42}
    group.failures = 2  # both tries of this poll fail
    consumer._group.before_poll()  # type: ignore[union-attr]
    assert assigned == [{TP0, TP1}]  # told at once, as Kafka does
    subscriptions = consumer._subscriptions
    assert subscriptions.awaiting_committed() and subscriptions.positions() == {}
    consumer._update_positions()  # what poll() does next: no reset for these
    assert all(s.reset is None and s.position is None
               for _, s in subscriptions.assigned_states())
    consumer._group.before_poll()  # type: ignore[union-attr]  # the next poll: it works
    assert subscriptions.positions() == {TP0: 42}
    assert not subscriptions.awaiting_committed()  # TP1: nothing committed, reset decides


def test_an_eager_rebalance_giving_a_partition_back_starts_it_anew(consumer: Consumer) -> None:
    group = StubGroup(consumer)
    group.rebalance = Rebalance(assigned={TP0})
    consumer._group.before_poll()  # type: ignore[union-attr]
    consumer.seek(TP0, 9)  # read on without committing
    group.rebalance = Rebalance(revoked={TP0}, assigned={TP0})  # eager: revoked, then back
    consumer._group.before_poll()  # type: ignore[union-attr]
    # Nothing committed: it starts by auto_offset_reset, like any partition given to
    # a member (the next owner could have been another member), not where it was.
    subscriptions = consumer._subscriptions
    assert subscriptions.positions() == {} and not subscriptions.awaiting_committed()
    group.committed = {TP0: 5}
    group.rebalance = Rebalance(revoked={TP0}, assigned={TP0})
    consumer._group.before_poll()  # type: ignore[union-attr]
    assert subscriptions.positions() == {TP0: 5}


def test_a_seek_in_the_listener_wins_over_the_committed_offset(consumer: Consumer) -> None:
    group = StubGroup(consumer)

    class Rewind:
        def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
            consumer.seek(TP0, 0)

    consumer.subscribe(["t"], listener=Rewind())
    group.rebalance = Rebalance(assigned={TP0})
    group.committed = {TP0: 7}
    group.failures = 2  # the fetches of this poll fail; the listener's seek settles it
    consumer._group.before_poll()  # type: ignore[union-attr]
    consumer._group.before_poll()  # type: ignore[union-attr]
    assert consumer._subscriptions.positions() == {TP0: 0}
