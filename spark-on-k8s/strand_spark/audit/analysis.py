"""The audit's core: two DataFrames in, an :class:`~strand_spark.audit.model.AuditReport`
out. Where the DataFrames come from (the ``strand`` data source, or a test's rows) is
the runner's business, so both paths share all of this."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from strand_spark.audit import comparison
from strand_spark.audit.latency import topic_latency
from strand_spark.audit.model import (
    AuditReport,
    AuditTotals,
    BucketComparison,
    Finding,
    FindingKind,
    OffsetRange,
)
from strand_spark.audit.records import (
    BUCKET,
    BUCKET_KEY,
    PARTITION,
    TOPIC,
    mirror_records,
    source_records,
)
from strand_spark.audit.summaries import (
    bucket_summaries,
    classify_copies,
    classify_source,
)
from strand_spark.provenance import validate_cluster_name

MINUTE_MS = 60_000


@dataclass(frozen=True, slots=True)
class AuditOptions:
    """How to compare. ``grace_ms`` and ``late_after_ms`` default to one bucket: a
    record not copied within a bucket's width of its timestamp is overdue, a copy
    written later than that is late. ``now_ms`` (default: when the audit starts) is
    the clock the grace period is measured against."""

    source_cluster: str
    target_cluster: str
    bucket_ms: int = 10 * MINUTE_MS
    grace_ms: int | None = None
    late_after_ms: int | None = None
    now_ms: int | None = None
    offset_ranges_per_finding: int = 20

    def __post_init__(self) -> None:
        validate_cluster_name(self.source_cluster)
        validate_cluster_name(self.target_cluster)
        if self.source_cluster == self.target_cluster:
            raise ValueError(f"the source and target clusters must differ, both are "
                             f"{self.source_cluster!r}")
        if self.bucket_ms <= 0:
            raise ValueError(f"the bucket width must be positive, not {self.bucket_ms} ms")
        for name in ("grace_ms", "late_after_ms"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must not be negative, not {value}")
        if self.offset_ranges_per_finding < 1:
            raise ValueError("offset_ranges_per_finding must be at least 1")

    @property
    def grace(self) -> int:
        return self.bucket_ms if self.grace_ms is None else self.grace_ms

    @property
    def late_after(self) -> int:
        return self.bucket_ms if self.late_after_ms is None else self.late_after_ms


def audit_frames(source: DataFrame, mirror: DataFrame, options: AuditOptions,
                 topics: Sequence[str] = ()) -> AuditReport:
    """Compare ``source`` (records of the source topics) with ``mirror`` (records of
    their copies on the target), both with the ``strand`` read schema and headers.
    ``topics`` names the source topics audited (the report lists them even when they
    hold no record).

    Each side is read once and kept (``localCheckpoint``): every later step sees the
    same snapshot, however often it looks, and the clusters are not read twice."""
    started_ms = int(time.time() * 1000)
    now_ms = started_ms if options.now_ms is None else options.now_ms
    src = source_records(source, options.target_cluster, options.bucket_ms).localCheckpoint()
    mir = mirror_records(mirror, options.source_cluster, options.bucket_ms).localCheckpoint()
    copies = mir.where(F.col("is_copy"))
    src_classified = classify_source(src, copies, now_ms, options.grace).cache()
    copies_classified = classify_copies(copies, src, options.late_after).cache()
    try:
        buckets = _buckets(bucket_summaries(src_classified, copies_classified))
        findings = _summary_findings(buckets)
        mismatched = [(b.topic, b.partition, b.bucket_start_ms) for b in buckets
                      if not b.matches]
        if mismatched:  # a clean mirror costs no drill-down
            keys = source.sparkSession.createDataFrame(
                mismatched, f"{TOPIC} string, {PARTITION} int, {BUCKET} long")
            found = comparison.anomalies(src_classified, copies_classified, keys)
            findings += _drilled_findings(found, options.offset_ranges_per_finding)
        totals = _totals(buckets, not_copies=mir.where(~F.col("is_copy")).count())
        latency = topic_latency(copies_classified)
    finally:
        src_classified.unpersist()
        copies_classified.unpersist()
    order = list(FindingKind)
    findings.sort(key=lambda f: (order.index(f.kind), f.topic, f.partition,
                                 f.bucket_start_ms))
    topics = sorted({b.topic for b in buckets} | set(topics))
    return AuditReport(
        source_cluster=options.source_cluster, target_cluster=options.target_cluster,
        bucket_ms=options.bucket_ms, grace_ms=options.grace,
        late_after_ms=options.late_after, as_of_ms=now_ms, started_ms=started_ms,
        finished_ms=int(time.time() * 1000), totals=totals, buckets=tuple(buckets),
        findings=tuple(findings), latency=tuple(latency), topics=tuple(topics))


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _buckets(summaries: DataFrame) -> list[BucketComparison]:
    rows = summaries.orderBy(*BUCKET_KEY).collect()
    return [BucketComparison(
        topic=r[TOPIC], partition=int(r[PARTITION]), bucket_start_ms=int(r[BUCKET]),
        source_records=int(r["source_records"]), mirror_records=int(r["mirror_records"]),
        source_checksum=int(r["source_checksum"]), mirror_checksum=int(r["mirror_checksum"]),
        source_min_offset=_optional_int(r["source_min_offset"]),
        source_max_offset=_optional_int(r["source_max_offset"]),
        mirror_min_offset=_optional_int(r["mirror_min_offset"]),
        mirror_max_offset=_optional_int(r["mirror_max_offset"]),
        pending=int(r["pending"]), overdue=int(r["overdue"]),
        before_mirror=int(r["before_mirror"]), excluded=int(r["excluded"]),
        outside_source=int(r["outside_source"]),
        late=int(r["late"])) for r in rows]


def _drilled_findings(found: DataFrame, per_finding: int) -> list[Finding]:
    """Findings of the drill-down, with their offset ranges (one Spark job)."""
    records: dict[tuple[str, str, int, int], int] = {}
    ranges: dict[tuple[str, str, int, int], list[OffsetRange]] = defaultdict(list)
    runs: dict[tuple[str, str, int, int], int] = {}
    for r in comparison.offset_ranges(found, per_finding).orderBy("first").collect():
        key = (r[comparison.KIND], r[TOPIC], int(r[PARTITION]), int(r[BUCKET]))
        ranges[key].append(OffsetRange(int(r["first"]), int(r["last"])))
        records[key], runs[key] = int(r["records"]), int(r["runs"])
    return [Finding(kind=FindingKind(key[0]), topic=key[1], partition=key[2],
                    bucket_start_ms=key[3], records=records[key],
                    offsets=tuple(ranges[key]), offsets_truncated=runs[key] > len(ranges[key]))
            for key in records]


def _summary_findings(buckets: list[BucketComparison]) -> list[Finding]:
    """Overdue and late records: counted per bucket by the summaries, no offsets."""
    findings = []
    for b in buckets:
        for kind, records in ((FindingKind.OVERDUE, b.overdue), (FindingKind.LATE, b.late)):
            if records:
                findings.append(Finding(kind=kind, topic=b.topic, partition=b.partition,
                                        bucket_start_ms=b.bucket_start_ms, records=records))
    return findings


def _totals(buckets: list[BucketComparison], not_copies: int) -> AuditTotals:
    def total(name: str) -> int:
        return sum(getattr(b, name) for b in buckets)

    compared, before, excluded = (total("source_records"), total("before_mirror"),
                                  total("excluded"))
    pending, overdue, outside = total("pending"), total("overdue"), total("outside_source")
    return AuditTotals(
        source_records=compared + before + excluded + pending + overdue, compared=compared,
        copies=total("mirror_records") + outside, pending=pending, overdue=overdue,
        before_mirror=before, excluded=excluded, outside_source=outside,
        not_copies=not_copies)
