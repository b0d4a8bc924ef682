"""The mirror job's command line (fixed by spark-on-k8s/jobs/arguments.yaml: the
manifests and the submit script pass exactly these): a bad argument stops the job
before Spark starts, with exit code 2 and a message naming it."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from strand_spark.job_arguments import (
    ClusterPair,
    add_cluster_pair,
    cluster_pair_fields,
    positive_int,
    positive_seconds,
)

DEFAULT_TRIGGER_SECONDS = 5
DEFAULT_HEARTBEAT_SECONDS = 5.0


@dataclass(frozen=True)
class MirrorSettings(ClusterPair):
    checkpoint: str
    trigger_seconds: int = DEFAULT_TRIGGER_SECONDS
    max_offsets_per_trigger: int | None = None
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS
    metrics_port: int = 0
    master: str | None = None

    @property
    def sink_id(self) -> str:
        """The exactly-once sink's name: one per source and target pair."""
        return f"mirror.{self.source_cluster}.{self.target_cluster}"


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mirror.py", description="Mirror topics from one Strand cluster to another, "
        "exactly once, as a Spark streaming query.")
    add_cluster_pair(parser, "mirror")
    parser.add_argument("--checkpoint", required=True,
                        help="Spark's checkpoint location (a path or object-store URI): "
                             "the query resumes from it after a restart")
    parser.add_argument("--trigger-seconds", type=non_negative_int,
                        default=DEFAULT_TRIGGER_SECONDS,
                        help="seconds between micro-batch starts (0: each as soon as the "
                             "last one ends)")
    parser.add_argument("--max-offsets-per-trigger", type=positive_int,
                        help="at most this many records per micro-batch")
    parser.add_argument("--heartbeat-seconds", type=positive_seconds,
                        default=DEFAULT_HEARTBEAT_SECONDS,
                        help="how often a heartbeat goes to strand-mirror.heartbeats")
    parser.add_argument("--metrics-port", type=int, default=0,
                        help="serve Prometheus metrics on this port (0: off)")
    parser.add_argument("--master", default=None,
                        help="Spark master when run by python (default local[2]); under "
                             "spark-submit, spark-submit's")
    return parser


def parse_arguments(argv: Sequence[str] | None = None) -> MirrorSettings:
    parser = build_parser()
    args = parser.parse_args(argv)
    return MirrorSettings(
        **cluster_pair_fields(parser, args),
        checkpoint=args.checkpoint, trigger_seconds=args.trigger_seconds,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        heartbeat_seconds=args.heartbeat_seconds, metrics_port=args.metrics_port,
        master=args.master)
