"""The Consumer in a group: ``subscribe()`` instead of ``assign()``.

Before each ``poll()`` the consumer makes sure it is a member of its group with a
current assignment (:class:`ConsumerCoordinator`), tells the rebalance listener
what it lost or gained, starts new partitions at their committed offsets (or by
``auto_offset_reset`` when nothing is committed), and commits its positions every
``auto_commit_interval_ms`` when auto commit is on. Partitions an eager rebalance
takes away are committed first, so the next owner starts where this one stopped.

A subscription to a pattern (``re.Pattern``) is matched against every topic of the
cluster, internal ones left out, when subscribing and then every
``metadata_max_age_ms``; when the matching topics change the member rejoins with
the new list, as Kafka's consumer does. At the same interval the group's leader
checks the partition counts of the subscribed topics against those it assigned, and
rejoins when partitions were added, so that they are assigned too.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Protocol

from strand.client.metadata import MetadataCache
from strand.client.structs import TopicPartition
from strand.consumer.coordinator import ConsumerCoordinator, Rebalance
from strand.consumer.subscription_state import SubscriptionState
from strand.errors import StrandError

log = logging.getLogger(__name__)


class RebalanceListener(Protocol):
    """Kafka's ``ConsumerRebalanceListener`` (any of the three may be left out)."""

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None: ...

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None: ...


def _notify(listener: object, method: str, partitions: set[TopicPartition]) -> None:
    callback = getattr(listener, method, None)
    if callback is not None and partitions:
        callback(set(partitions))


class GroupMode:
    """Drives ``coordinator`` for the consumer: the subscription and the assignment it
    reads and writes are the consumer's ``subscriptions``; ``metadata`` is told the
    topics to follow."""

    def __init__(self, subscriptions: SubscriptionState, coordinator: ConsumerCoordinator,
                 metadata: MetadataCache, *, enable_auto_commit: bool,
                 auto_commit_interval_ms: float, join_timeout_ms: float,
                 metadata_max_age_ms: float,
                 topic_partitions: Callable[[], dict[str, int]]) -> None:
        self.subscriptions = subscriptions
        self.coordinator = coordinator
        self.metadata = metadata
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_s = auto_commit_interval_ms / 1000
        self.join_timeout_s = join_timeout_ms / 1000
        self.metadata_max_age_s = metadata_max_age_ms / 1000
        self.topic_partitions = topic_partitions
        self._next_check = time.monotonic() + self.metadata_max_age_s
        self._next_commit = time.monotonic() + self.auto_commit_interval_s
        # Partitions given by the group may be waiting for their committed offsets.
        self._committed_pending = False

    def subscribe(self, topics: list[str], listener: object | None,
                  pattern: re.Pattern[str] | None = None) -> None:
        if pattern is None:
            if self.subscriptions.subscribe(topics, listener):
                self.coordinator.request_rejoin()
        else:
            self.subscriptions.subscribe_pattern(pattern, listener)
            self._check_metadata()

    def _check_metadata(self) -> None:
        counts = self.topic_partitions()
        self._next_check = time.monotonic() + self.metadata_max_age_s
        coordinator = self.coordinator
        if coordinator.is_leader and any(counts.get(topic) != count for topic, count
                                         in coordinator.assigned_counts.items()):
            log.info("partitions of subscribed topics changed: rejoining to reassign",
                     extra={"group": coordinator.group_id})
            coordinator.request_rejoin()
        subscriptions = self.subscriptions
        pattern = subscriptions.pattern
        if pattern is None:
            return
        topics = [t for t in counts if pattern.fullmatch(t)]
        if not subscriptions.subscribed or set(topics) != set(subscriptions.topics):
            log.info("pattern %r matches %s", pattern.pattern, topics,
                     extra={"group": coordinator.group_id})
            self.metadata.add_topics(topics)
            if subscriptions.change_subscription(topics):
                coordinator.request_rejoin()

    def unsubscribe(self) -> None:
        """Give the partitions up (committing them first with auto commit) and leave."""
        owned = set(self.coordinator.owned)
        if owned:
            self._before_revoke(owned)
        self.coordinator.close(leave=True)
        self.subscriptions.unsubscribe()

    def before_poll(self) -> None:
        coordinator = self.coordinator
        coordinator.last_poll = time.monotonic()
        coordinator.run_commit_callbacks()
        if self.subscriptions.subscribed and time.monotonic() >= self._next_check:
            try:
                self._check_metadata()
            except StrandError as exc:  # the gateway is away: again next poll
                log.info("could not refresh the group's topics: %s", exc)
        if coordinator.needs_rejoin and self.subscriptions.subscribed:
            result = self.coordinator.ensure_active(self.join_timeout_s,
                                                    before_join=self._before_revoke)
            if result is not None:
                self._apply(result)
        self.fetch_committed()
        if self.enable_auto_commit and time.monotonic() >= self._next_commit:
            self._next_commit = time.monotonic() + self.auto_commit_interval_s
            try:
                self.commit_positions()
            except StrandError as exc:  # a rebalance under way: the next round commits
                log.info("auto commit skipped: %s", exc)

    def _before_revoke(self, partitions: set[TopicPartition]) -> None:
        if self.enable_auto_commit:
            try:
                self.commit_positions(partitions)
            except StrandError as exc:
                log.warning("could not commit revoked partitions: %s", exc)
        _notify(self.subscriptions.listener, "on_partitions_revoked", partitions)

    def _apply(self, result: Rebalance) -> None:
        subscriptions = self.subscriptions
        if result.lost:
            _notify(subscriptions.listener, "on_partitions_lost", result.lost)
        elif result.revoked and self.coordinator.cooperative:
            _notify(subscriptions.listener, "on_partitions_revoked", result.revoked)
        owned = sorted(self.coordinator.owned)
        subscriptions.assign_from_subscribed(owned, result.assigned)
        self.metadata.add_topics(tp.topic for tp in owned)
        self._committed_pending = bool(result.assigned)
        self.fetch_committed()  # failing, it is tried again by the next poll()
        _notify(subscriptions.listener, "on_partitions_assigned", result.assigned)

    def fetch_committed(self) -> None:
        """Start the partitions the group gave this member at their committed offsets
        (those with nothing committed: by ``auto_offset_reset``). A failure leaves them
        waiting, without a position, for the next try: never a silent reset."""
        if not self._committed_pending:  # every poll asks: no scan of the assignment
            return
        pending = self.subscriptions.awaiting_committed()
        if pending:
            try:
                # One try: poll() and position() come back (after their backoff) while
                # a transaction keeps an offset unstable, as Kafka's poll does.
                committed = self.coordinator.committed(pending, timeout_s=0)
            except StrandError as exc:
                log.info("could not fetch committed offsets, retrying at the next poll: %s",
                         exc)
                return
            self.subscriptions.apply_committed(committed)
        self._committed_pending = False

    def commit_positions(self, partitions: set[TopicPartition] | None = None) -> None:
        self.coordinator.commit(self.subscriptions.positions(partitions))

    def close(self, timeout_s: float) -> None:
        if self.enable_auto_commit and self.coordinator.member_id:
            try:
                self.commit_positions()
            except StrandError as exc:
                log.warning("final auto commit failed: %s", exc)
        self.coordinator.flush_async(timeout_s)
        self.coordinator.close(leave=True)
