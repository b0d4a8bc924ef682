"""Consumer groups: how long 10 consumers take from joining to every partition
assigned, and the throughput of a 3-consumer group (vs one consumer, no group).

It starts a cluster of its own (real processes, by strand.launcher as in the
integration tests): etcd, a controller, 3 storage nodes, a gateway and
``--coordinators`` group coordinators, in a temporary folder removed afterwards (the
logs are kept when something fails). Then:

1. Join latency, for every ``--delays`` value of the coordinators'
   ``--initial-rebalance-delay-ms`` (``default`` is the groups service's own default,
   3000 ms like Kafka's ``group.initial.rebalance.delay.ms``; the coordinators are
   restarted with each value) and every ``--assignors`` set: ``--rounds`` rounds, each
   with a fresh group id. ``--members`` consumers (each in its own thread, created
   beforehand) are released at once; each calls ``subscribe([topic])`` and then
   ``poll(50 ms)`` in a loop. A round's time runs from that release until the moment
   every member is in the same generation (its public group metadata) and the union of
   their assignments is every partition of the ``--join-partitions`` topic, each
   exactly once. The state must then hold for ``--settle-s`` and the coordinator must
   describe the group as Stable with that generation, those members and that
   assignment (else the round keeps waiting: the time is that of the final state).
   Also reported: when the partitions were first all covered (maybe by fewer
   members, in an earlier generation) and the generation reached.

2. Throughput: ``--records`` records of ``--record-size`` bytes are produced (acks=1,
   256 KiB batches, round robin over partitions) to a topic of ``--partitions``
   partitions (replication factor ``--replication-factor``). A group of
   ``--group-consumers`` consumers (fresh group id, auto commit on, SDK defaults
   otherwise) then reads all of them: records/s and MB/s (10^6 bytes) from the first
   assignment to the last record seen by the group, in total and per member. Every
   record must be read exactly once (the members' offsets per partition cover
   0..end offset with no gap and no overlap); duplicates are counted and reported,
   along with any rebalance during the run. For context a single consumer (assign
   mode, no group) reads the same topic. Consumers run in processes of their own
   (``--consumer-mode process``, as the members of a real group would), or as
   threads of this process (``thread``: one interpreter, one GIL).

One JSON document goes to stdout (progress to stderr)::

    python bench/group_bench.py --json
    python bench/group_bench.py --records 50000 --rounds 2 --json   # a quick check

Ctrl-C (or SIGTERM/SIGHUP) stops every process the benchmark started.

The code is in bench/groups/ (the cluster, the join rounds, the throughput run);
this file is the command line: the options, the run, the JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_support import (
    add_run_arguments,
    err,
    machine,
    remove_run_dir,
    run_main,
    service_warnings,
)
from groups.cluster import BenchCluster, default_assignors, default_delay_ms
from groups.join import JOIN_TOPIC, POLL_MS, join_series
from groups.throughput import DATA_TOPIC, throughput

from strand import Admin, NewTopic
from strand.coordination.shards import DEFAULT_SHARDS
from strand.launcher import deferred_signals


def _parse_delays(text: str, default: int) -> list[int]:
    delays = []
    for item in text.split(","):
        item = item.strip()
        delays.append(default if item == "default" else int(item))
    return list(dict.fromkeys(delays))


def _parse_assignors(text: str) -> list[tuple[str, tuple[str, ...] | None]]:
    sets: list[tuple[str, tuple[str, ...] | None]] = []
    for item in text.split(","):
        item = item.strip()
        if item == "default":
            sets.append((f"default ({'+'.join(default_assignors())})", None))
        elif item:
            sets.append((item, tuple(item.split("+"))))
    return sets


@dataclass
class _Outcome:
    result: dict[str, Any]
    ok: bool = True


@dataclass
class _Run:
    directory: Path
    keep: bool
    cluster: BenchCluster | None = None

    def cleanup(self, failed: bool) -> None:
        with deferred_signals():
            if self.cluster is not None:
                err.print("stopping the cluster")
                self.cluster.stop()
            remove_run_dir(self.directory, self.keep, failed)


def main() -> int:
    default_delay = default_delay_ms()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="join rounds per setting (0: skip)")
    parser.add_argument("--members", type=int, default=10, help="consumers per join round")
    parser.add_argument("--join-partitions", type=int, default=30)
    parser.add_argument("--delays", default="default,0",
                        help="coordinator --initial-rebalance-delay-ms values for the join "
                             f"rounds, comma-separated ('default' = {default_delay})")
    parser.add_argument("--assignors", default="default,cooperative-sticky",
                        help="assignor lists for the join rounds, comma-separated; "
                             "'default' = the SDK's, 'a+b' = a list of several")
    parser.add_argument("--heartbeat-ms", type=int, default=3000)
    parser.add_argument("--session-ms", type=int, default=10000)
    parser.add_argument("--settle-s", type=float, default=1.0,
                        help="how long the complete assignment must hold")
    parser.add_argument("--round-timeout", type=float, default=90.0)
    parser.add_argument("--pause-s", type=float, default=0.5, help="between join rounds")
    parser.add_argument("--records", type=int, default=300_000,
                        help="records for the throughput run (0: skip it)")
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--replication-factor", type=int, default=1)
    parser.add_argument("--group-consumers", type=int, default=3)
    parser.add_argument("--consumer-mode", choices=("process", "thread"), default="process")
    parser.add_argument("--max-poll-records", type=int, default=500)
    parser.add_argument("--throughput-delay-ms", type=int, default=default_delay,
                        help="the coordinators' rebalance delay during the throughput run")
    parser.add_argument("--consume-timeout", type=float, default=600.0)
    parser.add_argument("--coordinators", type=int, default=1)
    parser.add_argument("--storage-nodes", type=int, default=3)
    parser.add_argument("--shards", type=int, default=DEFAULT_SHARDS,
                        help="partitions of __consumer_offsets")
    add_run_arguments(parser, output=False)
    parser.add_argument("--json", action="store_true", help="compact JSON (one line)")
    args = parser.parse_args()
    delays = _parse_delays(args.delays, default_delay)
    assignor_sets = _parse_assignors(args.assignors)

    directory = args.dir or Path(tempfile.mkdtemp(prefix="strand-groupbench-"))
    directory.mkdir(parents=True, exist_ok=True)
    run = _Run(directory, args.keep)
    load_before = os.getloadavg()
    outcome = _Outcome({})
    failed = True
    try:
        run.cluster = cluster = BenchCluster(directory, args.storage_nodes, args.coordinators,
                                             args.shards, args.lease_ttl)
        cluster.start()
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics([NewTopic(JOIN_TOPIC, args.join_partitions, 1),
                                 NewTopic(DATA_TOPIC, args.partitions, args.replication_factor)])
        if args.rounds > 0:
            series = []
            # the throughput run's delay last: no extra coordinator restart
            for delay in sorted(delays, key=lambda d: d == args.throughput_delay_ms):
                for label, assignors in assignor_sets:
                    series.append(join_series(cluster, delay, label, assignors, args))
            outcome.result["join"] = series
            outcome.ok &= all(s["failed_rounds"] == 0 and not s["stuck_members"]
                              for s in series)
        if args.records > 0:
            result = throughput(cluster, args)
            outcome.result["throughput"] = result
            outcome.ok &= all(r["missing"] == 0 and all(m["error"] is None for m in r["members"])
                              for r in (result["group"], result["single_consumer"]))
        failed = not outcome.ok
        outcome.result["service_warnings"] = service_warnings(cluster.cluster)  # before the
        # shutdown's own
    finally:
        run.cleanup(failed)
    document = {
        "benchmark": "group_bench",
        "machine": machine(load_before),
        "settings": {
            "storage_nodes": args.storage_nodes, "coordinators": args.coordinators,
            "shards": args.shards, "lease_ttl_s": args.lease_ttl,
            "groups_service_default_delay_ms": default_delay,
            "join": {"members": args.members, "partitions": args.join_partitions,
                     "rounds": args.rounds, "delays_ms": delays,
                     "assignors": [label for label, _ in assignor_sets],
                     "heartbeat_interval_ms": args.heartbeat_ms,
                     "session_timeout_ms": args.session_ms, "settle_s": args.settle_s,
                     "poll_timeout_ms": POLL_MS},
            "throughput": {"records": args.records, "record_size": args.record_size,
                           "partitions": args.partitions,
                           "replication_factor": args.replication_factor,
                           "group_consumers": args.group_consumers,
                           "consumer_mode": args.consumer_mode,
                           "max_poll_records": args.max_poll_records,
                           "initial_rebalance_delay_ms": args.throughput_delay_ms},
        },
        "summary": _summary(outcome.result),
        **outcome.result,
        "ok": outcome.ok,
    }
    print(json.dumps(document) if args.json else json.dumps(document, indent=2))
    return 0 if outcome.ok else 1


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for series in result.get("join", []):
        key = f"join_median_s[delay={series['initial_rebalance_delay_ms']},{series['assignors']}]"
        summary[key] = series["median_s"]
    if "throughput" in result:
        group = result["throughput"]["group"]
        single = result["throughput"]["single_consumer"]
        summary.update({"group_records_per_s": group["records_per_s"],
                        "group_mb_per_s": group["mb_per_s"],
                        "group_exactly_once": group["exactly_once"],
                        "single_records_per_s": single["records_per_s"],
                        "single_mb_per_s": single["mb_per_s"]})
    return summary


if __name__ == "__main__":
    run_main(main)
