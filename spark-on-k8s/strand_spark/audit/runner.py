"""Running the audit: once (a batch job) or again and again (``--continuous``), each
run loading both sides, comparing them and writing a report.

The loading is a parameter (:data:`~strand_spark.audit.loading.Loader`): the job reads
the clusters through the ``strand`` data source, tests pass DataFrames of their own;
all the rest is shared.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import SparkSession

from strand_spark.audit.analysis import AuditOptions, audit_frames
from strand_spark.audit.arguments import AuditSettings
from strand_spark.audit.loading import Loader, load_from_strand
from strand_spark.audit.model import AuditReport, FindingKind
from strand_spark.audit.reports import ReportFiles, write_report

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AuditRun:
    report: AuditReport
    files: ReportFiles


def run_once(spark: SparkSession, settings: AuditSettings,
             load: Loader = load_from_strand, now_ms: int | None = None) -> AuditRun:
    """Load, compare, write the report (``now_ms``: the clock of the grace period)."""
    loaded = load(spark, settings)
    options = AuditOptions(source_cluster=settings.source_cluster,
                           target_cluster=settings.target_cluster,
                           bucket_ms=settings.bucket_ms, now_ms=now_ms)
    report = audit_frames(loaded.source, loaded.mirror, options, topics=loaded.topics)
    files = write_report(report, settings.report_dir)
    log.info("audit: %s", "clean" if report.clean else "loss or duplication", extra={
        "source": report.source_cluster, "target": report.target_cluster,
        "missing": report.records_of(FindingKind.MISSING),
        "duplicate": report.records_of(FindingKind.DUPLICATE),
        "buckets": len(report.buckets), "report": str(files.markdown)})
    return AuditRun(report, files)


def run(spark: SparkSession, settings: AuditSettings, load: Loader = load_from_strand,
        stop: threading.Event | None = None,
        on_run: Callable[[AuditRun], None] | None = None) -> int:
    """The job: one audit, or (``settings.continuous``) one every
    ``settings.interval_seconds`` until ``stop`` is set. Returns the exit code of the
    last audit completed: 0 clean, 1 loss or duplication.

    A run that fails (a cluster unreachable, say) ends a single audit with its error;
    in continuous mode it is logged and the next run comes at the next interval, so an
    outage of one cluster does not end the auditor."""
    stop = stop or threading.Event()
    code = 0
    while True:
        try:
            completed = run_once(spark, settings, load)
        except Exception:
            if not settings.continuous:
                raise
            log.exception("audit: this run failed; trying again at the next interval",
                          extra={"interval_seconds": settings.interval_seconds})
        else:
            code = completed.report.exit_code
            if on_run is not None:
                on_run(completed)
        if not settings.continuous or stop.wait(settings.interval_seconds):
            return code
