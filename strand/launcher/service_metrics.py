"""What a service's Prometheus endpoint (``--metrics-port``; ``Cluster.metrics_ports``
when the spec asks for ``metrics``) says, for the benchmarks and tests that read it."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from strand.launcher.system import LOCALHOST

__all__ = ["REQUESTS_SAMPLE", "scrape", "served_requests"]

REQUESTS_SAMPLE = "strand_requests_total"  # strand.service.request_metrics' counter


def scrape(port: int, timeout: float = 5.0) -> list[Sample]:
    """Every sample the endpoint on 127.0.0.1:``port`` serves now."""
    with urllib.request.urlopen(f"http://{LOCALHOST}:{port}/metrics",
                                timeout=timeout) as answer:
        text = answer.read().decode()
    return [sample for family in text_string_to_metric_families(text)
            for sample in family.samples]


def served_requests(port: int) -> dict[str, float]:
    """Requests the service behind ``port`` has served so far, by API (every status)."""
    counts: dict[str, float] = {}
    for sample in scrape(port):
        if sample.name == REQUESTS_SAMPLE:
            api = sample.labels.get("request", "?")
            counts[api] = counts.get(api, 0.0) + sample.value
    return counts
