"""The client's picture of the cluster: topics → partitions → leader and leader epoch.

Filled from the gateway's Metadata rpc by whoever owns the client's channel (the
producer's sender, the consumer, the admin client); this module does no I/O. A
refresh is due when someone asked for one (an unknown leader, a NOT_LEADER answer, a
topic seen for the first time), at most every ``refresh_backoff_ms``, and in any case
every ``max_age_ms`` (Kafka's ``metadata.max.age.ms``), so that new partitions and
moved leaders are noticed without errors.

Thread-safe: readers get immutable snapshots without a lock (each update replaces
the dicts); updates and waiters synchronise on one condition.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from strand.errors import ErrorCode
from strand.v1 import common_pb2 as pb

__all__ = ["BrokerInfo", "MetadataCache", "PartitionInfo", "TopicInfo"]

NO_LEADER = -1


def _monotonic_ms() -> float:
    return time.monotonic() * 1000.0


def _error_code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A storage node (Kafka's broker)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int  # node id, NO_LEADER (-1) when no live leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: str
    is_internal: bool
    partitions: tuple[PartitionInfo, ...]  # sorted by partition id
    error: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    available: tuple[int, ...] = ()  # partitions with a live leader

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)


def topic_info(topic: pb.TopicMetadata) -> TopicInfo:
    partitions = tuple(sorted(
        (PartitionInfo(topic.name, p.partition, p.leader, p.leader_epoch, tuple(p.replicas),
                       tuple(p.isr), _error_code(p.error_code))
         for p in topic.partitions), key=lambda p: p.partition))
    return TopicInfo(topic.name, topic.topic_id, topic.is_internal, partitions,
                     _error_code(topic.error_code), topic.error_message,
                     tuple(p.partition for p in partitions if p.leader >= 0))


class MetadataCache:
    """Topics and brokers as the gateway last described them; see the module docstring."""

    def __init__(self, *, max_age_ms: float = 300_000, refresh_backoff_ms: float = 100,
                 clock: Callable[[], float] = _monotonic_ms) -> None:
        if max_age_ms < 0 or refresh_backoff_ms < 0:
            raise ValueError("max_age_ms and refresh_backoff_ms must be >= 0")
        self.max_age_ms = max_age_ms
        self.refresh_backoff_ms = refresh_backoff_ms
        self._clock = clock
        self._cond = threading.Condition()
        self._topics: dict[str, TopicInfo] = {}
        self._leaders: dict[tuple[str, int], int] = {}
        self._epochs: dict[tuple[str, int], int] = {}
        self._brokers: dict[int, BrokerInfo] = {}
        self.cluster_id = ""
        self.controller_id = -1
        self._wanted: dict[str, None] = {}  # topics of interest, in first-use order
        self._update_requested = False
        self._last_refresh_ms = -float("inf")  # last successful refresh
        self._last_attempt_ms = -float("inf")
        self._attempts = 0  # refreshes finished, successful or not (waiters watch this)
        self.last_error: BaseException | None = None

    # ------------------------------------------------------------------ reads

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topics(self) -> dict[str, TopicInfo]:
        return self._topics

    def partition_count(self, topic: str) -> int | None:
        """The topic's partition count, or None when it is unknown (or not loaded yet)."""
        info = self._topics.get(topic)
        if info is None or info.error != ErrorCode.NONE or not info.partitions:
            return None
        return len(info.partitions)

    def leader_of(self, tp: tuple[str, int]) -> int | None:
        """The leader's node id, or None when there is no known live leader."""
        leader = self._leaders.get(tp)
        return leader if leader is not None and leader >= 0 else None

    def leader_epoch(self, tp: tuple[str, int]) -> int:
        """The leader epoch known for the partition, or -1."""
        return self._epochs.get(tp, -1)

    @property
    def brokers(self) -> dict[int, BrokerInfo]:
        return self._brokers

    @property
    def version(self) -> int:
        """Counts finished refreshes (successful or failed); see ``wait_for_update``."""
        return self._attempts

    @property
    def last_refresh_ms(self) -> float:
        return self._last_refresh_ms

    # ------------------------------------------------------------ interest and timing

    def add_topics(self, names: Iterable[str]) -> bool:
        """Follow these topics too; True (and a refresh is requested) if any is new."""
        with self._cond:
            new = [n for n in names if n not in self._wanted]
            for name in new:
                self._wanted[name] = None
            if new:
                self._update_requested = True
            return bool(new)

    def wanted_topics(self) -> list[str]:
        return list(self._wanted)

    def request_update(self) -> int:
        """Ask for a refresh as soon as the backoff allows; returns the current version."""
        with self._cond:
            self._update_requested = True
            return self._attempts

    @property
    def update_requested(self) -> bool:
        return self._update_requested

    def time_to_next_update(self, now: float | None = None) -> float:
        """Milliseconds until a refresh is due (0: now)."""
        if now is None:
            now = self._clock()
        if self._update_requested:
            return max(0.0, self._last_attempt_ms + self.refresh_backoff_ms - now)
        return max(0.0, self._last_refresh_ms + self.max_age_ms - now)

    def is_stale(self, now: float | None = None) -> bool:
        return self.time_to_next_update(now) <= 0

    def attempt_started(self, now: float | None = None) -> None:
        """A refresh call starts: the backoff counts from here."""
        with self._cond:
            self._last_attempt_ms = self._clock() if now is None else now

    # ---------------------------------------------------------------- updates

    def update(self, response: pb.MetadataResponse, requested: Iterable[str] | None = None,
               now: float | None = None) -> None:
        """Apply a Metadata answer. ``requested``: the topics asked for (None: all, which
        also forgets topics the answer no longer lists)."""
        now = self._clock() if now is None else now
        fresh = {t.name: topic_info(t) for t in response.topics}
        brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack or None)
                   for b in response.brokers}
        with self._cond:
            if requested is None:
                topics = fresh
            else:
                topics = dict(self._topics)
                for name in requested:
                    topics.pop(name, None)
                topics.update(fresh)
            leaders: dict[tuple[str, int], int] = {}
            epochs: dict[tuple[str, int], int] = {}
            for info in topics.values():
                for p in info.partitions:
                    leaders[(info.name, p.partition)] = p.leader
                    epochs[(info.name, p.partition)] = p.leader_epoch
            self._topics = topics
            self._leaders = leaders
            self._epochs = epochs
            self._brokers = brokers
            self.cluster_id = response.cluster_id
            self.controller_id = response.controller_id
            self._last_refresh_ms = now
            self._last_attempt_ms = max(self._last_attempt_ms, now)
            self._update_requested = False
            self._attempts += 1
            self.last_error = None
            self._cond.notify_all()

    def update_failed(self, error: BaseException, now: float | None = None) -> None:
        """A refresh failed (the gateway unreachable): keep the old picture, retry later."""
        with self._cond:
            self._last_attempt_ms = self._clock() if now is None else now
            self._update_requested = True
            self._attempts += 1
            self.last_error = error
            self._cond.notify_all()

    def wait_for_update(self, version: int, timeout: float | None) -> bool:
        """Block until a refresh finishes after ``version`` (see ``version``), or
        ``timeout`` seconds pass; True if one did."""
        with self._cond:
            return self._cond.wait_for(lambda: self._attempts > version, timeout)
