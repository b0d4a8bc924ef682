"""Strand vs NATS JetStream: the same replicated, acknowledged produce workload on
each side, then the whole log read back, in one run, on this machine. Three sides
(``--sides``, default all three), one at a time, each on a fresh cluster:

1. ``nats`` — NATS JetStream: a fresh 3-node cluster of Debian's ``nats-server`` on
   127.0.0.1 (full-mesh routes, JetStream file storage in a temporary folder), one
   stream with ``num_replicas=3`` and file storage; ``--records`` publishes of
   ``--record-size`` bytes from Python (nats-py), pipelined with a bounded window of
   unacknowledged publishes, every ack awaited; then a pull consumer reads the stream
   back (see ``jetstream_bench.py``). Then the cluster is stopped.
2. ``sdk`` — Strand through its gRPC SDK: a fresh dev cluster (``strand dev up
   --dir``: etcd, 2 controllers, 3 storage nodes, a gateway), a topic with 6
   partitions, replication factor 3 and ``min.insync.replicas=2``, then ``strand
   bench produce --acks all --json`` and ``strand bench consume --json``. Then
   ``strand dev down``.
3. ``kafka`` — Strand through the gateway's Kafka listener: the same cluster and
   topic, produced to and read back with confluent-kafka (see ``kafka_bench.py``).

For each, the stored bytes per node are read back afterwards (``/jsz`` for NATS,
segment file sizes for Strand), so the output shows how many copies of the data each
system really wrote.

stdout: one JSON object with ``--json`` (``--output FILE`` writes it to FILE too; see
``peer_report.py`` for its keys), otherwise a table; with ``--json`` the table goes
to stderr (``--no-table`` to drop it). ``--rounds N`` runs the sides N times, each
time on fresh clusters and each round starting with the next side, and reports each
side's median round: the machine's background load then weighs on all alike. Exit
status 0 when every round ran, 1 when one failed, 2 with ``--check`` when the SDK /
NATS produce ratio misses the target, 130 when interrupted (after stopping
everything it started).

Run: ``make bench-peers`` or ``.venv/bin/python bench/peers/jetstream_vs_strand.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import jetstream_bench
import kafka_bench
from nats_cluster import NatsCluster
from peer_report import REPLICAS, SIDES, TITLES, compare, median_round, table
from rich.console import Console
from strand_cluster import StrandDevCluster

from strand.launcher import interrupt_on_signals

TOPIC = "bench"
MIN_INSYNC_REPLICAS = 2
err = Console(stderr=True)


def _copies(stored_bytes: int, payload_bytes: int) -> float:
    """Stored bytes over payload bytes: ~1 per full copy (plus per-record overhead)."""
    return round(stored_bytes / payload_bytes, 2) if payload_bytes else 0.0


def _load() -> float:
    """1-minute load average: anything else busy on the machine skews both sides."""
    return round(os.getloadavg()[0], 2)


def run_nats(directory: Path, records: int, record_size: int, window: int,
             publisher: str, fetch_batch: int) -> dict[str, Any]:
    load = _load()
    with NatsCluster(directory) as cluster:
        err.print(f"[bold]NATS JetStream[/bold]: 3 x nats-server {cluster.version()} on "
                  f"{', '.join(cluster.client_urls)}; publishing {records:,} x "
                  f"{record_size} B ({publisher} publisher, window {window})")
        servers = {node.name: node.client_url for node in cluster.nodes}
        result = asyncio.run(jetstream_bench.run(
            cluster.client_urls, servers, records, record_size, window=window,
            publisher=publisher, replicas=REPLICAS))
        # Followers apply the committed log asynchronously: wait for them to catch up.
        deadline = time.monotonic() + 30
        stored = cluster.stored()
        while (any(s["messages"] < result["acked"] for s in stored.values())
               and time.monotonic() < deadline):
            time.sleep(0.2)
            stored = cluster.stored()
        result["server"] = f"nats-server {cluster.version()}"
        err.print(f"[bold]NATS JetStream[/bold]: reading {result['acked']:,} records back "
                  f"(pull consumer, fetch batch {fetch_batch})")
        result["consume"] = asyncio.run(jetstream_bench.consume(
            servers[result["stream"]["leader"]], result["acked"], batch=fetch_batch))
    result["stored_per_node"] = stored
    result["stored_copies"] = _copies(sum(s["bytes"] for s in stored.values()),
                                      records * record_size)
    result["replicas_complete"] = all(s["messages"] >= result["acked"] for s in stored.values())
    result["load_avg_1m_before"] = load
    return result


def _strand_side(label: str, directory: Path, records: int, record_size: int,
                 partitions: int,
                 work: Callable[[StrandDevCluster], dict[str, Any]]) -> dict[str, Any]:
    """A fresh dev cluster and topic, ``work`` on it, then the topic's state, the bytes
    each node stored, and ``strand dev down`` (always)."""
    load = _load()
    cluster = StrandDevCluster(directory)
    try:
        err.print(f"[bold]{label}[/bold]: strand dev up (etcd, 2 controllers, 3 storage "
                  "nodes, a gateway)")
        cluster.up()
        cluster.create_topic(TOPIC, partitions, REPLICAS, MIN_INSYNC_REPLICAS)
        result = work(cluster)
        topic = cluster.describe_topic(TOPIC)
        stored = cluster.stored_bytes(TOPIC)
    finally:
        swept = cluster.down()
    result["topic"] = {"name": TOPIC, "partitions": partitions, "replication_factor": REPLICAS,
                       "min_insync_replicas": MIN_INSYNC_REPLICAS,
                       "isr_sizes": sorted(len(p["isr"]) for p in topic["partitions"])}
    result["stored_per_node"] = stored
    result["stored_copies"] = _copies(sum(stored.values()), records * record_size)
    result["load_avg_1m_before"] = load
    if swept:
        result["stopped_by_sweep"] = swept  # `strand dev down` left these running
    return result


def run_strand(directory: Path, records: int, record_size: int,
               partitions: int) -> dict[str, Any]:
    def work(cluster: StrandDevCluster) -> dict[str, Any]:
        err.print(f"[bold]Strand SDK[/bold]: strand bench produce {TOPIC} --records {records} "
                  f"--record-size {record_size} --acks all --json")
        result = cluster.bench_produce(TOPIC, records, record_size, acks="all")
        err.print(f"[bold]Strand SDK[/bold]: strand bench consume {TOPIC} --records {records} "
                  "--json")
        result["consume"] = cluster.bench_consume(TOPIC, records)
        return result

    return _strand_side("Strand SDK", directory, records, record_size, partitions, work)


def run_strand_kafka(directory: Path, records: int, record_size: int, partitions: int,
                     settings: kafka_bench.ProducerSettings) -> dict[str, Any]:
    def work(cluster: StrandDevCluster) -> dict[str, Any]:
        bootstrap = cluster.kafka_bootstrap()
        err.print(f"[bold]Strand Kafka listener[/bold]: confluent-kafka on {bootstrap}: "
                  f"producing {records:,} x {record_size} B (acks=all, idempotent, linger.ms "
                  f"{settings.linger_ms}, batch.size {settings.batch_size}, "
                  f"batch.num.messages {settings.batch_num_messages}), then reading them back")
        result = kafka_bench.produce(bootstrap, TOPIC, records, record_size, settings)
        result["consume"] = kafka_bench.consume(bootstrap, TOPIC, records)
        result["bootstrap"] = bootstrap
        return result

    return _strand_side("Strand Kafka listener", directory, records, record_size, partitions,
                        work)


def _side(label: str, run: Callable[[Path], dict[str, Any]], directory: Path,
          keep: bool) -> dict[str, Any]:
    """One round of one side; its data is deleted afterwards unless it failed."""
    try:
        result = run(directory)
    except Exception as exc:
        result = {"error": f"{type(exc).__name__}: {exc}"}
        err.print(f"[red]{label} failed[/red]: {result['error']}")
        return result
    if not keep:
        shutil.rmtree(directory, ignore_errors=True)
    return result


def _parse_sides(sides: str | None, only: str | None) -> list[str]:
    if sides is not None and only is not None:
        raise click.UsageError("--only and --sides are two ways of saying the same: use one")
    if only is not None:
        return ["sdk" if only == "strand" else "nats"]
    if sides is None:
        return list(SIDES)
    chosen = [name.strip() for name in sides.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in SIDES]
    if unknown or not chosen:
        raise click.BadParameter(f"{sides!r}: a comma-separated list of {', '.join(SIDES)}",
                                 param_hint="--sides")
    return [name for name in SIDES if name in chosen]


def _round_row(number: int, order: list[str],
               results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    row: dict[str, Any] = {"round": number, "order": order}
    for name, result in results.items():
        consume = result.get("consume") or {}
        row[name] = {"error": result["error"]} if "error" in result else {
            "records_per_s": result["records_per_s"],
            "consume_records_per_s": consume.get("records_per_s"),
            "consumed": consume.get("records"),
            "load_avg_1m_before": result["load_avg_1m_before"]}
    return row


@click.command()
@click.option("--records", type=click.IntRange(1), default=200_000, show_default=True)
@click.option("--record-size", type=click.IntRange(1), default=1024, show_default=True)
@click.option("--sides", default=None, metavar="LIST",
              help=f"comma-separated sides to run, of {', '.join(SIDES)} (default: all)")
@click.option("--only", type=click.Choice(["strand", "nats"]), default=None,
              help="run one side only (strand: the SDK side); older spelling of --sides")
@click.option("--json", "as_json", is_flag=True, help="one JSON object on stdout")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="also write the JSON object to this file")
@click.option("--table/--no-table", "table_", default=True, show_default=True,
              help="the table (on stderr with --json, else on stdout)")
@click.option("--rounds", type=click.IntRange(1), default=1, show_default=True,
              help="run the sides this many times (fresh clusters each time, each round "
                   "starting with the next side) and report each side's median round")
@click.option("--partitions", type=click.IntRange(1), default=6, show_default=True,
              help="partitions of the Strand topic")
@click.option("--nats-window", type=click.IntRange(1), default=1000, show_default=True,
              help="unacknowledged JetStream publishes in flight")
@click.option("--nats-publisher", type=click.Choice(jetstream_bench.PUBLISHERS),
              default="async", show_default=True,
              help="js.publish_async futures, or a task per js.publish")
@click.option("--nats-fetch-batch", type=click.IntRange(1), default=5000, show_default=True,
              help="messages per pull of the JetStream consumer")
@click.option("--kafka-linger-ms", type=click.IntRange(0), default=5, show_default=True)
@click.option("--kafka-batch-size", type=click.IntRange(1), default=1_000_000,
              show_default=True, help="librdkafka batch.size (bytes)")
@click.option("--kafka-batch-messages", type=click.IntRange(1), default=10_000,
              show_default=True, help="librdkafka batch.num.messages")
@click.option("--kafka-sticky-linger-ms", type=click.IntRange(0), default=10,
              show_default=True,
              help="librdkafka sticky.partitioning.linger.ms (0: a random partition per "
                   "record without a key)")
@click.option("--check", is_flag=True, help="exit 2 when the SDK / NATS ratio misses the target")
@click.option("--keep", is_flag=True, help="keep the temporary folder (data, logs)")
def main(records: int, record_size: int, sides: str | None, only: str | None, as_json: bool,
         output: Path | None, table_: bool, rounds: int, partitions: int, nats_window: int,
         nats_publisher: str, nats_fetch_batch: int, kafka_linger_ms: int,
         kafka_batch_size: int, kafka_batch_messages: int, kafka_sticky_linger_ms: int,
         check: bool, keep: bool) -> None:
    """Produce the same records to NATS JetStream and to Strand (gRPC SDK, Kafka
    listener), read them back; print every side and the ratios."""
    chosen = _parse_sides(sides, only)
    settings = kafka_bench.ProducerSettings(kafka_linger_ms, kafka_batch_size,
                                            kafka_batch_messages, kafka_sticky_linger_ms)
    runners: dict[str, Callable[[Path], dict[str, Any]]] = {
        "nats": lambda d: run_nats(d, records, record_size, nats_window, nats_publisher,
                                   nats_fetch_batch),
        "sdk": lambda d: run_strand(d, records, record_size, partitions),
        "kafka": lambda d: run_strand_kafka(d, records, record_size, partitions, settings)}
    interrupt_on_signals()
    workdir = Path(tempfile.mkdtemp(prefix="strand-vs-jetstream-"))
    err.print(f"working in {workdir}")
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in chosen}
    rows: list[dict[str, Any]] = []
    try:
        for i in range(1, rounds + 1):
            tag = f" (round {i} of {rounds})" if rounds > 1 else ""
            shift = (i - 1) % len(chosen)
            order = chosen[shift:] + chosen[:shift]
            this_round: dict[str, dict[str, Any]] = {}
            for name in order:
                this_round[name] = _side(f"{TITLES[name]} side{tag}", runners[name],
                                         workdir / f"{name}-{i}", keep)
                results[name].append(this_round[name])
            rows.append(_round_row(i, order, this_round))
    except KeyboardInterrupt:
        if keep:
            err.print(f"interrupted; every process was stopped; data and logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
            err.print("interrupted; every process was stopped")
        sys.exit(130)
    failed = any("error" in r for side in results.values() for r in side)
    if keep or failed:
        err.print(f"data and logs kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)

    report = compare(records, record_size,
                     {name: median_round(side) for name, side in results.items()}, rows)
    document = json.dumps(report)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(document + "\n")
    if as_json:
        click.echo(document)
        if table_:
            err.print(table(report))
    elif table_:
        Console().print(table(report))
    if failed:
        sys.exit(1)
    if check and not report["met"]:
        sys.exit(2)


if __name__ == "__main__":
    main()
