"""Strand vs NATS JetStream: the same replicated, acknowledged produce workload on
both, in one run, on this machine.

1. NATS JetStream: a fresh 3-node cluster of Debian's ``nats-server`` on 127.0.0.1
   (full-mesh routes, JetStream file storage in a temporary folder), one stream
   with ``num_replicas=3`` and file storage; ``--records`` publishes of
   ``--record-size`` bytes from Python (nats-py), pipelined with a bounded window
   of unacknowledged publishes, every ack awaited (see ``jetstream_bench.py``).
   Then the cluster is stopped.
2. Strand: a fresh dev cluster (``strand dev up --dir``: etcd, 2 controllers, 3
   storage nodes, a gateway), a topic with 6 partitions, replication factor 3 and
   ``min.insync.replicas=2``, then ``strand bench produce --acks all --json`` with
   the same record count and size. Then ``strand dev down``.

The two never run at the same time (2 cores here). For each, the stored bytes per
node are read back afterwards (``/jsz`` for NATS, segment file sizes for Strand), so
the output shows how many copies of the data each system really wrote.

stdout: one JSON object with ``--json`` (``record_size``, ``records``, ``strand``,
``nats_jetstream``, ``ratio`` = Strand records/s ÷ NATS records/s,
``target_ratio``, ``met``), otherwise a table; with ``--json`` the table goes to
stderr (``--no-table`` to drop it). ``--rounds N`` alternates the two sides N times,
each time on fresh clusters, and reports each side's median round: the machine's
background load then weighs on both alike. Exit status 0 when every round ran, 1
when one failed, 2 with ``--check`` when the ratio misses the target, 130 when
interrupted (after stopping everything it started).

Run: ``make bench-peers`` or ``.venv/bin/python bench/peers/jetstream_vs_strand.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import jetstream_bench
from nats_cluster import NatsCluster
from rich.console import Console
from rich.table import Table
from strand_cluster import StrandDevCluster

from strand.launcher import interrupt_on_signals

TARGET_RATIO = 2.0
REPLICAS = 3
TOPIC = "bench"
err = Console(stderr=True)


def _copies(stored_bytes: int, payload_bytes: int) -> float:
    """Stored bytes over payload bytes: ~1 per full copy (plus per-record overhead)."""
    return round(stored_bytes / payload_bytes, 2) if payload_bytes else 0.0


def _load() -> float:
    """1-minute load average: anything else busy on the machine skews both sides."""
    return round(os.getloadavg()[0], 2)


def run_nats(directory: Path, records: int, record_size: int, window: int,
             publisher: str) -> dict[str, Any]:
    load = _load()
    with NatsCluster(directory) as cluster:
        err.print(f"[bold]NATS JetStream[/bold]: 3 x nats-server {cluster.version()} on "
                  f"{', '.join(cluster.client_urls)}; publishing {records:,} x "
                  f"{record_size} B ({publisher} publisher, window {window})")
        result = asyncio.run(jetstream_bench.run(
            cluster.client_urls, {node.name: node.client_url for node in cluster.nodes},
            records, record_size, window=window, publisher=publisher, replicas=REPLICAS))
        # Followers apply the committed log asynchronously: wait for them to catch up.
        deadline = time.monotonic() + 30
        stored = cluster.stored()
        while (any(s["messages"] < result["acked"] for s in stored.values())
               and time.monotonic() < deadline):
            time.sleep(0.2)
            stored = cluster.stored()
        result["server"] = f"nats-server {cluster.version()}"
    result["stored_per_node"] = stored
    result["stored_copies"] = _copies(sum(s["bytes"] for s in stored.values()),
                                      records * record_size)
    result["replicas_complete"] = all(s["messages"] >= result["acked"] for s in stored.values())
    result["load_avg_1m_before"] = load
    return result


def run_strand(directory: Path, records: int, record_size: int,
               partitions: int) -> dict[str, Any]:
    load = _load()
    cluster = StrandDevCluster(directory)
    try:
        err.print("[bold]Strand[/bold]: strand dev up (etcd, 2 controllers, 3 storage nodes, "
                  "a gateway)")
        cluster.up()
        cluster.create_topic(TOPIC, partitions, REPLICAS, 2)
        err.print(f"[bold]Strand[/bold]: strand bench produce {TOPIC} --records {records} "
                  f"--record-size {record_size} --acks all --json")
        result = cluster.bench_produce(TOPIC, records, record_size, acks="all")
        topic = cluster.describe_topic(TOPIC)
        stored = cluster.stored_bytes(TOPIC)
    finally:
        swept = cluster.down()
    result["topic"] = {"name": TOPIC, "partitions": partitions, "replication_factor": REPLICAS,
                       "min_insync_replicas": 2,
                       "isr_sizes": sorted(len(p["isr"]) for p in topic["partitions"])}
    result["stored_per_node"] = stored
    result["stored_copies"] = _copies(sum(stored.values()), records * record_size)
    result["load_avg_1m_before"] = load
    if swept:
        result["stopped_by_sweep"] = swept  # `strand dev down` left these running
    return result


def compare(records: int, record_size: int, strand: dict[str, Any] | None,
            nats: dict[str, Any] | None) -> dict[str, Any]:
    ratio: float | None = None
    unmet: list[str] = []
    for name, side in (("strand", strand), ("nats_jetstream", nats)):
        if side is None or "error" in side:
            unmet.append(f"{name} did not run")
        elif side.get("failures", 0):
            unmet.append(f"{name} had {side['failures']} failed records")
        elif side["stored_copies"] < REPLICAS:
            # each copy stores every payload byte plus headers: < 3.0 is < 3 copies
            unmet.append(f"{name} stored {side['stored_copies']} copies, not {REPLICAS}")
    if strand and nats and "error" not in strand and "error" not in nats:
        ratio = round(strand["records_per_s"] / max(nats["records_per_s"], 1e-9), 2)
        if ratio < TARGET_RATIO:
            unmet.append(f"ratio {ratio} < {TARGET_RATIO}")
    return {"record_size": record_size, "records": records, "strand": strand,
            "nats_jetstream": nats, "ratio": ratio, "target_ratio": TARGET_RATIO,
            "met": not unmet, "unmet": unmet,
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                        "python": platform.python_version()}}


def table(report: dict[str, Any]) -> Table:
    sides = [("Strand (acks=all, RF 3)", report["strand"]),
             ("NATS JetStream (R3, file)", report["nats_jetstream"])]
    sides = [(name, side) for name, side in sides if side is not None]
    result = Table(title=f"{report['records']:,} records x {report['record_size']} B")
    result.add_column("")
    for name, _ in sides:
        result.add_column(name, justify="right")

    def row(label: str, get: Any) -> None:
        cells = []
        for _, side in sides:
            try:
                cells.append("error" if "error" in side else str(get(side)))
            except (KeyError, TypeError):
                cells.append("-")
        result.add_row(label, *cells)

    row("records/s", lambda s: f"{s['records_per_s']:,.0f}")
    row("MB/s", lambda s: f"{s['mb_per_s']:.2f}")
    row("latency p50 ms", lambda s: s["latency_ms"]["p50"])
    row("latency p99 ms", lambda s: s["latency_ms"]["p99"])
    row("latency p99.9 ms", lambda s: s["latency_ms"]["p999"])
    row("seconds", lambda s: s["seconds"])
    row("failures", lambda s: s.get("failures", 0))
    row("copies on disk", lambda s: s["stored_copies"])
    if any("rounds_records_per_s" in side for _, side in sides):
        row("records/s by round", lambda s: " ".join(
            "error" if r is None else f"{r:,.0f}" for r in s["rounds_records_per_s"]))
    ratio = report["ratio"]
    verdict = ("[green]met[/green]" if report["met"] else
               "[red]not met[/red]: " + "; ".join(report["unmet"]))
    result.caption = (f"Strand / NATS = {ratio:.2f}x " if ratio is not None else "") + \
        f"(target ≥ {TARGET_RATIO}x, 3 copies, no failures: {verdict})"
    return result


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


def _median(rounds: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The round with the median records/s (the lower one for an even count)."""
    good = sorted((r for r in rounds if "error" not in r), key=lambda r: r["records_per_s"])
    if not good:
        return rounds[-1] if rounds else None
    chosen = dict(good[(len(good) - 1) // 2])
    if len(rounds) > 1:
        chosen["rounds_records_per_s"] = [r.get("records_per_s") for r in rounds]
    return chosen


@click.command()
@click.option("--records", type=click.IntRange(1), default=200_000, show_default=True)
@click.option("--record-size", type=click.IntRange(1), default=1024, show_default=True)
@click.option("--only", type=click.Choice(["strand", "nats"]), default=None,
              help="run one side only")
@click.option("--json", "as_json", is_flag=True, help="one JSON object on stdout")
@click.option("--table/--no-table", "table_", default=True, show_default=True,
              help="the table (on stderr with --json, else on stdout)")
@click.option("--rounds", type=click.IntRange(1), default=1, show_default=True,
              help="alternate the two sides this many times (fresh clusters each time) "
                   "and report each side's median round")
@click.option("--partitions", type=click.IntRange(1), default=6, show_default=True,
              help="partitions of the Strand topic")
@click.option("--nats-window", type=click.IntRange(1), default=1000, show_default=True,
              help="unacknowledged JetStream publishes in flight")
@click.option("--nats-publisher", type=click.Choice(jetstream_bench.PUBLISHERS),
              default="async", show_default=True,
              help="js.publish_async futures, or a task per js.publish")
@click.option("--check", is_flag=True, help="exit 2 when the ratio misses the target")
@click.option("--keep", is_flag=True, help="keep the temporary folder (data, logs)")
def main(records: int, record_size: int, only: str | None, as_json: bool, table_: bool,
         rounds: int, partitions: int, nats_window: int, nats_publisher: str, check: bool,
         keep: bool) -> None:
    """Produce the same records to Strand and to NATS JetStream; print both and the ratio."""
    interrupt_on_signals()
    workdir = Path(tempfile.mkdtemp(prefix="strand-vs-jetstream-"))
    err.print(f"working in {workdir}")
    nats_rounds: list[dict[str, Any]] = []
    strand_rounds: list[dict[str, Any]] = []
    try:
        for i in range(1, rounds + 1):
            tag = f" (round {i} of {rounds})" if rounds > 1 else ""
            if only != "strand":
                nats_rounds.append(_side(
                    f"NATS JetStream side{tag}",
                    lambda d: run_nats(d, records, record_size, nats_window, nats_publisher),
                    workdir / f"nats-{i}", keep))
            if only != "nats":
                strand_rounds.append(_side(
                    f"Strand side{tag}",
                    lambda d: run_strand(d, records, record_size, partitions),
                    workdir / f"strand-{i}", keep))
    except KeyboardInterrupt:
        if keep:
            err.print(f"interrupted; every process was stopped; data and logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
            err.print("interrupted; every process was stopped")
        sys.exit(130)
    failed = any("error" in r for r in nats_rounds + strand_rounds)
    if keep or failed:
        err.print(f"data and logs kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)

    report = compare(records, record_size, _median(strand_rounds), _median(nats_rounds))
    if as_json:
        click.echo(json.dumps(report))
        if table_:
            err.print(table(report))
    else:
        Console().print(table(report))
    if failed:
        sys.exit(1)
    if check and not report["met"]:
        sys.exit(2)


if __name__ == "__main__":
    main()
