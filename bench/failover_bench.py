"""Leader failover time: SIGKILL a partition's leader N times while a producer writes
to that partition (acks=all, RF 3, min.insync.replicas=2), and measure how long
until produce to the partition succeeds again; then SIGTERM leaders (controlled
shutdown) and count failed produces, which must be zero.

Each round: the producer sends one record at a time (each waits for its ack, so the
first ack after the kill is the moment produce works again); the partition's
leader is killed; the time from the kill to the first record acknowledged after it
is the failover time. The node is started again and the round ends once it is
back in the ISR, so every round starts from a full ISR. Target (issue 4): max
failover time <= 2 x the lease TTL.

    python bench/failover_bench.py --kills 20 --terms 5 --lease-ttl 3 --json
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

from strand import Admin, NewTopic, Producer, devcluster
from strand.launcher import Cluster, Launch, wait_until

TOPIC = "failover"
err = Console(stderr=True)


@dataclass
class Writer:
    """Sends to partition 0 one record at a time; remembers when each was acked."""

    bootstrap: str
    acks: list[tuple[float, float]] = field(default_factory=list)  # (sent, acked)
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with Producer(self.bootstrap, acks="all", linger_ms=0, request_timeout_ms=3000,
                      retry_backoff_ms=50, delivery_timeout_ms=60_000,
                      max_in_flight_requests=1) as producer:
            i = 0
            while not self.stop.is_set():
                sent = time.monotonic()
                future = producer.send(TOPIC, b"r%d" % i, partition=0)
                try:
                    future.result(timeout=70)
                except Exception as exc:
                    self.failures.append(f"{type(exc).__name__}: {exc}")
                else:
                    self.acks.append((sent, time.monotonic()))
                i += 1

    def first_ack_after(self, moment: float, timeout: float) -> float:
        """When the first record sent after ``moment`` was acknowledged (an answer
        already on its way when the leader died does not count)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            later = [acked for sent, acked in self.acks[-50:] if sent >= moment]
            if later:
                return min(later)
            time.sleep(0.01)
        raise TimeoutError(f"no produce succeeded within {timeout} s of the fault")


def describe(bootstrap: str) -> tuple[int | None, tuple[int, ...]]:
    with Admin(bootstrap) as admin:
        part = admin.describe_topics([TOPIC])[0].partitions[0]
    return part.leader, part.isr


def one_round(cluster: Cluster, writer: Writer, sig: int) -> tuple[float, int]:
    """Kill (or stop) the leader; returns (seconds until produce works, node)."""
    bootstrap = cluster.bootstrap
    wait_until(lambda: len(describe(bootstrap)[1]) == 3 and describe(bootstrap)[0] is not None,
               60, "a full ISR", interval=0.1)
    leader = describe(bootstrap)[0]
    assert leader is not None
    time.sleep(0.3)  # some acks before the fault
    node = cluster.storage[leader - 1]  # storage node ids count from 1
    moment = time.monotonic()
    node.signal(sig)
    recovered = writer.first_ack_after(moment, 60) - moment
    wait_until(lambda: not node.running(), 120, f"storage-{leader} to exit")
    node.start(60)  # again: same port, same data
    return recovered, leader


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--terms", type=int, default=5)
    parser.add_argument("--lease-ttl", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="strand-failover-"))
    # The dev cluster's shape, as children of this process (they die with it).
    cluster = Cluster(devcluster.spec(directory, lease_ttl=args.lease_ttl,
                                      launch=Launch(die_with_parent=True)),
                      on_spawn=lambda process: err.print(f"started {process.id}"))
    try:
        err.print(f"starting the cluster in {directory}")
        cluster.start()
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])
        writer = Writer(cluster.bootstrap)
        thread = threading.Thread(target=writer.run, daemon=True)
        thread.start()
        kills: list[float] = []
        term_failures_before = 0
        with Progress(console=err, transient=True) as progress:
            task = progress.add_task("leader SIGKILLs", total=args.kills)
            for _ in range(args.kills):
                kills.append(one_round(cluster, writer, signal.SIGKILL)[0])
                progress.advance(task)
            kill_failures = len(writer.failures)
            term_failures_before = len(writer.failures)
            task = progress.add_task("leader SIGTERMs", total=args.terms)
            terms = []
            for _ in range(args.terms):
                terms.append(one_round(cluster, writer, signal.SIGTERM)[0])
                progress.advance(task)
        writer.stop.set()
        thread.join(90)
        term_failures = len(writer.failures) - term_failures_before
    finally:
        cluster.stop()
    result = {
        "lease_ttl_s": args.lease_ttl,
        "sigkill": {"rounds": len(kills), "p50_s": round(statistics.median(kills), 3),
                    "all_s": [round(k, 3) for k in kills],
                    "max_s": round(max(kills), 3), "min_s": round(min(kills), 3),
                    "failed_produces": kill_failures},
        "sigterm": {"rounds": len(terms), "p50_s": round(statistics.median(terms), 3),
                    "max_s": round(max(terms), 3), "failed_produces": term_failures},
        "records_acked": len(writer.acks),
        "target_max_s": 2 * args.lease_ttl,
        "met": max(kills) <= 2 * args.lease_ttl and term_failures == 0,
        "failures": writer.failures[:5],
    }
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0 if result["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
