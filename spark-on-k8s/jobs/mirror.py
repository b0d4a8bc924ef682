"""The mirror job: copies topics from one Strand cluster to another, exactly once, as a
Spark streaming query that resumes from its checkpoint. See strand_spark.mirror for
how, the README's Spark section for its use.

    mirror.py --source-bootstrap HOST:PORT --source-cluster NAME
              --target-bootstrap HOST:PORT --target-cluster NAME
              (--topics a,b | --topics-pattern REGEX) [--naming prefix|identity|module:Class]
              --checkpoint DIR [--trigger-seconds 5] [--max-offsets-per-trigger N]
              [--heartbeat-seconds 5] [--metrics-port 0] [--master local[2]]

Runs unchanged with spark-submit (local or Kubernetes: the master is spark-submit's)
and with ``python jobs/mirror.py`` (local mode, --master, default local[2]). Exit 0
when stopped (SIGTERM, SIGINT), 1 when the query fails, 2 on bad arguments.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Sequence

from strand_spark.mirror.arguments import build_parser, parse_arguments

__all__ = ["build_parser", "main"]

log = logging.getLogger("strand_spark.mirror")


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_arguments(argv)  # exits 2 on a bad argument, before Spark starts
    from strand.service.telemetry import setup_telemetry
    from strand_spark.job_runtime import job_logging, spark_session, stop_on_signals
    from strand_spark.mirror.job import run_mirror

    stop = threading.Event()
    with job_logging("mirror"), stop_on_signals(stop, "mirror"):
        setup_telemetry("mirror", metrics_port=settings.metrics_port)
        spark, created = spark_session("strand-mirror", settings.master)
        try:
            run_mirror(spark, settings, stop)
            return 0
        except Exception:
            log.exception("the mirror stopped on an error")
            return 1
        finally:
            if created:
                spark.stop()


if __name__ == "__main__":
    sys.exit(main())
