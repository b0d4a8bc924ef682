"""The audit's results as plain values: what the comparison found, bucket by bucket.

Nothing here touches Spark, so the report renderers and the exit-code decision are
usable (and tested) without a JVM.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import UTC, datetime


class FindingKind(enum.StrEnum):
    """What went wrong with some records of one topic, partition and bucket."""

    MISSING = "missing"          # a source record inside the mirror's range has no copy
    DUPLICATE = "duplicate"      # a source offset was copied more than once
    ALTERED = "altered"          # a copy's key or value differs from the source record
    UNMATCHED = "unmatched"      # a copy of a source offset the source does not hold
    OVERDUE = "overdue"          # not copied yet, and older than the grace period
    LATE = "late"                # copied, but later than the late threshold

    @property
    def is_failure(self) -> bool:
        """Loss or duplication: the audit exits 1 when any such finding exists. An
        altered copy is a loss of the original content."""
        return self in (FindingKind.MISSING, FindingKind.DUPLICATE, FindingKind.ALTERED)


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Consecutive source offsets ``first``..``last`` (both included)."""

    first: int
    last: int

    def __str__(self) -> str:
        return str(self.first) if self.first == self.last else f"{self.first}-{self.last}"


@dataclass(frozen=True, slots=True)
class Finding:
    """``records`` records of one kind in one source topic, partition and bucket.

    ``offsets`` lists source offsets (ranges) where they were cheap to find: the
    drill-down into buckets whose counts or checksums differ; ``offsets_truncated``
    says that more ranges exist than are listed. For duplicates, ``records`` counts
    the surplus copies."""

    kind: FindingKind
    topic: str
    partition: int
    bucket_start_ms: int
    records: int
    offsets: tuple[OffsetRange, ...] = ()
    offsets_truncated: bool = False

    @property
    def bucket_start(self) -> datetime:
        return utc(self.bucket_start_ms)


@dataclass(frozen=True, slots=True)
class BucketComparison:
    """Source and mirror summaries of one source topic, partition and event-time bucket.

    The counts and checksums cover the records compared (see
    :mod:`strand_spark.audit`); ``pending``, ``overdue`` and ``before_mirror`` count
    source records left out of the comparison (``excluded`` those the mirror must not
    copy), ``outside_source`` the copies left out, ``late`` the copies written late.
    A checksum is the sum, modulo 2**64, of the records' 64-bit key/value hashes."""

    topic: str
    partition: int
    bucket_start_ms: int
    source_records: int
    mirror_records: int
    source_checksum: int
    mirror_checksum: int
    source_min_offset: int | None
    source_max_offset: int | None
    mirror_min_offset: int | None
    mirror_max_offset: int | None
    pending: int
    overdue: int
    before_mirror: int
    excluded: int
    outside_source: int
    late: int

    @property
    def matches(self) -> bool:
        return (self.source_records == self.mirror_records
                and self.source_checksum == self.mirror_checksum)

    @property
    def bucket_start(self) -> datetime:
        return utc(self.bucket_start_ms)


@dataclass(frozen=True, slots=True)
class TopicLatency:
    """Mirror latency of one source topic: the copy's ``strand.mirror.time`` minus the
    record's timestamp, in milliseconds (p50 and p99 approximate)."""

    topic: str
    copies: int
    p50_ms: int
    p99_ms: int
    max_ms: int


@dataclass(frozen=True, slots=True)
class AuditTotals:
    """Record counts of the whole audit (every topic, partition and bucket)."""

    source_records: int        # read from the source, all statuses
    compared: int              # source records inside the mirror's range
    copies: int                # mirror records that are copies from the source cluster
    pending: int
    overdue: int
    before_mirror: int
    excluded: int              # source records the mirror must not copy (loop)
    outside_source: int
    not_copies: int            # target records that are not copies from the source


@dataclass(frozen=True, slots=True)
class AuditReport:
    """One audit run: the bucket comparisons, the findings, the latency."""

    source_cluster: str
    target_cluster: str
    bucket_ms: int
    grace_ms: int
    late_after_ms: int
    as_of_ms: int              # the clock the grace period is measured against
    started_ms: int
    finished_ms: int
    totals: AuditTotals
    buckets: tuple[BucketComparison, ...]
    findings: tuple[Finding, ...]
    latency: tuple[TopicLatency, ...]
    topics: tuple[str, ...] = field(default=())

    def records_of(self, kind: FindingKind) -> int:
        return sum(f.records for f in self.findings if f.kind is kind)

    @property
    def failures(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.kind.is_failure)

    @property
    def clean(self) -> bool:
        """No loss and no duplication (warnings such as late copies may remain)."""
        return not self.failures

    @property
    def exit_code(self) -> int:
        return 0 if self.clean else 1


def utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)
