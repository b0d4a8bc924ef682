"""What a consumer consumes and where it stands (Kafka's ``SubscriptionState``).

One object, owned by the Consumer and shared with its fetcher, its offset lookup and
its group mode, holds:

- how partitions are chosen: by the user (``assign()``), or by the group for
  subscribed topics or a pattern (``subscribe()``); the two exclude each other until
  ``unsubscribe()`` (or ``unassign()``) clears the choice,
- the subscribed topics (for a pattern: those it matches now), the pattern, and the
  rebalance listener,
- the assignment: a :class:`PartitionState` per partition (its position, whether it
  is paused, a pending reset, a committed offset still to be fetched, what is
  buffered for it, the last watermarks).

Whoever sends fetches registers ``add_reposition_listener``: it is told whenever
positions move under it (assignment changes, seeks, resets, resumed partitions,
committed offsets applied), so that fetches in flight for the old positions can be
dropped at once.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from enum import Enum

from strand.client.structs import TopicPartition
from strand.consumer.fetch_buffer import CompletedFetch
from strand.errors import StrandError

__all__ = ["PartitionState", "SubscriptionState", "SubscriptionType"]


@dataclass(slots=True)
class PartitionState:
    """One assigned partition, as the consumer sees it."""

    position: int | None = None  # offset of the next record poll() returns
    reset: str | None = None  # a pending reset: "earliest" or "latest"
    fetch_offset: int = 0  # where the next fetch starts (after what is buffered)
    version: int = 0  # bumped by every seek/reset: answers to older fetches are dropped
    paused: bool = False
    retry_at: float = 0.0  # monotonic seconds: no fetch/list-offsets before
    error: StrandError | None = None  # raised by the next poll()
    # Given by the group: its position is the committed offset, still to be fetched
    # (auto_offset_reset applies only once the group says nothing is committed).
    awaiting_committed: bool = False
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1
    buffered: deque[CompletedFetch] = field(default_factory=deque)

    @property
    def fetchable(self) -> bool:
        """Not paused, with a position, and nothing pending (an error, a reset)."""
        return (not self.paused and self.position is not None and self.error is None
                and self.reset is None)

    def clear(self) -> None:
        """Forget what is buffered and pending: answers in flight are dropped too."""
        self.version += 1
        self.buffered.clear()
        self.error = None
        self.retry_at = 0.0

    def seek(self, offset: int) -> None:
        self.clear()
        self.awaiting_committed = False
        self.position = offset
        self.fetch_offset = offset
        self.reset = None

    def request_reset(self, strategy: str) -> None:
        self.clear()
        self.awaiting_committed = False
        self.position = None
        self.reset = strategy


class SubscriptionType(Enum):
    NONE = "none"
    AUTO_TOPICS = "topics"  # subscribe(topics): the group assigns
    AUTO_PATTERN = "pattern"  # subscribe(pattern=...): the group assigns
    USER_ASSIGNED = "assigned"  # assign(partitions)


_AUTO = frozenset({SubscriptionType.AUTO_TOPICS, SubscriptionType.AUTO_PATTERN})


class SubscriptionState:
    """See the module docstring. Not thread-safe: used from the consumer's thread."""

    def __init__(self) -> None:
        self.type = SubscriptionType.NONE
        self.pattern: re.Pattern[str] | None = None
        self.listener: object | None = None
        # None until a topic list is known (a pattern's first match is pending).
        self._topics: tuple[str, ...] | None = None
        self._assignment: dict[TopicPartition, PartitionState] = {}
        self._reposition_listeners: list[Callable[[], None]] = []

    # ------------------------------------------------------------ subscription

    def _set_type(self, wanted: SubscriptionType) -> None:
        if self.type != SubscriptionType.NONE and (self.type in _AUTO) != (wanted in _AUTO):
            raise ValueError("assign() and subscribe() exclude each other: unsubscribe() "
                             "(or unassign()) first")
        self.type = wanted

    @property
    def subscribed(self) -> bool:
        """Whether the group has a topic list to join with."""
        return self._topics is not None

    @property
    def topics(self) -> tuple[str, ...]:
        """The subscribed topics, sorted (for a pattern: those it matches now)."""
        return self._topics or ()

    def subscribe(self, topics: Iterable[str], listener: object | None) -> bool:
        """Subscribe to ``topics``; True if they changed (the group must rejoin)."""
        self._set_type(SubscriptionType.AUTO_TOPICS)
        self.pattern = None
        self.listener = listener
        return self.change_subscription(topics)

    def subscribe_pattern(self, pattern: re.Pattern[str], listener: object | None) -> None:
        """Subscribe to the topics matching ``pattern``; the group mode gives the
        matching ones to ``change_subscription``."""
        self._set_type(SubscriptionType.AUTO_PATTERN)
        self.pattern = pattern
        self.listener = listener

    def change_subscription(self, topics: Iterable[str]) -> bool:
        """The topic list the group joins with; True if it changed."""
        wanted = tuple(sorted(set(topics)))
        if self._topics == wanted:
            return False
        self._topics = wanted
        return True

    def unsubscribe(self) -> None:
        """No subscription and no assignment any more."""
        self.type = SubscriptionType.NONE
        self.pattern = None
        self.listener = None
        self._topics = None
        self._replace_assignment({})

    # -------------------------------------------------------------- assignment

    def assign_from_user(self, partitions: Collection[TopicPartition]) -> None:
        """``assign()``: exactly these partitions. Kept partitions keep their state; new
        ones start without a position (``auto_offset_reset`` decides)."""
        self._set_type(SubscriptionType.USER_ASSIGNED if partitions
                       else SubscriptionType.NONE)
        self._replace_assignment({tp: self._assignment.get(tp) or PartitionState()
                                  for tp in partitions})

    def assign_from_subscribed(self, partitions: Collection[TopicPartition],
                               fresh: Collection[TopicPartition] = ()) -> None:
        """The group's assignment. ``fresh`` partitions (newly given to this member)
        start anew, at the committed offset once fetched (as Kafka's: also those an
        eager rebalance took away and gave back)."""
        self._replace_assignment({
            tp: PartitionState(awaiting_committed=True) if tp in fresh
            else self._assignment.get(tp) or PartitionState() for tp in partitions})

    def _replace_assignment(self, states: dict[TopicPartition, PartitionState]) -> None:
        self._assignment = states
        self._repositioned()

    def assigned_partitions(self) -> set[TopicPartition]:
        return set(self._assignment)

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self._assignment

    def get(self, tp: TopicPartition) -> PartitionState | None:
        """The partition's state, None if it is not assigned."""
        return self._assignment.get(tp)

    def state(self, tp: TopicPartition) -> PartitionState:
        """The partition's state; ValueError if it is not assigned."""
        state = self._assignment.get(tp)
        if state is None:
            raise ValueError(f"{tp} is not assigned to this consumer")
        return state

    def assigned_states(self) -> list[tuple[TopicPartition, PartitionState]]:
        """Every assigned partition with its state, in assignment order."""
        return list(self._assignment.items())

    # -------------------------------------------------------------- positions

    def awaiting_committed(self) -> list[TopicPartition]:
        """The partitions given by the group whose committed offsets are still to be
        fetched (they have no position meanwhile)."""
        return [tp for tp, s in self._assignment.items() if s.awaiting_committed]

    def apply_committed(self, committed: dict[TopicPartition, int | None]) -> None:
        """Start the partitions still awaiting their committed offsets there; those with
        nothing committed are left to ``auto_offset_reset``."""
        for tp, offset in committed.items():
            state = self._assignment.get(tp)
            if state is None or not state.awaiting_committed:
                continue  # sought, or taken away, meanwhile
            if offset is None:
                state.awaiting_committed = False
            else:
                state.seek(offset)
        self._repositioned()

    def positions(self, partitions: Collection[TopicPartition] | None = None
                  ) -> dict[TopicPartition, int]:
        """The known positions (of ``partitions`` only, if given): what a commit sends."""
        return {tp: s.position for tp, s in self._assignment.items()
                if s.position is not None and (partitions is None or tp in partitions)}

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.state(tp).seek(offset)
        self._repositioned()

    def request_reset(self, partitions: Iterable[TopicPartition] | None, strategy: str) -> None:
        """Reset ``partitions`` (None: every assigned one) by ``strategy`` ("earliest"
        or "latest"); all are checked to be assigned before any is reset."""
        targets = (list(self._assignment.values()) if partitions is None
                   else [self.state(tp) for tp in partitions])
        for state in targets:
            state.request_reset(strategy)
        self._repositioned()

    # ----------------------------------------------------------------- pausing

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.state(tp).paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.state(tp).paused = False
        self._repositioned()  # the resumed partitions join the next fetch now

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, state in self._assignment.items() if state.paused}

    # ------------------------------------------------------------------ errors

    def take_error(self) -> StrandError | None:
        """The error left on an unpaused partition (for ``poll()`` to raise), cleared."""
        for state in self._assignment.values():
            error = state.error
            if error is not None and not state.paused:
                state.error = None
                return error
        return None

    # --------------------------------------------------------------- listeners

    def add_reposition_listener(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` whenever positions move under the fetches in flight."""
        self._reposition_listeners.append(callback)

    def _repositioned(self) -> None:
        for callback in self._reposition_listeners:
            callback()
