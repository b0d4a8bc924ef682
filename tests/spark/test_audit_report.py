"""The audit report renders: the Markdown names each finding, the JSON summary holds
everything, the PNG is a real image a person can look at. No Spark needed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from strand_spark.audit.model import (
    AuditReport,
    AuditTotals,
    BucketComparison,
    Finding,
    FindingKind,
    OffsetRange,
    TopicLatency,
)
from strand_spark.audit.render import MARKDOWN_BUCKETS, markdown, summary, verdict
from strand_spark.audit.reports import LATEST, report_stem, write_report

BUCKET_MS = 600_000
T0 = 1_764_000_000_000 - 1_764_000_000_000 % BUCKET_MS


def comparison(topic: str, partition: int, index: int, source: int, mirror: int,
               checksum_differs: bool = False, late: int = 0) -> BucketComparison:
    return BucketComparison(
        topic=topic, partition=partition, bucket_start_ms=T0 + index * BUCKET_MS,
        source_records=source, mirror_records=mirror, source_checksum=0xABC,
        mirror_checksum=0xABD if checksum_differs or source != mirror else 0xABC,
        source_min_offset=index * 10, source_max_offset=index * 10 + 9,
        mirror_min_offset=index * 10, mirror_max_offset=index * 10 + 9, pending=0,
        overdue=0, before_mirror=0, excluded=0, outside_source=0, late=late)


def report(findings: tuple[Finding, ...], buckets: int = 3) -> AuditReport:
    rows = [comparison(topic, p, i, 10, 10) for topic in ("orders", "payments")
            for p in range(2) for i in range(buckets)]
    totals = AuditTotals(source_records=120, compared=120, copies=117, pending=0,
                         overdue=0, before_mirror=0, excluded=0, outside_source=0,
                         not_copies=0)
    return AuditReport(
        source_cluster="us-east", target_cluster="eu-west", bucket_ms=BUCKET_MS,
        grace_ms=BUCKET_MS, late_after_ms=BUCKET_MS, as_of_ms=T0 + 40 * BUCKET_MS,
        started_ms=T0 + 40 * BUCKET_MS,
        finished_ms=T0 + 40 * BUCKET_MS + 4200, totals=totals, buckets=tuple(rows),
        findings=findings,
        latency=(TopicLatency("orders", 117, 1500, 9000, 1_200_000),
                 TopicLatency("payments", 60, 800, 2000, 2500)),
        topics=("orders", "payments"))


GAP = Finding(FindingKind.MISSING, "orders", 0, T0 + BUCKET_MS, 4,
              (OffsetRange(12, 12), OffsetRange(15, 17)))
DUPLICATE = Finding(FindingKind.DUPLICATE, "orders", 1, T0 + 2 * BUCKET_MS, 1,
                    (OffsetRange(25, 25),), offsets_truncated=True)
LATE = Finding(FindingKind.LATE, "payments", 1, T0, 2)


def test_the_markdown_names_each_finding_and_the_verdict() -> None:
    text = markdown(report((GAP, DUPLICATE, LATE)), plot_name="x.png")
    assert text.startswith("# Mirror audit: us-east → eu-west")
    assert "**Result: LOSS OR DUPLICATION: 4 missing, 1 duplicate** (exit code 1)" in text
    assert "| missing | orders | 0 | 2025-11-24 16:10 | 4 | 12, 15-17 |" in text
    assert "| duplicate | orders | 1 | 2025-11-24 16:20 | 1 | 25, … |" in text
    assert "| late | payments | 1 | 2025-11-24 16:00 | 2 | - |" in text
    assert "| orders | 117 | 1.5 s | 9.0 s | 20 min |" in text
    assert "![source and mirror records per bucket, mirror latency](x.png)" in text


def test_a_clean_report_says_so() -> None:
    clean = report(())
    text = markdown(clean)
    assert "**Result: clean: no loss, no duplication** (exit code 0)" in text
    assert "None: every compared bucket matches" in text
    assert clean.exit_code == 0 and verdict(clean).startswith("clean")


def test_warnings_alone_do_not_fail_the_audit() -> None:
    overdue = Finding(FindingKind.OVERDUE, "orders", 0, T0, 3)
    assert report((LATE, overdue)).exit_code == 0
    assert report((LATE, Finding(FindingKind.ALTERED, "orders", 0, T0, 1))).exit_code == 1


def test_many_matching_buckets_are_left_out_of_the_markdown_not_the_json() -> None:
    big = report((GAP,), buckets=MARKDOWN_BUCKETS)
    text = markdown(big)
    listed = [line for line in text.splitlines() if line.startswith("| orders |")
              or line.startswith("| payments |")]
    bucket_rows = [line for line in listed if line.endswith(" |") and "ok" not in line]
    assert f"{4 * MARKDOWN_BUCKETS - 1} buckets that match" in text
    assert any("warning" in line for line in bucket_rows)
    assert len(summary(big)["buckets"]) == 4 * MARKDOWN_BUCKETS


def test_the_json_summary_round_trips_the_findings() -> None:
    data = json.loads(json.dumps(summary(report((GAP, DUPLICATE)))))
    assert data["exit_code"] == 1 and data["clean"] is False
    assert data["records"]["missing"] == 4 and data["records"]["duplicate"] == 1
    assert data["findings"][0] == {
        "kind": "missing", "topic": "orders", "partition": 0,
        "bucket_start": "2025-11-24T16:10:00+00:00", "bucket_start_ms": T0 + BUCKET_MS,
        "records": 4, "offsets": [[12, 12], [15, 17]], "offsets_truncated": False}
    assert data["latency"][0]["p99_ms"] == 9000


@pytest.mark.parametrize("findings", [(GAP, DUPLICATE, LATE), ()], ids=["faulty", "clean"])
def test_the_report_files_render_a_real_png(tmp_path: Path,
                                            findings: tuple[Finding, ...]) -> None:
    audit = report(findings)
    files = write_report(audit, tmp_path)
    assert files.plot.name == f"{report_stem(audit)}.png"
    image = imread(files.plot)
    height, width = image.shape[:2]
    assert width >= 800 and height >= 600
    assert float(np.std(image[..., :3])) > 0.05  # not a blank canvas
    assert files.plot.stat().st_size > 20_000
    assert (tmp_path / f"{LATEST}.png").read_bytes() == files.plot.read_bytes()
    assert "(latest.png)" in (tmp_path / f"{LATEST}.md").read_text()
    assert json.loads(files.summary.read_text())["exit_code"] == audit.exit_code
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_an_empty_audit_still_renders(tmp_path: Path) -> None:
    empty = AuditReport(
        source_cluster="a", target_cluster="b", bucket_ms=BUCKET_MS, grace_ms=0,
        late_after_ms=0, as_of_ms=T0, started_ms=T0, finished_ms=T0, totals=AuditTotals(*[0] * 9),
        buckets=(), findings=(), latency=())
    files = write_report(empty, tmp_path)
    assert imread(files.plot).shape[0] > 100
    assert "No records in any bucket." in files.markdown.read_text()
