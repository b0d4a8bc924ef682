"""The audit job's command line (fixed by the Spark contract; the manifests and the
submit script pass exactly these) and its checks: a bad argument stops the job before
Spark starts, with exit code 2 and a message naming the argument."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from strand_spark.job_arguments import (
    DEFAULT_MASTER,
    ClusterPair,
    add_cluster_pair,
    cluster_pair_fields,
    positive_int,
    positive_seconds,
)
from strand_spark.naming import NamingPolicy, naming_policy

DEFAULT_BUCKET_MINUTES = 10
DEFAULT_INTERVAL_SECONDS = 300.0


@dataclass(frozen=True)
class AuditSettings(ClusterPair):
    """What one audit job compares, and where the reports go."""

    bucket_minutes: int
    report_dir: Path
    continuous: bool = False
    interval_seconds: float = DEFAULT_INTERVAL_SECONDS
    master: str | None = None

    @property
    def naming_policy(self) -> NamingPolicy:
        return naming_policy(self.naming)

    @property
    def bucket_ms(self) -> int:
        return self.bucket_minutes * 60_000


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="audit.py",
        description="Audit a mirror: compare the source topics of one cluster with their "
                    "copies on another, per topic, partition and time bucket; write a "
                    "report (Markdown, PNG, JSON). Exit 0 when clean, 1 on loss or "
                    "duplication, 2 on bad arguments.")
    add_cluster_pair(parser, "audit")
    parser.add_argument("--bucket-minutes", type=positive_int,
                        default=DEFAULT_BUCKET_MINUTES, metavar="N",
                        help="event-time bucket width (default 10)")
    parser.add_argument("--report-dir", required=True, type=Path, metavar="DIR",
                        help="where the reports go (created if missing)")
    parser.add_argument("--continuous", action="store_true",
                        help="audit again every --interval-seconds until SIGTERM")
    parser.add_argument("--interval-seconds", type=positive_seconds, metavar="N",
                        help=f"pause between audits (default {DEFAULT_INTERVAL_SECONDS:g}; "
                        "ignored without --continuous)")
    parser.add_argument("--master", metavar="URL",
                        help=f"Spark master when not run by spark-submit (default "
                        f"{DEFAULT_MASTER})")
    return parser


def parse_arguments(argv: Sequence[str] | None = None) -> AuditSettings:
    """The settings, or SystemExit(2) with a message on standard error."""
    parser = build_parser()
    args = parser.parse_args(argv)
    pair = cluster_pair_fields(parser, args)
    report_dir: Path = args.report_dir
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        parser.error(f"argument --report-dir: cannot create {str(report_dir)!r}: "
                     f"{exc.strerror or exc}")
    if not os.access(report_dir, os.W_OK | os.X_OK):
        parser.error(f"argument --report-dir: {str(report_dir)!r} is not writable")
    return AuditSettings(
        **pair, bucket_minutes=args.bucket_minutes, report_dir=report_dir,
        continuous=args.continuous,
        interval_seconds=args.interval_seconds or DEFAULT_INTERVAL_SECONDS,
        master=args.master)
