"""The group consumer's API beyond subscribe/poll (real processes): a pattern
subscription that follows new topics, asynchronous commits in order with their
callbacks, wakeup() from another thread, max.poll.interval.ms enforced by the
client, unsubscribe(), and a static member that comes back to its partitions."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import pytest

from strand import Admin, Consumer, NewTopic, Producer, TopicPartition, WakeupError
from strand.errors import StrandError
from strand.launcher import ServiceProcess
from tests.support.rebalance import Recorder
from tests.support.waiting import poll_until, wait_until

if TYPE_CHECKING:
    from tests.support.cluster import SdkCluster


@pytest.fixture
def cluster(group_cluster: SdkCluster) -> SdkCluster:
    return group_cluster


def member(cluster: SdkCluster, group: str, **settings: object) -> Consumer:
    options: dict[str, object] = dict(session_timeout_ms=6000, heartbeat_interval_ms=300,
                                      max_poll_interval_ms=20_000, enable_auto_commit=False)
    options.update(settings)
    return Consumer(cluster.bootstrap, group_id=group, **options)  # type: ignore[arg-type]


def create(cluster: SdkCluster, *topics: str, partitions: int = 2) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(t, partitions, 1) for t in topics])


class Poller:
    """Polls a consumer in a thread of its own (group members must all keep polling
    for a rebalance to finish) until ``stop()``."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.consumer.poll(timeout_ms=100)
        except BaseException as exc:  # reported by stop()
            self.errors.append(exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive() and not self.errors, self.errors


def has_assignment(consumer: Consumer) -> bool:
    return bool(consumer.assignment())


def test_a_pattern_subscription_follows_matching_topics(cluster: SdkCluster) -> None:
    create(cluster, "metrics.cpu", "metrics.disk", "logs.app")
    with member(cluster, "pattern", metadata_max_age_ms=500) as consumer:
        consumer.subscribe(pattern=r"metrics\..*")
        assert consumer.subscription() == {"metrics.cpu", "metrics.disk"}
        want = {TopicPartition(t, p) for t in ("metrics.cpu", "metrics.disk") for p in (0, 1)}
        poll_until(consumer, lambda: consumer.assignment() == want, 30, "the matching topics")
        create(cluster, "metrics.net")  # found at the next metadata refresh
        want |= {TopicPartition("metrics.net", p) for p in (0, 1)}
        poll_until(consumer, lambda: consumer.assignment() == want, 30, "the new topic")
        assert "logs.app" not in consumer.subscription()
        assert "__consumer_offsets" not in consumer.subscription()
    with member(cluster, "pattern") as consumer, pytest.raises(ValueError):
        consumer.subscribe(["metrics.cpu"], pattern="metrics.*")


def test_partitions_added_to_a_subscribed_topic_get_assigned(cluster: SdkCluster) -> None:
    create(cluster, "growing", partitions=2)
    with member(cluster, "growers", metadata_max_age_ms=500) as first, \
            member(cluster, "growers", metadata_max_age_ms=500) as second:
        listeners = Recorder(), Recorder()
        first.subscribe(["growing"], listener=listeners[0])
        second.subscribe(["growing"], listener=listeners[1])
        pollers = Poller(first), Poller(second)
        wait_until(lambda: len(listeners[0].owned | listeners[1].owned) == 2, 40, "2 partitions")
        with Admin(cluster.bootstrap) as admin:
            admin.create_partitions("growing", 5)
        wait_until(lambda: listeners[0].owned | listeners[1].owned == {
            TopicPartition("growing", p) for p in range(5)}, 30, "the new partitions")
        assert not listeners[0].owned & listeners[1].owned
        for poller in pollers:
            poller.stop()


def test_async_commits_apply_in_order_and_report_to_their_callbacks(
        cluster: SdkCluster) -> None:
    create(cluster, "async-commits", partitions=1)
    tp = TopicPartition("async-commits", 0)
    results: list[tuple[int, Exception | None]] = []
    with member(cluster, "async") as consumer:
        consumer.subscribe(["async-commits"])
        poll_until(consumer, lambda: consumer.assignment() == {tp}, 30, "the assignment")
        metadata = consumer.group_metadata()
        assert (metadata.group_id, metadata.generation_id) == ("async", 1)
        assert metadata.member_id and metadata.group_instance_id is None
        for offset in range(1, 51):
            consumer.commit_async({tp: offset},
                                  lambda offsets, error: results.append((offsets[tp], error)))
        consumer.commit({tp: 51})  # waits for the async ones first, then runs callbacks
        assert results == [(offset, None) for offset in range(1, 51)]
        assert consumer.committed(tp) == 51
        consumer.commit_async({tp: 60})
        poll_until(consumer, lambda: consumer.committed(tp) == 60, 30, "the async commit")
        consumer.commit_async({tp: 70}, lambda o, e: results.append((o[tp], e)))
    assert results[-1] == (70, None)  # close() waited for it and ran its callback


def test_wakeup_ends_a_blocked_poll_and_the_consumer_goes_on(cluster: SdkCluster) -> None:
    create(cluster, "wakeups", partitions=1)
    with member(cluster, "wakers") as consumer:
        consumer.subscribe(["wakeups"])
        poll_until(consumer, lambda: bool(consumer.assignment()), 30, "the assignment")
        timer = threading.Timer(0.5, consumer.wakeup)
        started = time.monotonic()
        timer.start()
        with pytest.raises(WakeupError):
            consumer.poll(timeout_ms=20_000)
        assert time.monotonic() - started < 10
        consumer.wakeup()  # with nothing blocking: the next blocking call raises
        assert consumer.subscription() == {"wakeups"}  # not a blocking call: no raise
        with pytest.raises(WakeupError):
            consumer.poll(timeout_ms=0)
        with Producer(cluster.bootstrap) as producer:
            producer.send("wakeups", b"after", partition=0).result(timeout=30)
        got: list[bytes] = []
        poll_until(consumer, lambda: got == [b"after"], 30, "the record after the wakeups",
                   each=lambda record: got.append(record.value or b""))


def test_a_member_that_stops_polling_leaves_and_its_partitions_move(
        cluster: SdkCluster) -> None:
    create(cluster, "slow", partitions=2)
    slow_listener, fast_listener = Recorder(), Recorder()
    with member(cluster, "slowpokes", max_poll_interval_ms=3000) as slow, \
            member(cluster, "slowpokes", max_poll_interval_ms=3000) as fast:
        slow.subscribe(["slow"], listener=slow_listener)
        fast.subscribe(["slow"], listener=fast_listener)
        fast_poller, slow_poller = Poller(fast), Poller(slow)
        wait_until(lambda: len(slow_listener.owned) == 1 and len(fast_listener.owned) == 1,
                   40, "both members to get a partition")
        owned = set(slow_listener.owned)
        # slow stops polling: after max.poll.interval.ms its heartbeat thread leaves
        # the group, and fast gets both partitions (well before slow's session ends).
        slow_poller.stop()
        wait_until(lambda: len(fast_listener.owned) == 2, 20, "fast to take over")
        fast_poller.stop()
        with pytest.raises(StrandError):
            slow.commit({next(iter(owned)): 1})  # no longer a member: refused
        slow.poll(timeout_ms=100)  # it notices: its partitions are lost, then it rejoins
        assert ("lost", owned) in slow_listener.events
        assert "revoked" not in slow_listener.kinds()[slow_listener.kinds().index("lost"):]


def test_a_member_busy_past_its_session_during_a_rebalance_stays_in_the_group(
        cluster: SdkCluster) -> None:
    """Heartbeats go on until the member rejoins: a rebalance that starts while it is
    busy between polls waits for it up to max.poll.interval.ms, not its session."""
    create(cluster, "busy", partitions=2)
    busy_listener, joiner_listener = Recorder(), Recorder()
    with member(cluster, "busybodies", session_timeout_ms=3000) as busy, \
            member(cluster, "busybodies", session_timeout_ms=3000) as joiner:
        busy.subscribe(["busy"], listener=busy_listener)
        poll_until(busy, lambda: len(busy_listener.owned) == 2, 30, "the first assignment")
        joiner.subscribe(["busy"], listener=joiner_listener)
        joiner_poller = Poller(joiner)  # its join starts a rebalance that waits for busy
        time.sleep(7)  # busy "processes" for more than two session timeouts, not polling
        busy_poller = Poller(busy)
        wait_until(lambda: len(busy_listener.owned) == 1 and len(joiner_listener.owned) == 1,
                   40, "the two members to share")
        busy_poller.stop()
        joiner_poller.stop()
        # busy was never expired: the joiner never had both partitions to itself.
        assert joiner_listener.most == 1, joiner_listener.events
        assert "lost" not in busy_listener.kinds()


def test_unsubscribe_hands_partitions_over_at_once(cluster: SdkCluster) -> None:
    create(cluster, "handover", partitions=2)
    leaving, staying = Recorder(), Recorder()
    with member(cluster, "handover") as first, member(cluster, "handover") as second:
        first.subscribe(["handover"], listener=leaving)
        second.subscribe(["handover"], listener=staying)
        first_poller, second_poller = Poller(first), Poller(second)
        wait_until(lambda: len(leaving.owned) == 1 and len(staying.owned) == 1,
                   40, "the two members to share")
        first_poller.stop()
        given_up = set(leaving.owned)
        first.unsubscribe()
        assert first.assignment() == set() and first.subscription() == set()
        assert leaving.events[-1] == ("revoked", given_up)
        wait_until(lambda: len(staying.owned) == 2, 20, "second to take over")
        second_poller.stop()


def test_a_static_member_returns_to_its_partitions_without_a_rebalance(
        cluster: SdkCluster) -> None:
    create(cluster, "static", partitions=4)
    others, pinned_listener = Recorder(), Recorder()
    with member(cluster, "statics", group_instance_id="other") as other:
        other.subscribe(["static"], listener=others)
        other_poller = Poller(other)
        first = member(cluster, "statics", group_instance_id="pinned")
        first.subscribe(["static"], listener=pinned_listener)
        first_poller = Poller(first)
        wait_until(lambda: len(pinned_listener.owned) == 2 and len(others.owned) == 2,
                   40, "the static members to settle")
        first_poller.stop()
        pinned = set(pinned_listener.owned)
        events_before = len(others.events)
        first.close()  # a static member does not leave: its id keeps its partitions
        again = member(cluster, "statics", group_instance_id="pinned")
        try:
            again.subscribe(["static"])
            poll_until(again, lambda: again.assignment() == pinned, 30, "the same partitions")
            time.sleep(1)  # give a rebalance, were there one, time to reach the other
            other_poller.stop()
            assert len(others.events) == events_before  # the other member saw nothing
        finally:
            again.close()


def test_an_empty_groups_offsets_expire_after_retention_and_stay_expired(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    cluster = sdk_cluster_factory(nodes=1)
    retention = ["--offsets-retention-ms", "2500", "--offsets-retention-check-interval-ms",
                 "300"]

    def coordinator(port: int | None = None) -> ServiceProcess:
        proc = cluster.group_coordinator(0, port)
        proc.args = [*proc.args, *retention]
        return proc.start()

    cluster.coordinators = [coordinator()]
    create(cluster, "retained", partitions=1)
    tp = TopicPartition("retained", 0)
    with member(cluster, "keepers") as busy, member(cluster, "leavers") as idle:
        for consumer in (busy, idle):
            consumer.subscribe(["retained"])
            poll_until(consumer, partial(has_assignment, consumer), 30, "an assignment")
            consumer.commit({tp: 7})
        idle.close()  # leaves: the group is empty, its retention starts now
        emptied = time.monotonic()
        with Admin(cluster.bootstrap) as admin:
            wait_until(lambda: "leavers" not in {g.group_id for g in admin.list_groups()},
                       30, "the empty group's offsets to expire")
            took = time.monotonic() - emptied
            assert took >= 2.0, took  # not before the retention
            # The member of the other group keeps polling: its offsets stay.
            poll_until(busy, lambda: True, 30, "a poll")
            assert busy.committed(tp) == 7
            # Expiry was written as tombstones: a coordinator that loads the shard
            # again from __consumer_offsets does not bring the group back.
            old = cluster.coordinators[0]
            old.kill()
            cluster.coordinators = [coordinator(old.listen_port)]

            def served() -> bool:
                try:
                    return busy.committed(tp) == 7
                except StrandError:  # the shard is still moving
                    return False

            wait_until(served, 60, "the restarted coordinator")
            assert "leavers" not in {g.group_id for g in admin.list_groups()}
            offsets = admin.list_group_offsets("leavers")
            assert not offsets, offsets

