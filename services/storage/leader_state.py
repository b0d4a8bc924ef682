"""What a partition leader knows of its followers: their log end offsets, when each
was last caught up, the ISR, and from those the high watermark and the ISR changes
to propose (Kafka's ``Partition`` / ``Replica`` fetch state, docs/architecture.md §3).

Pure and synchronous: the caller passes the leader's log end offset and the time.

* A follower's fetch at ``fetch_offset`` tells its log end offset. It counts as
  caught up at the time of that fetch if it asked for everything the leader had,
  or at the time of its previous fetch if it now asks for at least what the leader
  had then (Kafka's ``lastCaughtUpTimeMs`` rule).
* HW = the minimum log end offset over the leader, the ISR (plus replicas a pending
  expansion adds) and any other follower caught up within ``lag_max_ms``; it never
  moves back, and it waits while an ISR member's offset is still unknown (a new
  leader has not heard from it yet). A follower taken out of the ISR stops counting
  until it catches up again (Kafka's "ISR-eligible" rule): a broker the controller
  removed because it died or is shutting down must not hold the HW back.
* Shrink: ISR followers not caught up within ``lag_max_ms``. Expand: followers
  outside the ISR whose log end offset reached the HW and the start of the
  leader's epoch. One change is in flight at a time; until it is committed the
  ISR used for the HW is the larger of the two ("maximal ISR").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

UNKNOWN_OFFSET = -1
NEVER = -math.inf  # a follower that has not been caught up (since it last left the ISR)


def _always(_: int) -> bool:
    return True


@dataclass(slots=True)
class FollowerState:
    broker: int
    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: float = NEVER
    last_fetch_leader_end_offset: int = UNKNOWN_OFFSET
    last_fetch_ms: float = 0.0


@dataclass(slots=True)
class LeaderState:
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    epoch_start_offset: int  # the leader's log end offset when this epoch began
    followers: dict[int, FollowerState] = field(default_factory=dict)
    pending_isr: tuple[int, ...] | None = None  # proposed, not yet committed
    next_proposal_ms: float = 0.0  # a refused proposal is not repeated before this

    @classmethod
    def begin(cls, leader: int, replicas: tuple[int, ...], isr: tuple[int, ...],
              leader_epoch: int, partition_epoch: int, epoch_start_offset: int,
              now_ms: float) -> LeaderState:
        """A fresh leadership: ISR followers get a full lag period before they can be
        shrunk (they have not had a chance to fetch yet)."""
        followers = {
            r: FollowerState(r, last_caught_up_ms=now_ms if r in isr else NEVER)
            for r in replicas if r != leader
        }
        return cls(leader, leader_epoch, partition_epoch, tuple(isr), epoch_start_offset,
                   followers)

    # -- metadata -----------------------------------------------------------------------------

    def apply_record(self, replicas: tuple[int, ...], isr: tuple[int, ...],
                     partition_epoch: int, now_ms: float) -> bool:
        """Adopt a committed record of the same leadership; returns whether the ISR changed.
        Older records (a slow watch behind our own AlterPartition answer) are ignored."""
        if partition_epoch < self.partition_epoch:
            return False
        for r in replicas:
            if r != self.leader and r not in self.followers:
                self.followers[r] = FollowerState(r)
        for r in list(self.followers):
            if r not in replicas:
                del self.followers[r]
        changed = tuple(isr) != self.isr
        for removed in set(self.isr) - set(isr):
            state = self.followers.get(removed)
            if state is not None:
                # Taken out (by the controller: dead or shutting down, or by our own
                # shrink): it must catch up again before it holds the HW back.
                state.last_caught_up_ms = NEVER
        self.isr = tuple(isr)
        if partition_epoch > self.partition_epoch:
            self.pending_isr = None
        self.partition_epoch = partition_epoch
        return changed

    def propose(self, new_isr: tuple[int, ...]) -> None:
        self.pending_isr = tuple(new_isr)

    def proposal_failed(self, now_ms: float = 0.0, backoff_ms: float = 0.0) -> None:
        """The proposal was refused or lost: no new one before ``backoff_ms`` from now."""
        self.pending_isr = None
        self.next_proposal_ms = now_ms + backoff_ms

    @property
    def maximal_isr(self) -> set[int]:
        members = set(self.isr)
        if self.pending_isr is not None:
            members |= set(self.pending_isr)
        return members

    # -- follower fetches ---------------------------------------------------------------------

    def update_follower(self, broker: int, fetch_offset: int, leader_end_offset: int,
                        now_ms: float) -> FollowerState | None:
        state = self.followers.get(broker)
        if state is None:
            return None  # not a replica of this partition (any more)
        if fetch_offset >= leader_end_offset:
            state.last_caught_up_ms = max(state.last_caught_up_ms, now_ms)
        elif fetch_offset >= state.last_fetch_leader_end_offset >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        state.last_fetch_leader_end_offset = leader_end_offset
        state.last_fetch_ms = now_ms
        return state

    # -- high watermark -----------------------------------------------------------------------

    def high_watermark(self, current: int, leader_end_offset: int, now_ms: float,
                       lag_max_ms: float, eligible: Callable[[int], bool] = _always) -> int:
        """The new high watermark (never below ``current``). ``eligible(broker)``: the
        broker is alive and not shutting down, so an out-of-ISR follower of it that is
        caught up may join the ISR soon and holds the HW back meanwhile."""
        candidate = leader_end_offset
        members = self.maximal_isr
        for state in self.followers.values():
            in_isr = state.broker in members
            recently_caught_up = (now_ms - state.last_caught_up_ms <= lag_max_ms
                                  and eligible(state.broker))
            if not (in_isr or recently_caught_up):
                continue
            if state.log_end_offset == UNKNOWN_OFFSET:
                if in_isr:
                    return current  # wait until every in-sync follower has been heard
                continue
            candidate = min(candidate, state.log_end_offset)
        return max(current, candidate)

    # -- ISR changes --------------------------------------------------------------------------

    def lagging(self, now_ms: float, lag_max_ms: float) -> list[int]:
        """ISR followers that have not been caught up within ``lag_max_ms``."""
        return [r for r in self.isr if r != self.leader
                and (state := self.followers.get(r)) is not None
                and now_ms - state.last_caught_up_ms > lag_max_ms]

    def shrink_proposal(self, now_ms: float, lag_max_ms: float) -> tuple[int, ...] | None:
        if self.pending_isr is not None or now_ms < self.next_proposal_ms:
            return None
        lagging = self.lagging(now_ms, lag_max_ms)
        if not lagging:
            return None
        return tuple(r for r in self.isr if r not in lagging)

    def expand_proposal(self, broker: int, high_watermark: int, now_ms: float = 0.0,
                        eligible: Callable[[int], bool] = _always) -> tuple[int, ...] | None:
        """The ISR with ``broker`` added, if it has caught up and is eligible (alive, not
        shutting down), and no change is pending."""
        if (self.pending_isr is not None or broker in self.isr
                or now_ms < self.next_proposal_ms or not eligible(broker)):
            return None
        state = self.followers.get(broker)
        if state is None or state.log_end_offset == UNKNOWN_OFFSET:
            return None
        if state.log_end_offset < high_watermark or state.log_end_offset < self.epoch_start_offset:
            return None
        return (*self.isr, broker)
