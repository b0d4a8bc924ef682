"""The cost of security (issue 15, acceptance 5): produce and consume throughput of a
cluster on mutual TLS, and of one with TLS, authentication and ACLs, against the same
cluster in plaintext, measured in one run.

It starts three clusters of its own (real processes, by strand.launcher), side by
side in a temporary folder removed afterwards (logs kept when something fails): etcd,
a controller, ``--storage-nodes`` storage nodes, a gateway and a transaction
coordinator each. The ``tls`` one has TLS on every listener, every call between the
services and etcd's client port, client certificates required and the internal
services serving only the services' certificates (``--tls-service-names``). The
``secured`` one adds SCRAM-SHA-512 authentication (required) and the ACL authorizer
(deny by default): its clients authenticate as a user allowed exactly what they do
(WRITE and READ on the benchmark's topics by prefix), among ``--other-acls`` bindings
of other users. The certificates are the repository's test ones (``--certs``,
tests/support/tls/).

Each round, in an order alternated round by round, each cluster gets a new topic
(``--partitions``, replication factor ``--replication-factor``,
``min.insync.replicas`` ``--min-insync-replicas``) and a producer writes ``--records``
records of ``--record-size`` bytes with acks=all, then a consumer (assign mode, from
the beginning) reads them all back. Reported: records/s and MB/s per cluster, the
medians over ``--rounds`` rounds, and the TLS / plaintext and secured / plaintext
ratios (each round's and of the medians).

One JSON document goes to ``--output`` (and to stdout with ``--json``)::

    python bench/tls_bench.py --output tls.json
    python bench/tls_bench.py --records 2000 --rounds 1 --storage-nodes 1 \
        --replication-factor 1 --min-insync-replicas 1 --json   # a quick check
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_support import add_run_arguments, err, machine, remove_run_dir, run_main, write_document
from bench_support import service_warnings as count_warnings
from eos.cluster import create_topic
from eos.stats import ratio, rotated, spread

from strand import Admin, Consumer, Producer, TopicPartition
from strand.launcher import REPO, Boot, Cluster, ClusterSpec, deferred_signals
from strand.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclPermissionType,
    Operation,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from strand.security.settings import ClientTlsSettings
from strand.security.tls import ClientTls, ServiceTls

PLAIN, TLS, SECURED = "plaintext", "tls", "secured"
MODES = (PLAIN, TLS, SECURED)
TOPIC_PREFIX = "tls-bench-"
SUPERUSER = ("admin", "bench-admin-secret")
USER = ("bench", "bench-user-secret")
SILENCE_S = 30.0  # a consumer without a record for this long: something is wrong
SERVICE_NAMES = ("strand-service*",)  # the test service certificates' names


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300_000,
                        help="records per produce run (and read back per consume run)")
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--storage-nodes", type=int, default=3)
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--min-insync-replicas", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=6,
                        help="interleaved rounds (even: each cluster first as often)")
    parser.add_argument("--batch-size", type=int, default=262_144)
    parser.add_argument("--linger-ms", type=float, default=5)
    parser.add_argument("--other-acls", type=int, default=200,
                        help="bindings of other users on the secured cluster (the "
                             "authorizer looks among them)")
    parser.add_argument("--certs", type=Path, default=REPO / "tests" / "support" / "tls",
                        help="ca.pem, service.pem, service-key.pem, client.pem, "
                             "client-key.pem (default: the repository's test certificates)")
    add_run_arguments(parser)
    parser.add_argument("--json", action="store_true", help="the JSON document on stdout too")
    args = parser.parse_args(argv)
    if min(args.records, args.record_size, args.partitions, args.storage_nodes,
           args.replication_factor, args.min_insync_replicas, args.rounds) < 1:
        parser.error("every count and size must be at least 1")
    return args


def _as(user: tuple[str, str], tls: ClientTlsSettings) -> ClientTlsSettings:
    settings = ClientTlsSettings(**tls)
    settings["security_protocol"] = "SASL_SSL"
    settings["sasl_mechanism"] = "SCRAM-SHA-512"
    settings["sasl_plain_username"], settings["sasl_plain_password"] = user
    return settings


def _grant(cluster: Cluster, admin: ClientTlsSettings, others: int) -> None:
    """The benchmark's user, allowed exactly what it does, among ``others`` bindings
    of other users (on topics by literal name and by prefix)."""
    def binding(principal: str, name: str, pattern: PatternType,
                operation: Operation) -> AclBinding:
        return AclBinding(ResourcePattern(ResourceType.TOPIC, name, pattern),
                          AccessControlEntry(principal, "*", operation,
                                             AclPermissionType.ALLOW))

    bench = f"User:{USER[0]}"
    bindings = [binding(bench, TOPIC_PREFIX, PatternType.PREFIXED, op)
                for op in (Operation.WRITE, Operation.READ)]
    bindings += [binding(f"User:other-{i}", f"{TOPIC_PREFIX}{i}" if i % 2 else f"other-{i}.",
                         PatternType.LITERAL if i % 2 else PatternType.PREFIXED,
                         Operation.READ) for i in range(others)]
    with Admin(cluster.bootstrap, **admin) as boss:
        boss.upsert_scram_user(*USER)
        boss.create_acls(bindings)


def start_clusters(directory: Path, args: argparse.Namespace
                   ) -> tuple[dict[str, Cluster], dict[str, ClientTlsSettings],
                              dict[str, ClientTlsSettings]]:
    """The clusters, each one's data clients' settings, and its admin's."""
    certs: Path = args.certs
    tls = ServiceTls.from_files(certs / "service.pem", certs / "service-key.pem",
                                certs / "ca.pem", require_client_cert=True,
                                service_names=SERVICE_NAMES)
    client_tls = ClientTls(certs / "ca.pem", certs / "client.pem",
                           certs / "client-key.pem").as_settings()
    clients = {PLAIN: ClientTlsSettings(), TLS: client_tls, SECURED: _as(USER, client_tls)}
    admins = {**clients, SECURED: _as(SUPERUSER, client_tls)}
    secured = ("--require-authentication", "--authorizer", "acl",
               "--super-users", f"User:{SUPERUSER[0]}")
    clusters: dict[str, Cluster] = {}
    for mode in MODES:
        err.print(f"starting the {mode} cluster ({args.storage_nodes} storage nodes)")
        clusters[mode] = Cluster(ClusterSpec(
            directory / mode, name=f"tlsbench-{mode}", storage_nodes=args.storage_nodes,
            lease_ttl=args.lease_ttl, etcd_fsync=False, boot=Boot.ONE_BY_ONE,
            healthy_timeout=30, tls=None if mode == PLAIN else tls,
            superuser=SUPERUSER if mode == SECURED else None,
            gateway_args=secured if mode == SECURED else ())).start()
    _grant(clusters[SECURED], admins[SECURED], args.other_acls)
    return clusters, clients, admins


