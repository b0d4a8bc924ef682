"""An audit report as Markdown (for a person) and as JSON (for a program)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from strand_spark.audit.model import (
    AuditReport,
    BucketComparison,
    Finding,
    FindingKind,
    utc,
)

# Beyond this many buckets the Markdown lists only those with something to say (the
# JSON summary always has them all).
MARKDOWN_BUCKETS = 200

_MEANING = {
    FindingKind.MISSING: "source records inside the mirror's range without a copy",
    FindingKind.DUPLICATE: "surplus copies of source offsets copied more than once",
    FindingKind.ALTERED: "copies whose key or value differs from the source record",
    FindingKind.UNMATCHED: "copies of source offsets the source does not hold",
    FindingKind.OVERDUE: "records not copied yet and older than the grace period",
    FindingKind.LATE: "copies written later than the late threshold",
}


def _when(ms: int) -> str:
    return utc(ms).strftime("%Y-%m-%d %H:%M:%S UTC")


def _bucket(ms: int) -> str:
    return utc(ms).strftime("%Y-%m-%d %H:%M")


def _duration(ms: int) -> str:
    if ms < 1000:
        return f"{ms} ms"
    if ms < 120_000:
        return f"{ms / 1000:.1f} s"
    if ms % 60_000 == 0:
        return f"{ms // 60_000} min"
    return f"{ms / 60_000:.1f} min"


def _table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    def line(cells: Sequence[object]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return [line(header), line(["---"] * len(header)), *(line(r) for r in rows)]


def _offsets(finding: Finding) -> str:
    if not finding.offsets:
        return "-"
    listed = ", ".join(str(r) for r in finding.offsets)
    return listed + (", …" if finding.offsets_truncated else "")


def verdict(report: AuditReport) -> str:
    if report.clean:
        return "clean: no loss, no duplication"
    parts = [f"{report.records_of(k)} {k.value}" for k in FindingKind
             if k.is_failure and report.records_of(k)]
    return "LOSS OR DUPLICATION: " + ", ".join(parts)


def _bucket_status(bucket: BucketComparison, flagged: set[tuple[str, int, int]]) -> str:
    key = (bucket.topic, bucket.partition, bucket.bucket_start_ms)
    if not bucket.matches:
        return "**differs**"
    return "warning" if key in flagged else "ok"


def markdown(report: AuditReport, plot_name: str | None = None) -> str:
    """The report a person reads: verdict, totals, findings, latency, buckets."""
    t = report.totals
    lines = [
        f"# Mirror audit: {report.source_cluster} → {report.target_cluster}", "",
        f"As of {_when(report.as_of_ms)} (took "
        f"{_duration(report.finished_ms - report.started_ms)}); topics: "
        f"{', '.join(report.topics) or 'none'}; buckets of "
        f"{_duration(report.bucket_ms)} by record timestamp; grace "
        f"{_duration(report.grace_ms)}; late after {_duration(report.late_after_ms)}.", "",
        f"**Result: {verdict(report)}** (exit code {report.exit_code})", "",
    ]
    if plot_name:
        lines += [f"![source and mirror records per bucket, mirror latency]({plot_name})", ""]
    lines += ["## Totals", "", *_table(["records", "count"], [
        ("read from the source", t.source_records),
        ("compared (inside the mirror's range)", t.compared),
        ("copies on the target", t.copies),
        ("pending (not reached yet, within the grace period)", t.pending),
        ("overdue (not reached, older than the grace period)", t.overdue),
        ("before the mirror's first copy", t.before_mirror),
        ("excluded (already passed through the target: loop guard)", t.excluded),
        ("copies outside the source offsets read", t.outside_source),
        ("target records that are not copies from the source", t.not_copies),
    ]), ""]
    lines += ["## Findings", ""]
    if report.findings:
        lines += _table(["kind", "topic", "partition", "bucket (UTC)", "records",
                         "source offsets"],
                        [(f.kind.value, f.topic, f.partition, _bucket(f.bucket_start_ms),
                          f.records, _offsets(f)) for f in report.findings])
        kinds = [k for k in FindingKind if report.records_of(k)]
        lines += ["", *(f"- *{k.value}*: {_MEANING[k]}" for k in kinds)]
    else:
        lines.append("None: every compared bucket matches in count and checksum.")
    lines += ["", "## Mirror latency", ""]
    if report.latency:
        lines += _table(["topic", "copies", "p50", "p99", "max"],
                        [(x.topic, x.copies, _duration(x.p50_ms), _duration(x.p99_ms),
                          _duration(x.max_ms)) for x in report.latency])
    else:
        lines.append("No copies carry a mirror time.")
    lines += ["", "## Buckets", ""]
    flagged = {(f.topic, f.partition, f.bucket_start_ms) for f in report.findings}
    shown = list(report.buckets)
    if len(shown) > MARKDOWN_BUCKETS:
        shown = [b for b in shown if not b.matches or
                 (b.topic, b.partition, b.bucket_start_ms) in flagged]
        lines += [f"{len(report.buckets) - len(shown)} buckets that match and have no "
                  "findings are left out here; the JSON summary lists them all.", ""]
    if shown:
        lines += _table(
            ["topic", "partition", "bucket (UTC)", "source", "mirror", "source offsets",
             "checksums", "pending", "overdue", "late", "status"],
            [(b.topic, b.partition, _bucket(b.bucket_start_ms), b.source_records,
              b.mirror_records, _range(b.source_min_offset, b.source_max_offset),
              "equal" if b.source_checksum == b.mirror_checksum else
              f"{b.source_checksum:016x} ≠ {b.mirror_checksum:016x}",
              b.pending, b.overdue, b.late, _bucket_status(b, flagged)) for b in shown])
    else:
        lines.append("No records in any bucket.")
    return "\n".join(lines) + "\n"


def _range(low: int | None, high: int | None) -> str:
    if low is None or high is None:
        return "-"
    return str(low) if low == high else f"{low}-{high}"


def summary(report: AuditReport) -> dict[str, Any]:
    """The JSON summary: everything in the report, times as ISO text and ms."""
    def finding(f: Finding) -> dict[str, Any]:
        return {"kind": f.kind.value, "topic": f.topic, "partition": f.partition,
                "bucket_start": utc(f.bucket_start_ms).isoformat(),
                "bucket_start_ms": f.bucket_start_ms, "records": f.records,
                "offsets": [[r.first, r.last] for r in f.offsets],
                "offsets_truncated": f.offsets_truncated}

    def bucket(b: BucketComparison) -> dict[str, Any]:
        return {"topic": b.topic, "partition": b.partition,
                "bucket_start": utc(b.bucket_start_ms).isoformat(),
                "bucket_start_ms": b.bucket_start_ms, "matches": b.matches,
                "source_records": b.source_records, "mirror_records": b.mirror_records,
                "source_checksum": f"{b.source_checksum:016x}",
                "mirror_checksum": f"{b.mirror_checksum:016x}",
                "source_offsets": [b.source_min_offset, b.source_max_offset],
                "mirror_offsets": [b.mirror_min_offset, b.mirror_max_offset],
                "pending": b.pending, "overdue": b.overdue,
                "before_mirror": b.before_mirror, "excluded": b.excluded,
                "outside_source": b.outside_source, "late": b.late}

    t = report.totals
    return {
        "source_cluster": report.source_cluster, "target_cluster": report.target_cluster,
        "as_of": utc(report.as_of_ms).isoformat(), "as_of_ms": report.as_of_ms,
        "started_ms": report.started_ms,
        "duration_ms": report.finished_ms - report.started_ms,
        "bucket_ms": report.bucket_ms, "grace_ms": report.grace_ms,
        "late_after_ms": report.late_after_ms, "topics": list(report.topics),
        "clean": report.clean, "exit_code": report.exit_code, "verdict": verdict(report),
        "records": {kind.value: report.records_of(kind) for kind in FindingKind},
        "totals": {"source_records": t.source_records, "compared": t.compared,
                   "copies": t.copies, "pending": t.pending, "overdue": t.overdue,
                   "before_mirror": t.before_mirror, "excluded": t.excluded,
                   "outside_source": t.outside_source, "not_copies": t.not_copies},
        "latency": [{"topic": x.topic, "copies": x.copies, "p50_ms": x.p50_ms,
                     "p99_ms": x.p99_ms, "max_ms": x.max_ms} for x in report.latency],
        "findings": [finding(f) for f in report.findings],
        "buckets": [bucket(b) for b in report.buckets],
    }


def summary_json(report: AuditReport) -> str:
    return json.dumps(summary(report), indent=2) + "\n"
