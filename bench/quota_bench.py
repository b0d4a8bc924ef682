"""Client quotas under load (issue 15, acceptance 2): two clients produce flat out;
one's client id has a producer byte-rate quota (default 5 MB/s). Its measured rate
should come within ±10 % of the quota, and the other client should go on unthrottled.

It starts one cluster of its own (real processes, by strand.launcher): etcd, a
controller, ``--storage-nodes`` storage nodes, a gateway and a transaction
coordinator, in a temporary folder removed afterwards (logs kept when something
fails), and one topic (``--partitions``, replication factor ``--replication-factor``).
Three phases of ``--seconds`` each, every producer writing ``--record-size``-byte
records with acks=all as fast as it can (its own thread, the SDK's Producer):

1. ``free_alone``: the unlimited client alone (its rate with the whole cluster);
2. ``both``: the limited and the unlimited client together;
3. ``limited_alone``: the limited client alone.

A client's rate counts the record bytes acknowledged after ``--warmup`` seconds of its
phase, over the rest of the phase (what a quota meters: record bytes; the batch
framing adds well under 1 % at 1 KiB records). A client held to its quota does not
send evenly: as with Kafka's sampled rate (11 windows of 1 s), a meter lets about
10 s of quota through at once, and those bytes leave its windows together 11 s later,
so the burst comes back every 11 s. The default phase (55 s, 11 of them warm-up)
therefore measures 44 s, four whole cycles, which a burst cannot skew, wherever the
cycle starts; a measurement of 4.4 cycles reads 0.92x-1.15x the quota depending on
where the bursts fall. Reported: each phase's rates, the
limited client's rate / quota (target 0.9-1.1 in ``both``), and the unlimited
client's rate beside it / alone with what the cluster had left for it (its alone rate
minus the quota) — "unaffected" means it is not throttled: it gets what is left.

    python bench/quota_bench.py --output quotas.json
    python bench/quota_bench.py --seconds 6 --warmup 2 --storage-nodes 1 \
        --replication-factor 1 --json   # a quick check
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench_support import add_run_arguments, err, machine, remove_run_dir, run_main, write_document
from bench_support import service_warnings as count_warnings
from eos.cluster import create_topic

from strand import Admin, Producer
from strand.launcher import Boot, Cluster, ClusterSpec, deferred_signals
from strand.security.quotas import PRODUCER_BYTE_RATE, QuotaEntity

LIMITED, FREE = "quota-limited", "quota-free"
TOPIC = "quota-bench"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quota", type=float, default=5_000_000,
                        help="the limited client's producer_byte_rate, bytes/s")
    parser.add_argument("--seconds", type=float, default=55.0,
                        help="length of each phase (keep seconds - warmup a multiple of 11: "
                             "see the module docstring)")
    parser.add_argument("--warmup", type=float, default=11.0,
                        help="seconds of each phase not measured")
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--storage-nodes", type=int, default=3)
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=262_144)
    parser.add_argument("--linger-ms", type=float, default=5)
    add_run_arguments(parser)
    parser.add_argument("--json", action="store_true", help="the JSON document on stdout too")
    args = parser.parse_args(argv)
    if min(args.quota, args.seconds, args.record_size, args.partitions, args.storage_nodes,
           args.replication_factor) <= 0 or not 0 <= args.warmup < args.seconds:
        parser.error("counts, sizes and times must be positive, the warmup shorter than "
                     "a phase")
    return args


class FlatOut(threading.Thread):
    """One client producing as fast as it can until ``stop``; counts the record bytes
    acknowledged from ``measure_from`` (monotonic) on."""

    def __init__(self, bootstrap: str, client_id: str, args: argparse.Namespace,
                 measure_from: float, stop: threading.Event) -> None:
        super().__init__(name=client_id, daemon=True)
        self.bootstrap, self.client_id, self.args = bootstrap, client_id, args
        self.measure_from, self.stop = measure_from, stop
        self.measured_bytes = 0
        self.failures: list[BaseException] = []
        self._lock = threading.Lock()

    def _done(self, metadata: object, error: BaseException | None) -> None:
        with self._lock:
            if error is not None:
                self.failures.append(error)
            elif time.monotonic() >= self.measure_from:
                self.measured_bytes += self.args.record_size

    def run(self) -> None:
        payload = os.urandom(self.args.record_size)
        # A small buffer: a throttled client blocks in send() instead of queueing
        # megabytes it would have to drain after the phase.
        with Producer(self.bootstrap, acks="all", client_id=self.client_id,
                      batch_size=self.args.batch_size, linger_ms=self.args.linger_ms,
                      buffer_memory=4 * 1024 * 1024, max_block_ms=120_000) as producer:
            producer.partitions_for(TOPIC)
            while not self.stop.is_set():
                producer.send(TOPIC, value=payload, on_delivery=self._done)


def phase(cluster: Cluster, clients: tuple[str, ...], args: argparse.Namespace
          ) -> dict[str, Any]:
    stop = threading.Event()
    start = time.monotonic()
    measure_from = start + args.warmup
    threads = [FlatOut(cluster.bootstrap, client, args, measure_from, stop)
               for client in clients]
    for thread in threads:
        thread.start()
    time.sleep(max(0.0, start + args.seconds - time.monotonic()))
    measured_s = time.monotonic() - measure_from
    stop.set()
    rates = {}
    for thread in threads:
        with thread._lock:
            measured = thread.measured_bytes
        rates[thread.client_id] = {"bytes": measured, "seconds": round(measured_s, 3),
                                   "mb_per_s": round(measured / measured_s / 1e6, 3)}
    for thread in threads:
        thread.join(timeout=180)
        if thread.is_alive():
            raise RuntimeError(f"{thread.client_id} did not stop within 180 s")
        if thread.failures:
            raise RuntimeError(f"{len(thread.failures)} records of {thread.client_id} failed: "
                               f"{thread.failures[0]!r}")
    err.print("  " + ", ".join(f"{client} {rate['mb_per_s']:.2f} MB/s"
                               for client, rate in rates.items()))
    return rates


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    directory = args.dir or Path(tempfile.mkdtemp(prefix="strand-quotabench-"))
    directory.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    began = time.monotonic()
    cluster: Cluster | None = None
    failed = True
    phases: dict[str, dict[str, Any]] = {}
    warnings: dict[str, int] = {}
    try:
        err.print(f"starting a cluster ({args.storage_nodes} storage nodes)")
        cluster = Cluster(ClusterSpec(
            directory, name="quotabench", storage_nodes=args.storage_nodes,
            lease_ttl=args.lease_ttl, etcd_fsync=False, boot=Boot.ONE_BY_ONE,
            healthy_timeout=30)).start()
        create_topic(cluster, TOPIC, args.partitions, args.replication_factor,
                     min(2, args.replication_factor))
        with Admin(cluster.bootstrap) as admin:
            admin.alter_client_quotas(QuotaEntity(client_id=LIMITED),
                                      set={PRODUCER_BYTE_RATE: args.quota})
        for name, clients in (("free_alone", (FREE,)), ("both", (LIMITED, FREE)),
                              ("limited_alone", (LIMITED,))):
            err.print(f"phase {name}: {' + '.join(clients)} for {args.seconds:g} s")
            phases[name] = phase(cluster, clients, args)
        warnings = count_warnings(cluster)
        failed = False
    finally:
        with deferred_signals():
            if cluster is not None:
                err.print("stopping the cluster")
                cluster.stop()
            remove_run_dir(directory, args.keep, failed)
    quota_mb = args.quota / 1e6
    limited_both = phases["both"][LIMITED]["mb_per_s"]
    free_alone = phases["free_alone"][FREE]["mb_per_s"]
    free_both = phases["both"][FREE]["mb_per_s"]
    limited_ratio = round(limited_both / quota_mb, 3)
    document = {
        "benchmark": "quota_bench",
        "machine": machine(load_before),
        "settings": {"quota_bytes_per_s": args.quota, "quota_on": f"client-id={LIMITED}",
                     "seconds": args.seconds, "warmup": args.warmup,
                     "record_size": args.record_size, "partitions": args.partitions,
                     "storage_nodes": args.storage_nodes,
                     "replication_factor": args.replication_factor, "acks": "all",
                     "batch_size": args.batch_size, "linger_ms": args.linger_ms},
        "seconds": round(time.monotonic() - began, 1),
        "phases": phases,
        "summary": {
            "limited_vs_quota": {"ratio": limited_ratio, "target": [0.9, 1.1],
                                 "met": 0.9 <= limited_ratio <= 1.1},
            "limited_alone_vs_quota": round(
                phases["limited_alone"][LIMITED]["mb_per_s"] / quota_mb, 3),
            "free_beside_limited_vs_alone": round(free_both / free_alone, 3)
            if free_alone else None,
            "free_beside_limited_vs_what_was_left": round(
                free_both / (free_alone - limited_both), 3)
            if free_alone > limited_both else None,
        },
        "service_warnings": warnings,
    }
    write_document(document, args.output, args.json)
    return 0


if __name__ == "__main__":
    run_main(main)