def produce_run(bootstrap: str, topic: str, args: argparse.Namespace,
                client: ClientTlsSettings) -> dict[str, Any]:
    payload = os.urandom(args.record_size)
    failures: list[BaseException] = []

    def done(metadata: object, error: BaseException | None) -> None:
        if error is not None:
            failures.append(error)

    with Producer(bootstrap, acks="all", batch_size=args.batch_size,
                  linger_ms=args.linger_ms, **client) as producer:
        producer.partitions_for(topic)  # metadata first: not part of the measurement
        start = time.perf_counter()
        for _ in range(args.records):
            producer.send(topic, value=payload, on_delivery=done)
        producer.flush()
        seconds = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"{len(failures)} records failed: {failures[0]!r}")
    return _rates(args.records, args.records * args.record_size, seconds)


def consume_run(bootstrap: str, topic: str, args: argparse.Namespace,
                client: ClientTlsSettings) -> dict[str, Any]:
    consumed = total_bytes = 0
    with Consumer(bootstrap, auto_offset_reset="earliest", **client) as consumer:
        tps = [TopicPartition(topic, p) for p in range(args.partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        for tp in tps:  # offsets looked up now: the timing is of the fetches alone
            consumer.position(tp)
        start = last = time.perf_counter()
        while consumed < args.records:
            batch = consumer.poll(timeout_ms=500)
            now = time.perf_counter()
            for records in batch.values():
                consumed += len(records)
                total_bytes += sum(len(r.value or b"") for r in records)
                last = now
            if now - last > SILENCE_S:
                raise RuntimeError(f"{consumed} of {args.records} records, then {SILENCE_S} s "
                                   "without any")
    if consumed != args.records:
        raise RuntimeError(f"read {consumed} records, {args.records} were written")
    return _rates(consumed, total_bytes, last - start)


def _rates(records: int, size: int, seconds: float) -> dict[str, Any]:
    seconds = max(seconds, 1e-6)
    return {"records": records, "seconds": round(seconds, 3),
            "records_per_s": round(records / seconds, 1),
            "mb_per_s": round(size / seconds / 1e6, 3)}


def run(clusters: dict[str, Cluster], clients: dict[str, ClientTlsSettings],
        admins: dict[str, ClientTlsSettings], args: argparse.Namespace) -> dict[str, Any]:
    produced: list[dict[str, Any]] = []
    consumed: list[dict[str, Any]] = []
    for i in range(args.rounds):
        order = rotated(list(MODES), i)
        produce_row: dict[str, Any] = {"round": i, "order": order}
        consume_row: dict[str, Any] = {"round": i, "order": order}
        for mode in order:
            cluster, topic = clusters[mode], f"{TOPIC_PREFIX}{i}"
            create_topic(cluster, topic, args.partitions, args.replication_factor,
                         args.min_insync_replicas, admins[mode])
            produce_row[mode] = produce_run(cluster.bootstrap, topic, args, clients[mode])
            consume_row[mode] = consume_run(cluster.bootstrap, topic, args, clients[mode])
        produced.append(produce_row)
        consumed.append(consume_row)
        err.print(f"round {i + 1}/{args.rounds}: " + ", ".join(
            f"{m} produce {produce_row[m]['records_per_s']:,.0f}/s consume "
            f"{consume_row[m]['records_per_s']:,.0f}/s" for m in MODES))
    return {section: {
        "rounds": rows,
        "records_per_s": {m: spread([r[m]["records_per_s"] for r in rows]) for m in MODES},
        "mb_per_s": {m: spread([r[m]["mb_per_s"] for r in rows]) for m in MODES},
        "tls_vs_plaintext": _measured(ratio(rows, TLS, PLAIN, "records_per_s", 0.0)),
        "secured_vs_plaintext": _measured(ratio(rows, SECURED, PLAIN, "records_per_s", 0.0)),
    } for section, rows in (("produce", produced), ("consume", consumed))}


def _measured(value: dict[str, Any]) -> dict[str, Any]:
    """A ratio measured, not held against a target (the issue asks for the cost)."""
    return {k: v for k, v in value.items() if k not in ("target", "met")}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    directory = args.dir or Path(tempfile.mkdtemp(prefix="strand-tlsbench-"))
    directory.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    began = time.monotonic()
    clusters: dict[str, Cluster] = {}
    failed = True
    result: dict[str, Any] = {}
    warnings: dict[str, dict[str, int]] = {}
    try:
        clusters, clients, admins = start_clusters(directory, args)
        result = run(clusters, clients, admins, args)
        warnings = {mode: count_warnings(c) for mode, c in clusters.items()}
        failed = False
    finally:
        with deferred_signals():
            for mode, cluster in clusters.items():
                err.print(f"stopping the {mode} cluster")
                cluster.stop()
            remove_run_dir(directory, args.keep, failed)
    document = {
        "benchmark": "tls_bench",
        "machine": machine(load_before),
        "settings": {"records": args.records, "record_size": args.record_size,
                     "partitions": args.partitions, "storage_nodes": args.storage_nodes,
                     "replication_factor": args.replication_factor,
                     "min_insync_replicas": args.min_insync_replicas, "acks": "all",
                     "rounds": args.rounds, "batch_size": args.batch_size,
                     "linger_ms": args.linger_ms,
                     "tls": "mutual TLS on every listener, service calls and etcd; "
                            "service names checked",
                     "secured": "tls, with SCRAM-SHA-512 authentication required and the "
                                "ACL authorizer (deny by default)",
                     "other_acls": args.other_acls},
        "seconds": round(time.monotonic() - began, 1),
        "summary": {f"{section}_{mode}_vs_plaintext":
                    result[section][f"{mode}_vs_plaintext"]["ratio"]
                    for section in ("produce", "consume") for mode in (TLS, SECURED)},
        **result,
        "service_warnings": warnings,
    }
    write_document(document, args.output, args.json)
    return 0


if __name__ == "__main__":
    run_main(main)
