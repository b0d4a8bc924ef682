"""The cost of exactly once (issue 12, acceptance 4), measured in one run against
one real local cluster.

It starts a cluster of its own (real processes, by strand.launcher): etcd, a
controller, ``--storage-nodes`` storage nodes, a gateway and a transaction
coordinator, in a temporary folder removed afterwards (the logs are kept when
something fails). Topics have replication factor ``--replication-factor`` and
``min.insync.replicas`` ``--min-insync-replicas``; records are ``--record-size``
bytes, every write is acks=all. Then, in sections (``--sections``):

1. ``produce``: a plain (non-idempotent), an idempotent and, when the SDK has the
   transactional API, a transactional producer committing every
   ``--commit-interval-ms``, each sending ``--records`` records per run; ``--rounds``
   rounds run every variant back to back in an order rotated each round; the
   ratios of the medians (targets: idempotent >= 0.9x plain, transactional >=
   0.85x plain), each round's ratio and the spread (bench/eos/produce.py). Each run
   also says what it cost (bench/eos/cost.py): CPU microseconds per record of every
   process (the client is this one), the cores kept busy, and the requests each
   service served per 1000 records — on a machine the whole cluster shares, a
   ratio follows the CPU per record.
2. ``endtxn``: EndTxn latency p50/p99 for transactions over ``--endtxn-partitions``
   partitions: the raw EndTxn RPC, the time until CompleteCommit, and the SDK's
   ``commit_transaction()`` (bench/eos/endtxn.py).
3. ``consume``: read_committed vs read_uncommitted consume throughput over the same
   topic of committed transactions, in alternating rounds (target >= 0.9x;
   bench/eos/consume.py).
4. ``commit_cost``: what one commit costs the cluster apart from its records: CPU
   per iteration of every process, and requests, for ``--commit-cost-iterations``
   transactions of one record to each of ``--partitions`` partitions against the same
   records written and flushed without a transaction, in alternating rounds; their
   difference by process (bench/eos/commit_cost.py).

One JSON document, with each section's parameters, goes to ``--output`` (and to
stdout with ``--json``; progress goes to stderr)::

    python bench/exactly_once_bench.py --output eos.json
    python bench/exactly_once_bench.py --records 2000 --rounds 1 --endtxn-iterations 3 \
        --endtxn-partitions 1,4 --consume-transactions 4 --json   # a quick check

Ctrl-C (or SIGTERM/SIGHUP) stops every process the benchmark started.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_support import (
    add_run_arguments,
    err,
    machine,
    remove_run_dir,
    run_main,
    service_warnings,
    write_document,
)
from eos.cluster import create_topic, start_cluster
from eos.commit_cost import commit_cost_section
from eos.consume import consume_section
from eos.cost import CostMeter
from eos.endtxn import endtxn_section
from eos.produce import ProduceSpec, produce_section, transactions_available

from strand.launcher import Cluster, deferred_signals

SECTIONS = ("produce", "endtxn", "consume", "commit_cost")
PRODUCE_TOPIC, ENDTXN_TOPIC, CONSUME_TOPIC = "eos-produce", "eos-endtxn", "eos-consume"
COMMIT_COST_TOPIC = "eos-commit-cost"


def _sizes(text: str) -> list[int]:
    sizes = [int(item) for item in text.split(",") if item.strip()]
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"partition counts must be >= 1: {text!r}")
    return sizes


def _sections(text: str) -> list[str]:
    chosen = [item.strip() for item in text.split(",") if item.strip()]
    unknown = set(chosen) - set(SECTIONS)
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"sections are {', '.join(SECTIONS)}: {text!r}")
    return chosen


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", type=_sections, default=list(SECTIONS),
                        help=f"comma-separated, of {','.join(SECTIONS)} (default: all)")
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--storage-nodes", type=int, default=3)
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--min-insync-replicas", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=6,
                        help="partitions of the produce and consume topics")
    parser.add_argument("--rounds", type=int, default=6,
                        help="interleaved rounds of the produce and consume comparisons (a "
                             "multiple of 6 puts each variant first equally often)")
    # Long enough for the steady state: a 30,000-record run lasts about 0.6 s, half a
    # dozen commits, and its first AddPartitionsToTxn and last commit weigh too much.
    parser.add_argument("--records", type=int, default=200_000, help="records per produce run")
    parser.add_argument("--batch-size", type=int, default=262_144,
                        help="the producers' batch_size (strand bench produce's default)")
    parser.add_argument("--linger-ms", type=float, default=5)
    parser.add_argument("--commit-interval-ms", type=float, default=100)
    parser.add_argument("--endtxn-partitions", type=_sizes, default=[1, 10, 100],
                        help="comma-separated partition counts of the EndTxn transactions")
    parser.add_argument("--endtxn-iterations", type=int, default=100,
                        help="commits timed per partition count")
    parser.add_argument("--consume-transactions", type=int, default=100,
                        help="committed transactions written for the consume comparison")
    parser.add_argument("--consume-batch-records", type=int, default=200,
                        help="records per partition per transaction there")
    parser.add_argument("--commit-cost-iterations", type=int, default=100,
                        help="transactions (and flushes without one) per commit_cost round")
    add_run_arguments(parser)
    parser.add_argument("--json", action="store_true", help="the JSON document on stdout too")
    return parser.parse_args(argv)


def run(args: argparse.Namespace, cluster: Cluster) -> dict[str, Any]:
    bootstrap = cluster.bootstrap
    sdk = transactions_available()
    if not sdk:
        err.print("[yellow]this SDK has no transactional producer API: the transactional "
                  "produce run, commit_transaction() and the commit_cost section are "
                  "skipped")
    result: dict[str, Any] = {}
    topic = (args.replication_factor, args.min_insync_replicas)
    meter = CostMeter(cluster)
    if "produce" in args.sections:
        create_topic(cluster, PRODUCE_TOPIC, args.partitions, *topic)
        spec = ProduceSpec(bootstrap, PRODUCE_TOPIC, args.records, args.record_size,
                           args.batch_size, args.linger_ms, args.commit_interval_ms)
        result["produce"] = produce_section(spec, args.rounds, sdk, meter)
    if "endtxn" in args.sections:
        create_topic(cluster, ENDTXN_TOPIC, max(args.endtxn_partitions), *topic)
        result["end_txn_latency"] = endtxn_section(
            bootstrap, ENDTXN_TOPIC, args.endtxn_partitions, args.endtxn_iterations,
            args.record_size, sdk)
    if "consume" in args.sections:
        create_topic(cluster, CONSUME_TOPIC, args.partitions, *topic)
        result["consume"] = consume_section(
            bootstrap, CONSUME_TOPIC, args.partitions, args.consume_transactions,
            args.consume_batch_records, args.record_size, args.rounds)
    if "commit_cost" in args.sections and sdk:
        create_topic(cluster, COMMIT_COST_TOPIC, args.partitions, *topic)
        result["commit_cost"] = commit_cost_section(
            bootstrap, COMMIT_COST_TOPIC, args.partitions, args.commit_cost_iterations,
            args.rounds, args.record_size, meter)
    return result


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """The numbers acceptance 4 asks for, side by side."""
    out: dict[str, Any] = {}
    produce = result.get("produce", {})
    for key in ("idempotent_vs_plain", "transactional_vs_plain"):
        if key in produce:
            out[key] = produce[key]["ratio"]
            out[f"{key}_met"] = produce[key]["met"]
    for variant, row in produce.get("cpu_us_per_record", {}).items():
        out[f"cpu_us_per_record[{variant}]"] = row["median"]
    if "consume" in result:
        ratio = result["consume"]["read_committed_vs_read_uncommitted"]
        out["read_committed_vs_read_uncommitted"] = ratio["ratio"]
        out["read_committed_vs_read_uncommitted_met"] = ratio["met"]
    if "commit_cost" in result:
        out["commit_adds_cpu_ms"] = result["commit_cost"]["transaction_adds_cpu_ms"]["median"]
    latency = result.get("end_txn_latency", {})
    for kind in ("end_txn_rpc", "commit_complete", "commit_transaction"):
        for size, row in latency.get(kind, {}).items():
            out[f"{kind}_ms[{size} partitions]"] = {"p50": row["p50_ms"], "p99": row["p99_ms"]}
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    directory = args.dir or Path(tempfile.mkdtemp(prefix="strand-eosbench-"))
    directory.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    began = time.monotonic()
    cluster: Cluster | None = None
    failed = True
    result: dict[str, Any] = {}
    warnings: dict[str, int] = {}
    try:
        cluster = start_cluster(directory, args.storage_nodes, args.lease_ttl)
        result = run(args, cluster)
        warnings = service_warnings(cluster)  # before the shutdown's own
        failed = False
    finally:
        with deferred_signals():
            if cluster is not None:
                err.print("stopping the cluster")
                cluster.stop()
            remove_run_dir(directory, args.keep, failed)
    document = {
        "benchmark": "exactly_once_bench",
        "machine": machine(load_before),
        "settings": {"storage_nodes": args.storage_nodes,
                     "replication_factor": args.replication_factor,
                     "min_insync_replicas": args.min_insync_replicas,
                     "record_size": args.record_size, "acks": "all",
                     "transaction_coordinators": 1, "lease_ttl_s": args.lease_ttl,
                     "sections": args.sections},
        "seconds": round(time.monotonic() - began, 1),
        "summary": summary(result),
        **result,
        "service_warnings": warnings,
    }
    write_document(document, args.output, args.json)
    return 0


if __name__ == "__main__":
    run_main(main)
