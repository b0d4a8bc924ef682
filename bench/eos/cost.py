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


def cost(before: Reading, after: Reading, records: int) -> dict[str, Any]:
    """CPU µs per record by process and in all, the cores that kept busy on average,
    and requests served per 1000 records by process and API (those served at all)."""
    used = {key: after.cpu_s[key] - before.cpu_s.get(key, 0.0) for key in after.cpu_s}
    total = sum(used.values())
    served = {key: count - before.requests.get(key, 0.0)
              for key, count in sorted(after.requests.items())}
    return {
        "cpu_us_per_record": {**{key: round(value * 1e6 / records, 1)
                                 for key, value in sorted(used.items())},
                              "total": round(total * 1e6 / records, 1)},
        "cores_busy": round(total / max(after.at - before.at, 1e-9), 2),
        "requests_per_1000_records": {f"{process} {api}": round(count * 1000 / records, 2)
                                      for (process, api), count in served.items()
                                      if count > 0},
    }
