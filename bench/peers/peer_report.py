"""The peer benchmark's report: each side's median round, the ratios between sides,
the issue-4 verdict (Strand's SDK ≥ 2x NATS JetStream produce) and the table.

Sides (``SIDES``): ``nats`` (NATS JetStream, key ``nats_jetstream``), ``sdk`` (Strand
through the gRPC SDK, key ``strand``, the key the report has always used) and
``kafka`` (Strand through its Kafka listener with confluent-kafka, key
``strand_kafka``). A side's result is its produce figures at the top level and its
consume figures under ``consume``.
"""

from __future__ import annotations

import os
import platform
from typing import Any

from rich.table import Table

TARGET_RATIO = 2.0
REPLICAS = 3
SIDES = ("nats", "sdk", "kafka")
KEYS = {"nats": "nats_jetstream", "sdk": "strand", "kafka": "strand_kafka"}
TITLES = {"nats": "NATS JetStream (R3, file)", "sdk": "Strand gRPC SDK (acks=all, RF 3)",
          "kafka": "Strand Kafka listener (confluent-kafka)"}
# (name in the JSON, numerator side, denominator side)
RATIOS = (("kafka_vs_sdk", "kafka", "sdk"), ("kafka_vs_nats", "kafka", "nats"),
          ("sdk_vs_nats", "sdk", "nats"))


def _ok(side: dict[str, Any] | None) -> bool:
    return side is not None and "error" not in side


def _consume_rate(side: dict[str, Any]) -> float | None:
    consume = side.get("consume")
    return float(consume["records_per_s"]) if isinstance(consume, dict) and \
        "records_per_s" in consume else None


def median_round(rounds: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The round with the median produce records/s (the lower one for an even count),
    with ``consume`` taken from the round with the median consume records/s (each
    figure's own median, so one slow phase does not drag the other along)."""
    good = sorted((r for r in rounds if "error" not in r), key=lambda r: r["records_per_s"])
    if not good:
        return rounds[-1] if rounds else None
    chosen = dict(good[(len(good) - 1) // 2])
    consumed = sorted((r for r in good if _consume_rate(r) is not None),
                      key=lambda r: _consume_rate(r) or 0.0)
    if consumed:
        chosen["consume"] = consumed[(len(consumed) - 1) // 2]["consume"]
    if len(rounds) > 1:
        chosen["rounds_records_per_s"] = [r.get("records_per_s") for r in rounds]
        chosen["rounds_consume_records_per_s"] = [_consume_rate(r) if "error" not in r
                                                  else None for r in rounds]
    return chosen


def ratios(sides: dict[str, dict[str, Any] | None]) -> dict[str, dict[str, float | None]]:
    """Median-round records/s of one side over another's, for produce and consume."""
    result: dict[str, dict[str, float | None]] = {"produce": {}, "consume": {}}
    for name, top, bottom in RATIOS:
        a, b = sides.get(top), sides.get(bottom)
        produce = consume = None
        if a is not None and b is not None and _ok(a) and _ok(b):
            produce = round(a["records_per_s"] / max(b["records_per_s"], 1e-9), 2)
            ca, cb = _consume_rate(a), _consume_rate(b)
            if ca is not None and cb is not None:
                consume = round(ca / max(cb, 1e-9), 2)
        result["produce"][name] = produce
        result["consume"][name] = consume
    return result


def compare(records: int, record_size: int, sides: dict[str, dict[str, Any] | None],
            rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The report. ``ratio``/``met``/``unmet`` keep issue 4's meaning (SDK produce
    ≥ 2x JetStream, no failures, 3 copies on disk); ``complete`` says whether every
    side that ran read back every record it produced."""
    strand, nats = sides.get("sdk"), sides.get("nats")
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
    if strand is not None and nats is not None and _ok(strand) and _ok(nats):
        ratio = round(strand["records_per_s"] / max(nats["records_per_s"], 1e-9), 2)
        if ratio < TARGET_RATIO:
            unmet.append(f"ratio {ratio} < {TARGET_RATIO}")
    ran = {name: side for name, side in sides.items() if side is not None}
    report: dict[str, Any] = {
        "record_size": record_size, "records": records,
        "sides": [name for name in SIDES if name in ran]}
    for name in SIDES:
        report[KEYS[name]] = sides.get(name)
    report.update({
        "ratio": ratio, "target_ratio": TARGET_RATIO, "met": not unmet, "unmet": unmet,
        "ratios": ratios(sides),
        "complete": bool(ran) and all(
            _ok(side) and side.get("consume", {}).get("records") == records
            for side in ran.values()),
        "rounds": rounds,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version()}})
    return report


def table(report: dict[str, Any]) -> Table:
    sides = [(TITLES[name], report[KEYS[name]]) for name in report["sides"]]
    result = Table(title=f"{report['records']:,} records x {report['record_size']} B")
    result.add_column("")
    for title, _ in sides:
        result.add_column(title, justify="right")

    def row(label: str, get: Any) -> None:
        cells = []
        for _, side in sides:
            try:
                cells.append("error" if "error" in side else str(get(side)))
            except (KeyError, TypeError):
                cells.append("-")
        result.add_row(label, *cells)

    def by_round(values: list[float | None]) -> str:
        return " ".join("error" if r is None else f"{r:,.0f}" for r in values)

    row("produce records/s", lambda s: f"{s['records_per_s']:,.0f}")
    row("produce MB/s", lambda s: f"{s['mb_per_s']:.2f}")
    row("latency p50 ms", lambda s: s["latency_ms"]["p50"])
    row("latency p99 ms", lambda s: s["latency_ms"]["p99"])
    row("latency p99.9 ms", lambda s: s["latency_ms"]["p999"])
    row("produce seconds", lambda s: s["seconds"])
    row("failures", lambda s: s.get("failures", 0))
    row("copies on disk", lambda s: s["stored_copies"])
    row("consume records/s", lambda s: f"{s['consume']['records_per_s']:,.0f}")
    row("consume MB/s", lambda s: f"{s['consume']['mb_per_s']:.2f}")
    row("consume seconds", lambda s: s["consume"]["seconds"])
    row("records read back", lambda s: f"{s['consume']['records']:,}")
    row("load avg 1m at start", lambda s: s["load_avg_1m_before"])
    if any("rounds_records_per_s" in side for _, side in sides):
        row("produce/s by round", lambda s: by_round(s["rounds_records_per_s"]))
        row("consume/s by round", lambda s: by_round(s["rounds_consume_records_per_s"]))
    parts = []
    for phase in ("produce", "consume"):
        shown = [f"{name.replace('_vs_', '/')} {value:.2f}x"
                 for name, value in report["ratios"][phase].items() if value is not None]
        if shown:
            parts.append(f"{phase}: " + ", ".join(shown))
    verdict = ("[green]met[/green]" if report["met"] else
               "[red]not met[/red]: " + "; ".join(report["unmet"]))
    result.caption = "\n".join(
        [*parts, f"SDK / NATS produce target ≥ {TARGET_RATIO}x, 3 copies, no failures: "
                 f"{verdict}"])
    return result
