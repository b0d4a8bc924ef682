"""Medians, percentiles and the spread of interleaved A/B rounds."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0 < q <= 1) of ``values``."""
    if not values:
        raise ValueError("no values to take a percentile of")
    ordered = sorted(values)
    rank = max(1, math.ceil(round(q * len(ordered), 9)))  # round: 0.99 * 100 is 99.00000000000001
    return ordered[min(rank, len(ordered)) - 1]


def latency_ms(seconds: Sequence[float]) -> dict[str, Any]:
    """p50/p99/max/mean (ms) of durations given in seconds."""
    ms = [s * 1000 for s in seconds]
    return {"samples": len(ms), "p50_ms": round(percentile(ms, 0.50), 3),
            "p99_ms": round(percentile(ms, 0.99), 3), "max_ms": round(max(ms), 3),
            "mean_ms": round(statistics.fmean(ms), 3)}


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min, max of a variant's rounds, and (max - min) / median."""
    median = statistics.median(values)
    return {"median": round(median, 1), "min": round(min(values), 1),
            "max": round(max(values), 1),
            "relative_spread": round((max(values) - min(values)) / median, 3) if median else 0.0}


def ratio(rounds: Sequence[dict[str, Any]], variant: str, baseline: str, key: str,
          target: float) -> dict[str, Any]:
    """``variant`` over ``baseline`` by the medians of ``key`` over the rounds, with
    the ratio of each round (both measured back to back in it) and their spread."""
    ours = [r[variant][key] for r in rounds]
    theirs = [r[baseline][key] for r in rounds]
    per_round = [round(a / b, 3) for a, b in zip(ours, theirs, strict=True)]
    value = round(statistics.median(ours) / statistics.median(theirs), 3)
    return {"of": f"{variant} / {baseline}", "by": f"median {key}", "ratio": value,
            "per_round": per_round, "per_round_min": min(per_round),
            "per_round_max": max(per_round), "target": target, "met": value >= target}


def rotated(variants: Sequence[T], round_index: int) -> list[T]:
    """The variants in a round's order: rotated each round, so none always goes
    first (a slow start, a warming cache hits each alike)."""
    shift = round_index % len(variants)
    return [*variants[shift:], *variants[:shift]]
