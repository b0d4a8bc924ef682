"""The audit job: compares source topics with their mirrored copies per topic,
partition and event-time bucket, writes a report (Markdown table, PNG plot, JSON
summary) to --report-dir, and exits 0 when clean, 1 on loss or duplication, 2 on bad
arguments. See strand_spark.audit for the method, docs/spark.md for its use.

    audit.py --source-bootstrap HOST:PORT --source-cluster NAME
             --target-bootstrap HOST:PORT --target-cluster NAME
             (--topics a,b | --topics-pattern REGEX) [--naming prefix|identity|module:Class]
             [--bucket-minutes 10] --report-dir DIR
             [--continuous --interval-seconds 300] [--master local[2]]

Runs unchanged with spark-submit (local or Kubernetes: the master is spark-submit's)
and with ``python jobs/audit.py`` (local mode, --master, default local[2]).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from strand_spark.audit.arguments import parse_arguments

if TYPE_CHECKING:
    from strand_spark.audit.loading import Loader


def main(argv: Sequence[str] | None = None, load: Loader | None = None) -> int:
    """The job; ``load`` replaces reading the clusters (tests)."""
    settings = parse_arguments(argv)  # exits 2 on a bad argument, before Spark starts
    from strand_spark.audit.loading import AuditSetupError, load_from_strand
    from strand_spark.audit.runner import run
    from strand_spark.job_runtime import job_logging, spark_session, stop_on_signals

    stop = threading.Event()
    with job_logging("audit"), stop_on_signals(stop, "audit"):
        spark, created = spark_session("strand-audit", settings.master)
        try:
            return run(spark, settings, load or load_from_strand, stop)
        except AuditSetupError as exc:
            print(f"audit.py: error: {exc}", file=sys.stderr)
            return 2
        finally:
            if created:
                spark.stop()


if __name__ == "__main__":
    sys.exit(main())
