"""What a produce run costs the machine, so that a ratio comes with its reasons: the
CPU time every process used during the run (the services, from /proc; the client,
this benchmark's own process) and the requests each service served (its Prometheus
endpoint), per record. Read just before the first send and after the last
acknowledgement; the services' background work in that time counts too."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

from strand.launcher import Cluster, cpu_seconds
from strand.launcher.service_metrics import served_requests

CLIENT = "client"  # this process: the SDK producer under test


@dataclass(frozen=True)
class Reading:
    at: float  # time.monotonic()
    cpu_s: dict[str, float]  # by process id (CLIENT: this one)
    requests: dict[tuple[str, str], float]  # (process id, API) -> served so far


class CostMeter:
    """Reads the CPU times and request counts of ``cluster``'s processes."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def read(self) -> Reading:
        cpu = {CLIENT: time.process_time()}
        requests: dict[tuple[str, str], float] = {}
        for process in self.cluster.processes():
            if process.pid is not None:
                with contextlib.suppress(OSError):  # gone: it has no share to report
                    cpu[process.id] = cpu_seconds(process.pid)
            port = self.cluster.metrics_ports.get(process.id)
            if port is not None:
                for api, count in served_requests(port).items():
                    requests[(process.id, api)] = count
        return Reading(time.monotonic(), cpu, requests)


def _report(before: Reading, after: Reading, cpu: tuple[str, float, int],
            requests: tuple[str, float]) -> dict[str, Any]:
    """CPU by process and in all (``cpu``: its key, the scale of a second, the digits
    kept), the cores kept busy on average, requests served by process and API (those
    served at all; ``requests``: their key and the scale of one)."""
    used = {key: after.cpu_s[key] - before.cpu_s.get(key, 0.0) for key in after.cpu_s}
    served = {key: count - before.requests.get(key, 0.0)
              for key, count in sorted(after.requests.items())}
    total = sum(used.values())
    cpu_key, cpu_scale, digits = cpu
    requests_key, requests_scale = requests
    return {
        cpu_key: {**{key: round(value * cpu_scale, digits) for key, value in sorted(used.items())},
                  "total": round(total * cpu_scale, digits)},
        "cores_busy": round(total / max(after.at - before.at, 1e-9), 2),
        requests_key: {f"{process} {api}": round(count * requests_scale, 2)
                       for (process, api), count in served.items() if count > 0},
    }


def cost(before: Reading, after: Reading, records: int) -> dict[str, Any]:
    """CPU µs per record by process and in all, the cores that kept busy on average,
    and requests served per 1000 records by process and API (those served at all)."""
    return _report(before, after, ("cpu_us_per_record", 1e6 / records, 1),
                   ("requests_per_1000_records", 1000 / records))


def cost_per_operation(before: Reading, after: Reading, operations: int) -> dict[str, Any]:
    """The same per operation (a transaction, say): CPU ms by process and in all, the
    cores kept busy, requests served by process and API."""
    return _report(before, after, ("cpu_ms", 1e3 / operations, 2),
                   ("requests", 1 / operations))
