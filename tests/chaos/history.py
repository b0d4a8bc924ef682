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
KAFKA_FINAL_SESSION = "kafka-final"  # the second read-back, through confluent-kafka
KAFKA_TAIL = "ktail"  # the confluent-kafka tail readers' names start so
KAFKA_TXN_PREFIX = "chaos-ktx-"  # the confluent-kafka transactional ids
KAFKA_TXN_READER = "ktxn"  # the confluent-kafka read_committed reader's sessions

# How a transaction of the transactional workloads ended.
COMMITTED = "committed"  # commit_transaction() returned: all of it must be visible
ABORTED = "aborted"  # abort_transaction() returned: none of it may be visible
FENCED = "fenced"  # its producer was replaced mid-transaction: none of it may be visible
# AMBIGUOUS (above): commit/abort timed out or failed: all of it or none may be visible

# How a group member's ownership of a partition ended.
REVOKED = "revoked"  # on_partitions_revoked (a rebalance took it back)
LOST = "lost"  # on_partitions_lost (the member had been expelled from the group)
CLOSED = "closed"  # the member closed (it left the group)
CRASHED = "crashed"  # SIGKILLed by the harness: no commit, no LeaveGroup
EXITED = "exited"  # the member process ended on its own (a workload error)


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
class TxnRecord:
    """One record a transaction meant to write (``offset`` once acknowledged)."""

    topic: str
    partition: int
    value: str  # unique in the run
    offset: int = -1


@dataclass(slots=True)
class Txn:
    """One transaction of a transactional producer: its intended content and how it
    ended. A read_committed reader must see all of its records or none."""

    txn_id: str  # the transactional id
    instance: int  # which Producer instance of that id (a fenced one is replaced)
    number: int
    intent: str  # "commit", "abort", or "fence" (replaced mid-transaction)
    records: list[TxnRecord]
    t_begin: float
    outcome: str = PENDING  # COMMITTED / ABORTED / FENCED / AMBIGUOUS
    t_end: float = -1.0
    error: str = ""


@dataclass(frozen=True, slots=True)
class TxnRead:
    """One record a read_committed reader returned from a topic of the transactional
    workloads, with the last stable offset of the fetch answer that carried it
    (-1: not known)."""

    session: str
    topic: str
    partition: int
    offset: int
    value: str
    t: float
    lso: int = -1


@dataclass(slots=True)
class Ownership:
    """One group member's ownership of one partition, from the rebalance listener's
    ``on_partitions_assigned`` to its revocation, its loss, or the member's end.

    The group's committed offset was fetched by the SDK between ``t_poll`` (the start
    of the ``poll()`` that ran the rebalance) and ``t_assigned`` (the listener's call).
    The member's reads of the partition meanwhile are the history's reads whose
    ``session`` is ``session`` (one session per assignment of a member)."""

    member: str  # one member process (an incarnation: replaced members get new names)
    session: str
    partition: int
    generation: int
    t_poll: float
    t_assigned: float
    seen_committed: int | None = None  # what committed() said in the listener (-1: failed)
    announced: bool = True  # False: records came without on_partitions_assigned
    t_end: float = -1.0
    end: str = ""  # REVOKED / LOST / CLOSED / CRASHED / EXITED ("" while it lasts)


@dataclass(slots=True)
class Commit:
    """One partition's offset in a synchronous ``Consumer.commit()`` after processing.

    ``ok``: acknowledged (it took effect between ``t_start`` and ``t_end``). Anything
    else is ambiguous: an error answer may follow an attempt that was written (the
    gateway retries), a timeout or a crash says nothing; ``t_end`` is when the member
    stopped waiting (-1: still pending when the run ended)."""

    member: str
    partition: int
    offset: int
    generation: int
    t_start: float
    t_end: float = -1.0
    outcome: str = PENDING  # OK or AMBIGUOUS once done
    error: str = ""


@dataclass(frozen=True, slots=True)
class Anomaly:
    """A violation the checker found (checker.py, group_checker.py)."""

    check: str  # lost, divergence, order, phantom, reread, skipped
    t: float  # when it happened (charged to the fault in progress then)
    partition: int
    offset: int
    detail: str


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
    # The consumer-group workload (group_workload.py); its reads are in ``reads``.
    ownerships: list[Ownership] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    members: dict[str, str] = field(default_factory=dict)  # member -> how it ended
    group_errors: list[str] = field(default_factory=list)
    # The writers ran with enable_idempotence: a value written twice is an error.
    idempotent: bool = False
    # The transactional workload (txn_workload.py) and the read_committed reads of
    # its topics and of the pipeline's output (txn_reader.py; FINAL_SESSION: the
    # read-back, complete for the (topic, partition)s in ``txn_final_complete``).
    txns: list[Txn] = field(default_factory=list)
    txn_reads: list[TxnRead] = field(default_factory=list)
    txn_final_complete: set[tuple[str, int]] = field(default_factory=set)
    # The consume-transform-produce pipeline (pipeline_workload.py): what was sent
    # to its input topic; its outputs are txn_reads of ``pipeline_output``.
    pipeline_inputs: list[Send] = field(default_factory=list)
    pipeline_output: str = ""
    # Errors the transactional producers, readers and pipeline workers got over
    # (retried or replaced: not failures by themselves).
    txn_errors: list[str] = field(default_factory=list)
    # The confluent-kafka workloads (kafka_workload.py): their sends are in ``sends``
    # (writers named here), their reads in ``reads``; the second read-back (session
    # KAFKA_FINAL_SESSION) got through to the high watermarks of
    # ``kafka_final_complete``. Fatal errors each replaced a Producer.
    kafka_writers: list[str] = field(default_factory=list)
    kafka_read_back: bool = False  # the confluent-kafka read-back ran (then it is checked)
    kafka_final_complete: set[int] = field(default_factory=set)
    kafka_final_hw: dict[int, int] = field(default_factory=dict)
    kafka_errors: list[str] = field(default_factory=list)
    kafka_fatal: list[str] = field(default_factory=list)
