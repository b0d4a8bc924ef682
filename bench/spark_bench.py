"""Spark throughput (issue 14, acceptance 4), measured in one run on the same data:
the ``strand`` batch reader and the mirror job against a plain SDK consume→produce
loop.

It starts two clusters of its own, A and B (real processes, by strand.launcher:
etcd, a controller, ``--storage-nodes`` storage nodes, a gateway and a transaction
coordinator each), in a temporary folder removed afterwards (the logs are kept when
something fails), and writes ``--records`` records of ``--record-size`` bytes (8-byte
keys) to a topic of ``--partitions`` partitions on A (replication factor
``--replication-factor``, acks=all). Then ``--rounds`` rounds run the three paths
back to back, in an order rotated each round (bench/eos/stats.py):

(a) ``reader``: ``spark.read.format("strand")`` over the topic, every column
    materialised by the ``noop`` sink, in this process's local session, after one
    untimed warm-up read (bench/spark/reader.py);
(b) ``mirror``: ``spark-on-k8s/jobs/mirror.py`` as a subprocess, as production runs
    it, copying the topic to B; timed from the first copied record to the last one
    visible on B to read_committed readers, its start-up reported apart
    (bench/spark/mirror_run.py);
(c) ``loop``: one SDK Consumer reading A, one Producer writing B (acks=all,
    idempotent), timed from the first poll to the last acknowledgement
    (bench/spark/loop.py).

After each run (not timed) the copy is read back and compared with A partition by
partition: each record once, in order (bench/spark/data.py); a path that fails it
makes the benchmark exit 1. Reported: records/s and MB/s (10^6 key and value bytes
per second) per path, as median, min, max over the rounds, and the ratio mirror /
loop of the medians (target >= ``--target``) with each round's ratio.

One JSON document goes to ``--output`` (and to stdout with ``--json``; progress goes
to stderr)::

    python bench/spark_bench.py --output bench/results/spark-bench.json
    python bench/spark_bench.py --records 3000 --rounds 1 --json   # a quick check

Ctrl-C (or SIGTERM/SIGHUP) stops every process the benchmark started.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench_support import (
    add_run_arguments,
    err,
    machine,
    remove_run_dir,
    run_main,
    service_warnings,
    write_document,
)
from eos.stats import ratio, rotated, spread
from spark.clusters import create_topic, delete_topic, start_cluster
from spark.data import TopicContents, check_copy, fill, log_check, read_topic
from spark.loop import loop_run
from spark.mirror_run import MirrorSpec, mirror_result, run_mirror_job, spark_env
from spark.reader import reader_contents, reader_run, start_session

from strand.launcher import Cluster, deferred_signals

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PATHS = ("reader", "mirror", "loop")
TOPIC = "spark-bench"
SOURCE, TARGET = "a", "b"


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {text!r}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=_positive, default=200_000)
    parser.add_argument("--record-size", type=_positive, default=1024, help="value bytes")
    parser.add_argument("--partitions", type=_positive, default=6)
    parser.add_argument("--storage-nodes", type=_positive, default=1, help="per cluster")
    parser.add_argument("--replication-factor", type=_positive, default=1)
    parser.add_argument("--rounds", type=_positive, default=3,
                        help="interleaved rounds (a multiple of 3 puts each path first "
                             "equally often)")
    parser.add_argument("--master", default="local[2]",
                        help="Spark master of the reader's session and of the mirror job")
    parser.add_argument("--mirror-trigger-seconds", type=_positive, default=1,
                        help="the mirror job's --trigger-seconds")
    parser.add_argument("--mirror-max-offsets-per-trigger", type=_positive,
                        help="the mirror job's --max-offsets-per-trigger (default: none, "
                             "as the job's own default)")
    parser.add_argument("--poll-interval", type=float, default=0.1,
                        help="s between the polls of B that see the mirror finish")
    parser.add_argument("--mirror-timeout", type=float, default=900,
                        help="s the mirror may take to copy the topic")
    parser.add_argument("--target", type=float, default=0.5,
                        help="the mirror / loop ratio acceptance asks for")
    add_run_arguments(parser)
    parser.add_argument("--json", action="store_true", help="the JSON document on stdout too")
    args = parser.parse_args(argv)
    if args.replication_factor > args.storage_nodes:
        parser.error(f"--replication-factor {args.replication_factor} needs as many "
                     f"--storage-nodes (have {args.storage_nodes})")
    if args.poll_interval <= 0:
        parser.error("--poll-interval must be > 0")
    return args


class Bench:
    """The rounds over one pair of clusters, the source data and one Spark session."""

    def __init__(self, args: argparse.Namespace, directory: Path, a: Cluster, b: Cluster,
                 spark: SparkSession) -> None:
        self.args, self.directory, self.a, self.b, self.spark = args, directory, a, b, spark
        self.data_bytes = 0
        self.source = TopicContents({})
        self.checks: list[dict[str, Any]] = []

    def prepare(self) -> dict[str, Any]:
        args = self.args
        create_topic(self.a.bootstrap, TOPIC, args.partitions, args.replication_factor)
        err.print(f"writing {args.records:,} records of {args.record_size} bytes to "
                  f"{TOPIC} on A")
        began = time.perf_counter()
        self.data_bytes = fill(self.a.bootstrap, TOPIC, args.partitions, args.records,
                               args.record_size)
        filled = time.perf_counter() - began
        self.source = read_topic(self.a.bootstrap, TOPIC, args.partitions)
        if self.source.records != args.records:
            raise RuntimeError(f"A holds {self.source.records} records of {TOPIC}, not "
                               f"{args.records}")
        # One untimed read first: the session's Python workers start and import the
        # data source once, as in a session that has read before (the rounds measure
        # the reading, not that start).
        warmup = reader_run(self.spark, self.a.bootstrap, TOPIC, args.records,
                            self.data_bytes)
        return {"fill_seconds": round(filled, 2), "reader_warmup_s": warmup["seconds"]}

    def _checked(self, path: str, round_index: int, copy: TopicContents) -> dict[str, Any]:
        check = check_copy(self.source, copy)
        log_check(path, check)
        self.checks.append({"path": path, "round": round_index, **check})
        return check

    def reader(self, i: int) -> dict[str, Any]:
        result = reader_run(self.spark, self.a.bootstrap, TOPIC, self.args.records,
                            self.data_bytes)
        copy = reader_contents(self.spark, self.a.bootstrap, TOPIC, self.args.partitions)
        return {**result, "check": self._checked("reader", i, copy)}

    def mirror(self, i: int) -> dict[str, Any]:
        args = self.args
        spec = MirrorSpec(self.a.bootstrap, self.b.bootstrap, TOPIC, args.partitions,
                          f"{SOURCE}{i}", TARGET, self.directory / "mirror",
                          self.directory / "logs",
                          args.mirror_trigger_seconds, args.mirror_max_offsets_per_trigger,
                          args.master, args.poll_interval, args.mirror_timeout)
        ends = {p: offset + 1 for p, offset in self.source.last_offsets.items()}
        outcome = run_mirror_job(spec, ends)
        copy = read_topic(self.b.bootstrap, spec.target_topic, args.partitions)
        result = mirror_result(spec, outcome, copy, args.records, self.data_bytes)
        result["check"] = self._checked("mirror", i, copy)
        delete_topic(self.b.bootstrap, spec.target_topic)
        return result

    def loop(self, i: int) -> dict[str, Any]:
        args = self.args
        target = f"loop{i}.{TOPIC}"
        create_topic(self.b.bootstrap, target, args.partitions, args.replication_factor)
        result = loop_run(self.a.bootstrap, self.b.bootstrap, TOPIC, target,
                          args.partitions, args.records, self.data_bytes)
        copy = read_topic(self.b.bootstrap, target, args.partitions)
        result["check"] = self._checked("loop", i, copy)
        delete_topic(self.b.bootstrap, target)
        return result

    def rounds(self) -> list[dict[str, Any]]:
        measured: list[dict[str, Any]] = []
        runs = {"reader": self.reader, "mirror": self.mirror, "loop": self.loop}
        for i in range(self.args.rounds):
            row: dict[str, Any] = {"round": i, "order": rotated(PATHS, i)}
            for path in row["order"]:
                err.print(f"round {i + 1}/{self.args.rounds}: {path}")
                row[path] = runs[path](i)
            measured.append(row)
            err.print(f"round {i + 1}/{self.args.rounds}: " + ", ".join(
                f"{p} {row[p]['records_per_s']:,.0f} records/s" for p in PATHS))
        return measured


def summarise(measured: list[dict[str, Any]], target: float) -> dict[str, Any]:
    mirror_vs_loop = ratio(measured, "mirror", "loop", "records_per_s", target)
    return {
        "records_per_s": {p: spread([r[p]["records_per_s"] for r in measured])
                          for p in PATHS},
        "mb_per_s": {p: spread([r[p]["mb_per_s"] for r in measured]) for p in PATHS},
        "mirror_startup_s": spread([r["mirror"]["startup_s"] for r in measured]),
        "mirror_vs_loop": mirror_vs_loop,
        "reader_vs_loop": ratio(measured, "reader", "loop", "records_per_s", 0.0)["ratio"],
        "exactly_once_every_path": all(r[p]["check"]["exactly_once"]
                                       for r in measured for p in PATHS),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.update(spark_env())
    directory = args.dir or Path(tempfile.mkdtemp(prefix="strand-sparkbench-"))
    directory.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    began = time.monotonic()
    clusters: list[Cluster] = []
    spark: SparkSession | None = None
    failed = True
    document: dict[str, Any] = {}
    try:
        a = start_cluster(directory, SOURCE, args.storage_nodes, args.lease_ttl)
        clusters.append(a)
        b = start_cluster(directory, TARGET, args.storage_nodes, args.lease_ttl)
        clusters.append(b)
        spark, session_s = start_session(args.master)
        bench = Bench(args, directory, a, b, spark)
        prepared = bench.prepare()
        measured = bench.rounds()
        summary = summarise(measured, args.target)
        document = {
            "benchmark": "spark_bench",
            "machine": machine(load_before),
            "settings": {"records": args.records, "record_size": args.record_size,
                         "key_size": 8, "partitions": args.partitions,
                         "replication_factor": args.replication_factor,
                         "storage_nodes_per_cluster": args.storage_nodes,
                         "rounds": args.rounds, "master": args.master, "acks": "all",
                         "mirror": {"run_as": "subprocess: spark-on-k8s/jobs/mirror.py",
                                    "trigger_seconds": args.mirror_trigger_seconds,
                                    "max_offsets_per_trigger":
                                        args.mirror_max_offsets_per_trigger,
                                    "poll_interval_s": args.poll_interval}},
            "seconds": 0.0,
            "summary": summary,
            "reader_session_start_s": round(session_s, 3),
            **prepared,
            "rounds": measured,
            "checks": bench.checks,
            "service_warnings": {c.name: service_warnings(c) for c in clusters},
        }
        failed = False
    finally:
        with deferred_signals():
            if spark is not None:
                spark.stop()
            for cluster in reversed(clusters):
                err.print(f"stopping cluster {cluster.name}")
                cluster.stop()
            remove_run_dir(directory, args.keep, failed)
    document["seconds"] = round(time.monotonic() - began, 1)
    write_document(document, args.output, args.json)
    if not document["summary"]["exactly_once_every_path"]:
        err.print("[red]a path did not copy every record exactly once: see \"checks\"")
        return 1
    return 0


if __name__ == "__main__":
    run_main(main)
