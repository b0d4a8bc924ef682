"""What a chaos run observed: the history the checker judges.

Plain data only (no I/O), so that the checker's unit tests build histories by hand.
Times are ``time.monotonic()`` seconds of the harness process.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Outcomes of a send, as the producer's future reported them.
OK = "ok"  # acknowledged at an offset
FAILED = "failed"  # definitely not written (see workload.classify)
AMBIGUOUS = "ambiguous"  # may or may not have been written (timeouts, lost answers)
PENDING = "pending"  # never completed before the producer was closed: ambiguous too

FINAL_SESSION = "final"  # the read-back after every fault is healed


@dataclass(slots=True)
class Send:
    """One record handed to ``Producer.send``; its value is unique in the run."""

    value: str
    partition: int
    t_send: float
    outcome: str = PENDING
    offset: int = -1  # the acknowledged offset (OK only)
    t_done: float = -1.0
    error: str = ""


@dataclass(frozen=True, slots=True)
class Read:
    """One record a consumer returned. ``session`` names one Consumer instance: within
    a session offsets of a partition must strictly increase."""

    session: str
    partition: int
    offset: int
    value: str
    t: float


@dataclass(slots=True)
class FaultEvent:
    """One injection: when it began, when it was healed, when the cluster was seen
    healthy again. ``recovered`` is False when it was not within the recovery timeout
    or only because the harness restarted processes that had exited on their own
    (``crashed``: "name (exit code)")."""

    kind: str
    target: str
    t_inject: float
    t_healed: float = -1.0
    t_recovered: float = -1.0
    recovered: bool = True
    crashed: list[str] = field(default_factory=list)
    note: str = ""


@dataclass(frozen=True, slots=True)
class ReplicaResult:
    """One partition compared across its replicas up to the leader's high watermark."""

    partition: int
    hw: int
    leader: int
    identical: bool
    detail: str  # per replica: identical / differs at offset N / short / missing
    t: float
    final: bool = False  # the check after the run, not one after a heal


@dataclass
class History:
    topic: str
    partitions: int
    t_start: float
    t_end: float = 0.0
    sends: list[Send] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)  # every reader, the final one too
    faults: list[FaultEvent] = field(default_factory=list)
    replicas: list[ReplicaResult] = field(default_factory=list)
    # Partitions the final read got through to their high watermark; the others
    # could not be read back (their acknowledged records count as lost).
    final_complete: set[int] = field(default_factory=set)
    final_hw: dict[int, int] = field(default_factory=dict)
    reader_errors: list[str] = field(default_factory=list)
    # Whether the cluster was healthy after the last heal and the writers' stop,
    # without restarting a process that had exited on its own (listed).
    final_recovered: bool = True
    final_crashed: list[str] = field(default_factory=list)
