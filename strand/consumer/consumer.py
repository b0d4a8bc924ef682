"""The SDK's Consumer: Kafka's consumer API over the gateway (assign mode).

::

    from strand import Consumer, TopicPartition

    consumer = Consumer("127.0.0.1:7070", auto_offset_reset="earliest")
    consumer.assign([TopicPartition("events", 0), TopicPartition("events", 1)])
    for tp, records in consumer.poll(timeout_ms=1000).items():
        for record in records:
            print(record.offset, record.key, record.value)
    for record in consumer:            # blocks for the next record
        ...
    consumer.close()

With ``group_id``, ``subscribe()`` joins a consumer group instead (see
:mod:`strand.consumer.group_mode`): partitions are shared among the members and
positions are committed to the group. Without a group, positions live only in the
consumer: a newly assigned partition starts where ``auto_offset_reset`` says
(``'earliest'``, the default here, ``'latest'``, or ``'none'``: raise
NoOffsetForPartitionError until ``seek()``).

``assign()`` and ``subscribe()`` exclude each other. What is assigned and where
each partition stands is kept in one
:class:`~strand.consumer.subscription_state.SubscriptionState`, shared with the
fetcher and the group mode. How it fetches and what happens on errors:
:mod:`strand.consumer.fetcher` (pipelined Fetch calls, one per leader node; stale
leaders retried, out-of-range offsets reset by ``auto_offset_reset``); positions
being reset are resolved by :mod:`strand.consumer.offset_lookup`. Errors that
cannot be retried are raised from ``poll()`` as their typed StrandError.

Like Kafka's, a Consumer is not thread-safe: use it from one thread. Two calls may
come from another thread: ``wakeup()`` makes the blocking call in progress (or the
next one) raise WakeupError, and ``close()`` stops a blocked ``poll()`` or
iteration for good.
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Literal

from strand.client.bootstrap import resolve_bootstrap
from strand.client.channel import MAX_MESSAGE_BYTES, open_channel
from strand.client.metadata import MetadataCache
from strand.client.sasl import SaslCredentials
from strand.client.structs import TopicPartition
from strand.consumer.coordinator import ConsumerCoordinator, ConsumerGroupMetadata
from strand.consumer.errors import WakeupError
from strand.consumer.fetcher import ISOLATION_LEVELS, Fetcher, FetchSettings
from strand.consumer.group_mode import GroupMode
from strand.consumer.offset_lookup import EARLIEST, LATEST, OffsetLookup
from strand.consumer.records import ConsumerRecord
from strand.consumer.subscription_state import PartitionState, SubscriptionState
from strand.consumer.topic_metadata import TopicMetadata
from strand.errors import (
    RequestTimedOutError,
    StrandError,
)
from strand.security.tls import ClientTls

__all__ = ["Consumer"]

log = logging.getLogger(__name__)

OffsetReset = Literal["earliest", "latest", "none"]
_ids = itertools.count(1)


def _tp(value: TopicPartition | tuple[str, int]) -> TopicPartition:
    if isinstance(value, TopicPartition):
        return value
    try:
        topic, partition = value
    except (TypeError, ValueError):
        raise TypeError(f"expected TopicPartition(topic, partition), not {value!r}") from None
    if type(topic) is not str or type(partition) is not int or partition < 0:
        raise TypeError(f"expected TopicPartition(topic, partition), not {value!r}")
    return TopicPartition(topic, partition)


class Consumer:
    """Reads records from assigned partitions; see the module docstring.

    Settings (Kafka's names, snake_case; times in milliseconds):

    - ``fetch_min_bytes`` / ``fetch_max_wait_ms``: a fetch waits for this many bytes,
      at most this long.
    - ``fetch_max_bytes``: bytes per fetch answer; ``max_partition_fetch_bytes``: per
      partition (the first batch is returned whole even when larger).
    - ``max_poll_records``: records per ``poll()`` by default.
    - ``auto_offset_reset``: where a partition without a valid position starts.
    - ``isolation_level``: ``'read_uncommitted'`` or ``'read_committed'`` (records of
      committed transactions only; the group's committed offsets only once no open
      transaction may still replace them: UNSTABLE_OFFSET_COMMIT is retried).
    - ``consumer_timeout_ms``: iteration stops after this long without a record
      (None: it blocks until ``close()``).
    """

    def __init__(
        self,
        bootstrap: str | None = None,
        *,
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 50 * 1024 * 1024,
        max_partition_fetch_bytes: int = 1024 * 1024,
        max_poll_records: int = 500,
        auto_offset_reset: OffsetReset = "earliest",
        isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted",
        request_timeout_ms: float = 30_000,
        retry_backoff_ms: float = 100,
        metadata_max_age_ms: float = 300_000,
        check_crcs: bool = True,
        consumer_timeout_ms: float | None = None,
        client_id: str | None = None,
        group_id: str | None = None,
        group_instance_id: str | None = None,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: float = 5_000,
        session_timeout_ms: int = 10_000,
        heartbeat_interval_ms: int = 3_000,
        max_poll_interval_ms: int = 300_000,
        partition_assignment_strategy: tuple[str, ...] = ("range", "cooperative-sticky"),
        security_protocol: str = "PLAINTEXT",
        ssl_cafile: str | None = None,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
    ) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(f"auto_offset_reset must be 'earliest', 'latest' or 'none', "
                             f"not {auto_offset_reset!r}")
        if isolation_level not in ISOLATION_LEVELS:
            raise ValueError(f"isolation_level must be 'read_uncommitted' or 'read_committed', "
                             f"not {isolation_level!r}")
        if fetch_min_bytes < 0 or fetch_max_wait_ms < 0:
            raise ValueError("fetch_min_bytes and fetch_max_wait_ms must be >= 0")
        if not 0 < fetch_max_bytes <= MAX_MESSAGE_BYTES - 1024 * 1024:
            raise ValueError(f"fetch_max_bytes must be in (0, {MAX_MESSAGE_BYTES - 1024 * 1024}]")
        if max_partition_fetch_bytes <= 0 or max_poll_records <= 0:
            raise ValueError("max_partition_fetch_bytes and max_poll_records must be positive")
        if request_timeout_ms <= 0 or retry_backoff_ms < 0:
            raise ValueError("request_timeout_ms must be positive, retry_backoff_ms >= 0")
        self.client_id = client_id or f"strand-consumer-{next(_ids)}"
        self.bootstrap = resolve_bootstrap(bootstrap)
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.max_poll_records = max_poll_records
        self.auto_offset_reset = auto_offset_reset
        self.isolation_level = isolation_level
        isolation = ISOLATION_LEVELS[isolation_level]
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.check_crcs = check_crcs
        self.consumer_timeout_ms = consumer_timeout_ms
        self._metadata = MetadataCache(max_age_ms=metadata_max_age_ms,
                                       refresh_backoff_ms=retry_backoff_ms)
        tls = ClientTls.from_settings(security_protocol, ssl_cafile, ssl_certfile, ssl_keyfile)
        sasl = SaslCredentials.from_settings(security_protocol, sasl_mechanism,
                                             sasl_plain_username, sasl_plain_password)
        self._channel = open_channel(self.bootstrap, self.client_id, tls, sasl)
        self._topics = TopicMetadata(self._channel, self.bootstrap, self._metadata,
                                     request_timeout_ms)
        # What is assigned and where each partition stands: shared with the fetcher,
        # the offset lookup and the group mode.
        self._subscriptions = SubscriptionState()
        self._fetcher = Fetcher(
            self._channel, self.bootstrap, self._metadata, self._subscriptions, FetchSettings(
                fetch_min_bytes, fetch_max_wait_ms, fetch_max_bytes, max_partition_fetch_bytes,
                isolation, request_timeout_ms, retry_backoff_ms, check_crcs,
                auto_offset_reset), self._topics.refresh_if_due)
        # Fetches in flight for old positions are dropped: the new ones go out at once.
        self._subscriptions.add_reposition_listener(self._fetcher.cancel)
        self._closed = False
        self._wake = threading.Event()  # set by close() to end a blocked poll
        self._wakeup = threading.Event()  # set by wakeup(): the blocking call raises
        self._offsets = OffsetLookup(
            self._channel, self.bootstrap, self._metadata, isolation=isolation,
            request_timeout_ms=request_timeout_ms, retry_backoff_ms=retry_backoff_ms,
            auto_offset_reset=auto_offset_reset, interrupted=self._wake,
            check_open=self._check_open)
        # Iteration hands out records one by one from this stash (see __next__).
        self._stash: deque[ConsumerRecord] = deque()
        self._group: GroupMode | None = None
        if group_id is not None:
            coordinator = ConsumerCoordinator(
                self._channel, self.bootstrap, group_id, self.client_id, self._subscriptions,
                assignors=partition_assignment_strategy, group_instance_id=group_instance_id,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=max_poll_interval_ms,
                heartbeat_interval_ms=heartbeat_interval_ms,
                request_timeout_ms=request_timeout_ms, partitions_for=self._partition_count,
                topic_id=self._topic_id, wakeup=self._wakeup, check_wakeup=self._check_wakeup,
                require_stable=isolation_level == "read_committed")
            self._group = GroupMode(self._subscriptions, coordinator, self._metadata,
                                    enable_auto_commit=enable_auto_commit,
                                    auto_commit_interval_ms=auto_commit_interval_ms,
                                    join_timeout_ms=max_poll_interval_ms,
                                    metadata_max_age_ms=metadata_max_age_ms,
                                    topic_partitions=self._topics.all_topic_partitions)

    # ------------------------------------------------------------- assignment

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Consume exactly these partitions (replacing the previous assignment). Kept
        partitions keep their positions; new ones start by ``auto_offset_reset``. Not
        while subscribed to a group (``unsubscribe()`` first)."""
        self._check_open()
        wanted = list(dict.fromkeys(_tp(p) for p in partitions))
        self._unstash()
        self._subscriptions.assign_from_user(wanted)
        self._metadata.add_topics(tp.topic for tp in wanted)

    def unassign(self) -> None:
        self.assign([])

    # ------------------------------------------------------------------- groups

    def subscribe(self, topics: Iterable[str] = (), listener: object | None = None, *,
                  pattern: str | re.Pattern[str] | None = None) -> None:
        """Consume ``topics`` (or every topic whose whole name matches ``pattern``) as
        a member of ``group_id``: the group shares their partitions among its
        members. ``listener`` may have Kafka's
        ``on_partitions_revoked/assigned/lost(partitions)`` methods. Not while
        partitions are assigned with ``assign()`` (``unassign()`` first)."""
        group = self._group_mode("subscribe()")
        topics = [topics] if isinstance(topics, str) else list(topics)
        if (pattern is None) == (not topics):
            raise ValueError("subscribe() takes topics or a pattern (one of the two)")
        compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
        group.subscribe(topics, listener, compiled)
        self._metadata.add_topics(topics)

    def unsubscribe(self) -> None:
        """Give up the group's partitions (committed first with auto commit; the
        listener's ``on_partitions_revoked`` is called) and leave the group."""
        self._group_mode("unsubscribe()").unsubscribe()
        self._unstash()  # records taken for iteration belonged to the partitions given up

    def subscription(self) -> set[str]:
        """The topics subscribed to (for a pattern: those it matches now)."""
        self._group_mode("subscription()")
        return set(self._subscriptions.topics)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group, generation and member id this consumer has now."""
        return self._group_mode("group_metadata()").coordinator.metadata()

    def commit(self, offsets: dict[TopicPartition, int] | None = None) -> None:
        """Commit ``offsets`` (default: the current positions) to the group, now;
        after the ``commit_async()`` calls made before it."""
        group = self._group_mode("commit()", blocking=True)
        if offsets is None:
            group.commit_positions()
        else:
            group.coordinator.commit({_tp(tp): o for tp, o in offsets.items()})

    def commit_async(self, offsets: dict[TopicPartition, int] | None = None,
                     callback: Callable[[dict[TopicPartition, int], Exception | None], None]
                     | None = None) -> None:
        """Commit ``offsets`` (default: the current positions) without waiting.
        Commits are sent in the order made; ``callback(offsets, error)`` (error None
        on success) runs in this thread from a later ``poll()``, ``commit()`` or
        ``close()``."""
        group = self._group_mode("commit_async()")
        chosen = self._subscriptions.positions() if offsets is None else {
            _tp(tp): o for tp, o in offsets.items()}
        group.coordinator.commit_async(chosen, callback)

    def committed(self, tp: TopicPartition | tuple[str, int]) -> int | None:
        """The group's committed offset of ``tp`` (None: nothing committed)."""
        group = self._group_mode("committed()", blocking=True)
        return group.coordinator.committed([_tp(tp)])[_tp(tp)]

    def _group_mode(self, what: str, blocking: bool = False) -> GroupMode:
        self._check_open()
        if blocking:  # only blocking calls raise for a wakeup() (Kafka's rule)
            self._check_wakeup()
        if self._group is None:
            raise ValueError(f"{what} needs a group_id")
        return self._group

    def _partition_count(self, topic: str) -> int | None:
        """For the group leader's assignment: None for a topic that does not exist."""
        try:
            return len(self.partitions_for(topic))
        except StrandError:
            return None

    def _topic_id(self, topic: str) -> str:
        """The topic's id as the metadata last showed it ("": not known)."""
        info = self._metadata.topic(topic)
        return info.topic_id if info is not None else ""

    def assignment(self) -> set[TopicPartition]:
        return self._subscriptions.assigned_partitions()

    def _state(self, tp: TopicPartition | tuple[str, int]) -> PartitionState:
        return self._subscriptions.state(_tp(tp))

    # ------------------------------------------------------------------ seeking

    def seek(self, tp: TopicPartition | tuple[str, int], offset: int) -> None:
        """The next ``poll()`` returns ``tp``'s records from ``offset`` on."""
        self._check_open()
        if type(offset) is not int or offset < 0:
            raise ValueError(f"offset must be an int >= 0, not {offset!r}")
        self._unstash()
        self._subscriptions.seek(_tp(tp), offset)

    def seek_to_beginning(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        """Start these partitions (default: all assigned) at their log start offset."""
        self._request_reset(partitions, "earliest")

    def seek_to_end(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        """Start these partitions (default: all assigned) at their end (new records only)."""
        self._request_reset(partitions, "latest")

    def _request_reset(self, partitions: tuple[TopicPartition | tuple[str, int], ...],
                       strategy: str) -> None:
        self._check_open()
        self._unstash()
        self._subscriptions.request_reset(map(_tp, partitions) if partitions else None,
                                          strategy)

    def position(self, tp: TopicPartition | tuple[str, int], timeout_ms: float | None = None
                 ) -> int:
        """The offset of the next record ``poll()`` returns for ``tp`` (resolving a
        pending reset first, which asks the cluster)."""
        self._check_open()
        state = self._state(tp)
        deadline = time.monotonic() + (self.request_timeout_ms if timeout_ms is None
                                       else timeout_ms) / 1000
        while state.position is None:
            if self._group is not None:
                self._group.fetch_committed()
            self._raise_errors()
            self._update_positions()
            if state.position is not None:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RequestTimedOutError(f"could not find the position of {_tp(tp)} "
                                           f"within {timeout_ms or self.request_timeout_ms} ms")
            self._wake.wait(min(remaining, self.retry_backoff_ms / 1000 or 0.01))
            self._check_open()
            self._check_wakeup()
        return state.position

    # ---------------------------------------------------------------- pausing

    def pause(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        """Stop returning and fetching these partitions' records until ``resume()``."""
        self._unstash()
        self._subscriptions.pause(map(_tp, partitions))

    def resume(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        self._unstash()
        self._subscriptions.resume(map(_tp, partitions))

    def paused(self) -> set[TopicPartition]:
        return self._subscriptions.paused()

    # ------------------------------------------------------------------- poll

    def poll(self, timeout_ms: float = 0, max_records: int | None = None
             ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records of the assigned, unpaused partitions, at most ``max_records``
        (default ``max_poll_records``), waiting up to ``timeout_ms`` for some."""
        self._check_open()
        self._unstash()
        limit = self.max_poll_records if max_records is None else max_records
        if limit <= 0:
            raise ValueError(f"max_records must be positive, got {max_records}")
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        self._check_wakeup()
        if self._group is not None:
            self._group.before_poll()
        while True:
            self._check_wakeup()
            self._raise_errors()
            self._update_positions()
            self._fetcher.collect()
            records = self._fetcher.drain(limit)
            if not self._closed:
                self._fetcher.send()
            if records:
                return records
            self._raise_errors()
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._closed:
                return {}
            self._fetcher.wait(remaining)
            if self._closed:
                return {}  # closed from another thread while waiting

    # ---------------------------------------------------------------- iteration

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self

    def __next__(self) -> ConsumerRecord:
        """The next record, blocking for it; StopIteration once closed (or after
        ``consumer_timeout_ms`` without a record). Each record handed out moves its
        partition's position just past it."""
        deadline = (None if self.consumer_timeout_ms is None
                    else time.monotonic() + self.consumer_timeout_ms / 1000)
        while not self._stash:
            if self._closed:
                raise StopIteration
            wait = 1000.0 if deadline is None else (deadline - time.monotonic()) * 1000
            if wait <= 0:
                raise StopIteration
            try:
                batches = self.poll(timeout_ms=min(wait, 1000.0))
            except Exception:
                if self._closed:  # closed from another thread mid-poll
                    raise StopIteration from None
                raise
            for records in batches.values():
                self._stash.extend(records)
        record = self._stash.popleft()
        state = self._subscriptions.get(TopicPartition(record.topic, record.partition))
        if state is not None:
            state.position = record.offset + 1
        return record

    def _unstash(self) -> None:
        """Give records taken for iteration but not handed out back to their partitions."""
        if not self._stash:
            return
        first: dict[TopicPartition, int] = {}
        for record in self._stash:
            first.setdefault(TopicPartition(record.topic, record.partition), record.offset)
        self._stash.clear()
        for tp, offset in first.items():
            if self._subscriptions.is_assigned(tp):
                self._subscriptions.seek(tp, offset)

    def _update_positions(self) -> None:
        if self._offsets.update_positions(self._subscriptions):
            self._fetcher.cancel()  # the new positions join the next fetch at once

    def _raise_errors(self) -> None:
        error = self._subscriptions.take_error()
        if error is not None:
            raise error

    # ---------------------------------------------------------------- offsets

    def beginning_offsets(self, partitions: Iterable[TopicPartition | tuple[str, int]],
                          timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        """The first offset of each partition (its log start offset)."""
        return self._offsets.lookup(dict.fromkeys(map(_tp, partitions), EARLIEST), timeout_ms)

    def end_offsets(self, partitions: Iterable[TopicPartition | tuple[str, int]],
                    timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        """The offset after the last readable record of each partition (its high
        watermark; the last stable offset for read_committed)."""
        return self._offsets.lookup(dict.fromkeys(map(_tp, partitions), LATEST), timeout_ms)

    def offsets_for_times(self, timestamps: dict[TopicPartition, int],
                          timeout_ms: float | None = None) -> dict[TopicPartition, int | None]:
        """The first offset whose timestamp is >= the given one (ms), or None if none is."""
        for ts in timestamps.values():
            if type(ts) is not int or ts < 0:
                raise ValueError(f"timestamps must be ints >= 0, not {ts!r}")
        found = self._offsets.lookup({_tp(tp): ts for tp, ts in timestamps.items()}, timeout_ms)
        return {tp: (offset if offset >= 0 else None) for tp, offset in found.items()}

    def partitions_for(self, topic: str, timeout_ms: float | None = None) -> list[int]:
        """The topic's partition ids (asks the gateway when they are not known yet,
        trying again while it cannot be reached, up to ``timeout_ms``, default the
        request timeout); UnknownTopicOrPartitionError if the topic does not exist."""
        self._check_open()
        return self._topics.partition_ids(topic, timeout_ms)

    def highwater(self, tp: TopicPartition | tuple[str, int]) -> int | None:
        """The partition's high watermark as of the last fetch answer (None before one)."""
        mark = self._state(tp).high_watermark
        return mark if mark >= 0 else None

    # ------------------------------------------------------------------ wakeup

    def wakeup(self) -> None:
        """From any thread: the blocking call in progress (``poll()``, joining the
        group, ``commit()``, ``committed()``, ``position()``), or else the next one,
        raises WakeupError; the consumer stays usable (Kafka's ``wakeup()``)."""
        self._wakeup.set()
        self._fetcher.done.set()
        if self._group is not None:
            self._group.coordinator.interrupt()

    def _check_wakeup(self) -> None:
        if self._wakeup.is_set():
            self._wakeup.clear()
            raise WakeupError("woken up by wakeup()")

    # ------------------------------------------------------------------ close

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the consumer is closed")

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop fetching and release the connection. Idempotent; may be called from
        another thread to end a blocked ``poll()`` or iteration."""
        if self._closed:
            return
        if self._group is not None:
            # Commits (auto commit), waits for the asynchronous commits, and leaves
            # the group at once.
            self._group.close(self.request_timeout_ms / 1000)
        self._closed = True
        self._wake.set()
        self._fetcher.cancel()
        self._fetcher.done.set()
        self._channel.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Consumer(client_id={self.client_id!r}, bootstrap={self.bootstrap!r}, "
                f"assignment={sorted(self._subscriptions.assigned_partitions())})")
