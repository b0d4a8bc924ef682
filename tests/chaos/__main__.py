"""``python -m tests.chaos``: run the fault-injection harness and print its summary.

    python -m tests.chaos --duration 600 --faults mix --seed 7
    python -m tests.chaos --faults kill-leader,partition-node --injections 4 --json

Progress goes to stderr; the summary table to stdout (to stderr with ``--json``,
when stdout carries the JSON report). Exit status: 0 when every check passed, 1
when any of lost / divergence / order / phantom / replica mismatches / re-read /
skipped / dup / aborted reads / torn / past LSO / txns lost / pipe dup / pipe missing
is non-zero
or the cluster did not recover by itself after a fault (a process exited, or it
was not healthy again within the recovery timeout), 2 when the harness itself
could not run (or left processes behind).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from types import FrameType

from .exactly_once import ExactlyOnceSettings
from .faults import KINDS
from .group_workload import GroupSettings
from .kafka_workload import KafkaSettings
from .runner import ChaosConfig, run
from .summary import print_summary
from .txn_workload import TxnSettings


def parse_args(argv: list[str] | None = None) -> tuple[ChaosConfig, bool]:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=600,
                        help="seconds of fault injection (0: unlimited, use --injections)")
    parser.add_argument("--faults", default="mix",
                        help=f"'mix' (all, rotating) or a comma list of: {', '.join(KINDS)}")
    parser.add_argument("--injections", type=int, default=0,
                        help="stop after this many faults (0: no limit)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lease-ttl", type=int, default=3,
                        help="lease TTL (s) of storage nodes and controllers")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=100, help="records/s per writer")
    parser.add_argument("--quiet", type=float, default=3,
                        help="seconds of calm before the first fault and after each recovery")
    parser.add_argument("--cut-mode", choices=["blackhole", "reset"], default="blackhole")
    parser.add_argument("--group-members", type=int, default=3,
                        help="members of the consumer group (0: no group workload)")
    parser.add_argument("--churn", type=float, default=8,
                        help="seconds between replacements of a group member (0: never)")
    parser.add_argument("--crash-share", type=float, default=0.3,
                        help="share of the replacements that SIGKILL the member")
    parser.add_argument("--assignor", default="range",
                        choices=["range", "roundrobin", "sticky", "cooperative-sticky"],
                        help="the group members' partition assignor")
    parser.add_argument("--offsets-share", type=float, default=0.34,
                        help="share of the leader faults aimed at the group's "
                             "__consumer_offsets leader")
    parser.add_argument("--no-idempotence", action="store_true",
                        help="plain writers on the chaos topic (a retry may write twice: "
                             "counted, not an error)")
    parser.add_argument("--transactional-producers", type=int, default=2,
                        help="transactional producers over chaos-txa/chaos-txb (0: none)")
    parser.add_argument("--txn-rate", type=float, default=5,
                        help="transactions per second per transactional producer")
    parser.add_argument("--pipeline-workers", type=int, default=2,
                        help="consume-transform-produce workers chaos-in -> chaos-out "
                             "(0: no pipeline)")
    parser.add_argument("--pipeline-rate", type=float, default=20,
                        help="records/s fed to the pipeline's input")
    parser.add_argument("--kafka-workloads", action=argparse.BooleanOptionalAction,
                        default=True,
                        help="confluent-kafka clients through the gateway's Kafka "
                             "listener: an idempotent writer and a reader on the chaos "
                             "topic, a second read-back through it, a transactional "
                             "producer and a read_committed reader on chaos-txa/chaos-txb")
    parser.add_argument("--kafka-rate", type=float, default=50,
                        help="records/s per confluent-kafka writer")
    parser.add_argument("--workdir", type=Path, help="default: a new temporary directory")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work directory (logs, data) even when the run passed")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    kinds = list(KINDS) if args.faults == "mix" else [
        k.strip() for k in args.faults.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown or not kinds:
        parser.error(f"unknown faults {unknown}; use 'mix' or some of: {', '.join(KINDS)}")
    config = ChaosConfig(duration=args.duration, faults=kinds, seed=args.seed,
                         injections=args.injections, lease_ttl=args.lease_ttl,
                         partitions=args.partitions, writers=args.writers, rate=args.rate,
                         quiet=args.quiet, cut_mode=args.cut_mode, workdir=args.workdir,
                         keep=args.keep, offsets_share=args.offsets_share,
                         group=GroupSettings(members=args.group_members, churn=args.churn,
                                             crash_share=args.crash_share,
                                             assignor=args.assignor),
                         idempotence=not args.no_idempotence,
                         exactly_once=ExactlyOnceSettings(
                             transactional_producers=args.transactional_producers,
                             pipeline_workers=args.pipeline_workers,
                             pipeline_rate=args.pipeline_rate,
                             txn=TxnSettings(rate=args.txn_rate)),
                         kafka=KafkaSettings(rate=args.kafka_rate) if args.kafka_workloads
                         else KafkaSettings(writers=0, tail_readers=0,
                                            transactional_producers=0))
    return config, args.json


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # unwinds through the runner's cleanup


def main(argv: list[str] | None = None) -> int:
    config, as_json = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    try:
        result = run(config, log=progress)
    except KeyboardInterrupt:
        progress("interrupted; every process was stopped")
        return 2
    except Exception as exc:
        progress(f"the chaos harness failed: {type(exc).__name__}: {exc}")
        return 2
    print_summary(result, file=sys.stderr if as_json else sys.stdout)
    if as_json:
        print(json.dumps({"config": config.describe(), **result.report.to_json()}, indent=2))
    if result.leftover_pids or result.workload_errors:
        return 2
    return 1 if result.report.failed or result.report.unavailable else 0


if __name__ == "__main__":
    sys.exit(main())
