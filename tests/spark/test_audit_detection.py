"""The audit's core on synthetic DataFrames with the ``strand`` read schema: injected
gaps, duplicates and altered copies are found and named (partition, bucket, offsets);
a clean mirror reports zero; records the mirror has not reached are not loss."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from pyspark.sql import DataFrame, SparkSession

from strand_spark.audit.analysis import AuditOptions, audit_frames
from strand_spark.audit.model import AuditReport, Finding, FindingKind, OffsetRange
from strand_spark.audit.records import READ_SCHEMA_DDL
from strand_spark.provenance import SourcePosition, mirrored_headers

# Each audit runs a few dozen small Spark jobs: seconds each, more on a busy machine.
pytestmark = pytest.mark.slow

BUCKET_MS = 600_000
MINUTE_MS = 60_000
# A bucket boundary, so that record o of a partition is in bucket o // 10.
T0 = 1_764_000_000_000 - 1_764_000_000_000 % BUCKET_MS

Row = tuple[bytes | None, bytes | None, str, int, int, datetime, int,
            list[tuple[str, bytes | None]]]


def at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def bucket(index: int) -> int:
    return T0 + index * BUCKET_MS


@dataclass
class Topic:
    """Source records of one topic (a record a minute, 10 per bucket) and the mirror's
    copies, with faults injected by (partition, offset)."""

    name: str
    partitions: int
    records: int
    start_ms: int = T0
    own_headers: dict[tuple[int, int], list[tuple[str, bytes | None]]] = field(
        default_factory=dict)
    # Removed from the source after the mirror copied them (compaction, say).
    compacted: set[tuple[int, int]] = field(default_factory=set)

    def timestamp(self, offset: int) -> int:
        return self.start_ms + offset * MINUTE_MS

    def written(self) -> list[Row]:
        return [(f"k{o % 7}".encode(), f"{self.name}-{p}-{o}".encode(), self.name, p, o,
                 at(self.timestamp(o)), 0, self.own_headers.get((p, o), []))
                for p in range(self.partitions) for o in range(self.records)]

    def source(self) -> list[Row]:
        return [r for r in self.written() if (r[3], r[4]) not in self.compacted]

    def mirror(self, target_topic: str, *, skip: Iterable[tuple[int, int]] = (),
               twice: Iterable[tuple[int, int]] = (),
               altered: Iterable[tuple[int, int]] = (),
               latency_ms: dict[tuple[int, int], int] | None = None,
               upto: dict[int, int] | None = None, source_cluster: str = "A",
               ) -> list[Row]:
        skipped, doubled, changed = set(skip), set(twice), set(altered)
        rows: list[Row] = []
        next_offset = dict.fromkeys(range(self.partitions), 0)
        for key, value, topic, p, o, ts, _, headers in self.written():
            if (p, o) in skipped or o > (upto or {}).get(p, self.records):
                continue
            if any(k == "strand.mirror.path" and v and b"B" in v for k, v in headers):
                continue  # the loop guard: this record came from the target
            latency = (latency_ms or {}).get((p, o), 1500)
            copied = b"tampered" if (p, o) in changed else value
            for copy in range(2 if (p, o) in doubled else 1):
                written = self.timestamp(o) + latency + copy * 1000
                rows.append((key, copied, target_topic, p, next_offset[p], ts, 0,
                             mirrored_headers(headers, source_cluster,
                                              SourcePosition(topic, p, o), written)))
                next_offset[p] += 1
        return rows


def frame(spark: SparkSession, rows: list[Row]) -> DataFrame:
    return spark.createDataFrame(rows, READ_SCHEMA_DDL)


def options(now_ms: int = T0 + 30 * BUCKET_MS) -> AuditOptions:
    return AuditOptions(source_cluster="A", target_cluster="B", bucket_ms=BUCKET_MS,
                        now_ms=now_ms)


def only(report: AuditReport, kind: FindingKind) -> list[Finding]:
    return [f for f in report.findings if f.kind is kind]


@pytest.fixture(scope="module")
def faulty(spark: SparkSession) -> AuditReport:
    """Four partitions, 30 records each (3 buckets): p0 lost offsets 12 and 15-17, p1
    holds offset 25 twice, p2 has offset 4 altered, p3 lost nothing but its offset 21
    was copied 20 minutes late and its offset 5 was compacted away on the source after
    the mirror had copied it."""
    orders = Topic("orders", partitions=4, records=30, compacted={(3, 5)})
    mirror = orders.mirror("A.orders", skip=[(0, 12), (0, 15), (0, 16), (0, 17)],
                           twice=[(1, 25)], altered=[(2, 4)],
                           latency_ms={(3, 21): 20 * MINUTE_MS})
    return audit_frames(frame(spark, orders.source()), frame(spark, mirror), options(),
                        topics=["orders"])


def test_an_injected_gap_is_missing_with_its_partition_bucket_and_offsets(
        faulty: AuditReport) -> None:
    assert only(faulty, FindingKind.MISSING) == [Finding(
        FindingKind.MISSING, "orders", 0, bucket(1), records=4,
        offsets=(OffsetRange(12, 12), OffsetRange(15, 17)))]


def test_an_injected_duplicate_is_named_with_its_partition_bucket_and_offset(
        faulty: AuditReport) -> None:
    assert only(faulty, FindingKind.DUPLICATE) == [Finding(
        FindingKind.DUPLICATE, "orders", 1, bucket(2), records=1,
        offsets=(OffsetRange(25, 25),))]


def test_an_altered_copy_differs_in_checksum_though_counts_match(
        faulty: AuditReport) -> None:
    assert only(faulty, FindingKind.ALTERED) == [Finding(
        FindingKind.ALTERED, "orders", 2, bucket(0), records=1,
        offsets=(OffsetRange(4, 4),))]
    p2 = next(b for b in faulty.buckets if b.partition == 2 and b.bucket_start_ms == T0)
    assert p2.source_records == p2.mirror_records == 10
    assert p2.source_checksum != p2.mirror_checksum


def test_a_copy_of_a_record_the_source_no_longer_holds_is_unmatched(
        faulty: AuditReport) -> None:
    assert only(faulty, FindingKind.UNMATCHED) == [Finding(
        FindingKind.UNMATCHED, "orders", 3, bucket(0), records=1,
        offsets=(OffsetRange(5, 5),))]
    assert not FindingKind.UNMATCHED.is_failure


def test_late_copies_and_latency_are_reported_but_not_loss(faulty: AuditReport) -> None:
    assert only(faulty, FindingKind.LATE) == [
        Finding(FindingKind.LATE, "orders", 3, bucket(2), records=1)]
    [latency] = faulty.latency
    assert (latency.topic, latency.p50_ms, latency.max_ms) == ("orders", 1500, 20 * MINUTE_MS)
    assert latency.copies == 120 - 4 + 1


def test_only_the_faulty_buckets_differ_and_the_run_fails(faulty: AuditReport) -> None:
    differing = {(b.partition, b.bucket_start_ms) for b in faulty.buckets if not b.matches}
    assert differing == {(0, bucket(1)), (1, bucket(2)), (2, bucket(0)), (3, bucket(0))}
    assert len(faulty.buckets) == 12
    assert faulty.exit_code == 1 and not faulty.clean
    assert faulty.totals.compared == 119 and faulty.totals.copies == 117
    assert faulty.topics == ("orders",)


def test_a_clean_active_active_mirror_reports_zero(spark: SparkSession) -> None:
    """Identity naming, both directions: the source holds copies that came from B (the
    mirror must not copy them back), the target holds its own records (not copies).
    Nothing is missing, duplicated or late."""
    from_b: list[tuple[str, bytes | None]] = [
        ("strand.mirror.path", b"B"), ("strand.mirror.source", b"orders/0/9"),
        ("strand.mirror.time", b"1")]
    orders = Topic("orders", partitions=2, records=25,
                   own_headers={(0, 3): from_b, (1, 20): from_b})
    local: list[Row] = [(b"own", b"written on B", "orders", 0, 1000 + i, at(T0), 0, [])
                        for i in range(3)]
    report = audit_frames(frame(spark, orders.source()),
                          frame(spark, orders.mirror("orders") + local), options())
    assert report.findings == ()
    assert report.clean and report.exit_code == 0
    assert all(b.matches for b in report.buckets)
    totals = report.totals
    assert (totals.excluded, totals.not_copies, totals.compared, totals.copies) == (
        2, 3, 48, 48)
    assert report.records_of(FindingKind.MISSING) == 0


def test_records_the_mirror_has_not_reached_are_pending_or_overdue_not_missing(
        spark: SparkSession) -> None:
    """p0 was copied up to offset 19 of 29, p1 up to 9: the rest is beyond the mirror's
    highest copied offset. ``now`` is 5 minutes after p1's last record: p1's last 5
    minutes are pending, its older uncopied records overdue; p0's record 12, a hole
    below its highest copied offset, is missing."""
    orders = Topic("orders", partitions=2, records=30)
    mirror = orders.mirror("A.orders", skip=[(0, 12)], upto={0: 19, 1: 9})
    now = orders.timestamp(29) + 5 * MINUTE_MS
    report = audit_frames(frame(spark, orders.source()), frame(spark, mirror),
                          options(now_ms=now))
    assert [(f.partition, f.records) for f in only(report, FindingKind.MISSING)] == [(0, 1)]
    # grace = one bucket (10 min): records at or after now - 10 min are pending.
    recent = [o for o in range(30) if orders.timestamp(o) >= now - BUCKET_MS]
    beyond = {0: range(20, 30), 1: range(10, 30)}
    pending = sum(1 for p, rs in beyond.items() for o in rs if o in recent)
    assert report.totals.pending == pending
    assert report.totals.overdue == 30 - pending
    overdue = only(report, FindingKind.OVERDUE)
    assert {(f.partition, f.bucket_start_ms) for f in overdue} == {
        (0, bucket(2)), (1, bucket(1)), (1, bucket(2))}
    assert report.totals.compared == 20 + 10


def test_a_partition_without_any_copy_is_pending_then_overdue(spark: SparkSession) -> None:
    orders = Topic("orders", partitions=1, records=5, start_ms=T0)
    source = frame(spark, orders.source())
    nothing = frame(spark, [])
    fresh = audit_frames(source, nothing, options(now_ms=orders.timestamp(4)))
    assert fresh.totals.pending == 5 and fresh.clean and fresh.findings == ()
    stale = audit_frames(source, nothing, options(now_ms=orders.timestamp(4) + BUCKET_MS * 3))
    assert stale.totals.overdue == 5 and stale.clean
    assert [f.kind for f in stale.findings] == [FindingKind.OVERDUE]


def test_frames_without_the_read_schema_are_refused(spark: SparkSession) -> None:
    wrong = spark.createDataFrame([(1, "x")], "offset int, value string")
    with pytest.raises(ValueError, match="lack the strand read schema"):
        audit_frames(wrong, frame(spark, []), options())
