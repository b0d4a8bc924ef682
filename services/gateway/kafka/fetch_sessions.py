"""Incremental fetch sessions (KIP-227): a consumer names its partitions once, then
only what changed, and is answered only about partitions with news.

A request's (session id, epoch) says what it is:

* epoch -1 (FINAL): a full fetch without a session (and the end of ``session id``'s);
* epoch 0 (INITIAL): a full fetch that starts a new session (ending ``session id``'s);
* epoch n > 0: the n-th incremental fetch of session ``session id``. Its partitions are
  added or updated, its forgotten ones removed; the answer names only partitions with
  records, an error, or a changed high watermark, last stable offset or log start.

An unknown session is FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
INVALID_FETCH_SESSION_EPOCH; the client then starts over with a full fetch.

The cache is bounded, as Kafka's FetchSessionCache (max.incremental.fetch.session.
cache.slots, min.incremental.fetch.session.eviction.ms): when full, a session idle for
longer than the eviction time makes room first, else the smallest session if the new
one has more partitions; else the fetch goes on without a session (session id 0).
No I/O here: the Fetch handler asks and reports.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "CachedPartition", "FetchContext",
           "FetchPosition", "FetchSessionCache", "FetchSessionError", "PartitionKey",
           "PartitionNews"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
NO_SESSION = 0
DEFAULT_SLOTS = 1000  # Kafka's max.incremental.fetch.session.cache.slots
DEFAULT_EVICTION_S = 120.0  # Kafka's min.incremental.fetch.session.eviction.ms
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
_MAX_INT32 = 2**31 - 1

# (topic name, partition index)
PartitionKey = tuple[str, int]


class FetchSessionError(Exception):
    """A fetch refused whole for its session (Kafka's error code in ``code``)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class FetchPosition:
    """Where a client fetches a partition from, as its request says."""

    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    topic_id: uuid.UUID | None = None  # echoed in the answers of Fetch v13+


@dataclass(slots=True)
class CachedPartition:
    position: FetchPosition
    # What the client was last told (-1: nothing yet).
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class PartitionNews:
    """What a fetch found for one partition (-1: not known this time)."""

    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    has_records: bool


@dataclass(slots=True)
class FetchSession:
    session_id: int
    next_epoch: int
    partitions: dict[PartitionKey, CachedPartition]
    last_used: float


@dataclass(slots=True)
class FetchContext:
    """One fetch: the partitions to read, and the session it belongs to (if any)."""

    session_id: int  # answered to the client; 0: none
    incremental: bool
    partitions: dict[PartitionKey, CachedPartition] = field(default_factory=dict)


class FetchSessionCache:
    def __init__(self, max_slots: int = DEFAULT_SLOTS,
                 eviction_s: float = DEFAULT_EVICTION_S,
                 clock: Callable[[], float] = time.monotonic,
                 new_id: Callable[[], int] | None = None) -> None:
        if max_slots < 0:
            raise ValueError(f"fetch session slots must be 0 or more, not {max_slots}")
        self.max_slots = max_slots
        self.eviction_s = eviction_s
        self._clock = clock
        self._new_id = new_id or (lambda: random.randint(1, _MAX_INT32))
        self._sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: int) -> bool:
        return session_id in self._sessions

    def context(self, session_id: int, epoch: int,
                requested: Sequence[tuple[PartitionKey, FetchPosition]],
                forgotten: Iterable[PartitionKey] = ()) -> FetchContext:
        """The fetch a request asks for (raises :class:`FetchSessionError`)."""
        now = self._clock()
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full fetch
            self._sessions.pop(session_id, None)
            partitions = {key: CachedPartition(position) for key, position in requested}
            new_id = NO_SESSION
            if epoch == INITIAL_EPOCH and partitions and self._make_room(len(partitions), now):
                new_id = self._unused_id()
                self._sessions[new_id] = FetchSession(new_id, 1, partitions, now)
            return FetchContext(new_id, False, partitions)
        session = self._sessions.get(session_id)
        if session is None:
            raise FetchSessionError(FETCH_SESSION_ID_NOT_FOUND,
                                    f"fetch session {session_id} is not in this gateway's "
                                    "cache (evicted, or opened on another gateway)")
        if epoch != session.next_epoch:
            raise FetchSessionError(INVALID_FETCH_SESSION_EPOCH,
                                    f"fetch session {session_id} expects epoch "
                                    f"{session.next_epoch}, not {epoch}")
        for key, position in requested:
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = CachedPartition(position)
            else:
                cached.position = position
        for key in forgotten:
            session.partitions.pop(key, None)
        session.next_epoch = session.next_epoch % _MAX_INT32 + 1
        session.last_used = now
        return FetchContext(session_id, True, session.partitions)

    def news(self, context: FetchContext, found: dict[PartitionKey, PartitionNews]
             ) -> list[PartitionKey]:
        """The partitions to answer about (every one for a full fetch, those with news
        for an incremental one), remembering what the client is told."""
        answer: list[PartitionKey] = []
        for key, cached in context.partitions.items():
            news = found.get(key)
            if news is None:
                continue
            changed = _remember(cached, news)
            if not context.incremental or changed or news.has_records or news.error_code:
                answer.append(key)
        return answer

    def _unused_id(self) -> int:
        while True:
            session_id = self._new_id()
            if session_id != NO_SESSION and session_id not in self._sessions:
                return session_id

    def _make_room(self, size: int, now: float) -> bool:
        if len(self._sessions) < self.max_slots:
            return True
        if not self._sessions:
            return False
        idle = min(self._sessions.values(), key=lambda s: s.last_used)
        smallest = min(self._sessions.values(), key=lambda s: (len(s.partitions), s.last_used))
        if now - idle.last_used >= self.eviction_s:
            victim = idle
        elif len(smallest.partitions) < size:
            victim = smallest
        else:
            return False
        del self._sessions[victim.session_id]
        self.evictions += 1
        return True


def _remember(cached: CachedPartition, news: PartitionNews) -> bool:
    """Record what the client is told; True if any of it changed."""
    changed = False
    for name in ("high_watermark", "last_stable_offset", "log_start_offset"):
        value = getattr(news, name)
        if value >= 0 and value != getattr(cached, name):
            setattr(cached, name, value)
            changed = True
    return changed
