"""What one commit costs the cluster, apart from the records it carries.

Two SDK producers (acks=all, linger 0) write the same thing, one record to each of
``partitions`` partitions, ``iterations`` times per round: an idempotent one that
then calls ``flush()`` (the records alone), and a transactional one that wraps them
in ``begin_transaction()`` ... ``commit_transaction()``. Rounds alternate the two,
in an order rotated each round. Each side reports, per iteration, the CPU every
process used and the requests each service served (:func:`.cost.cost_per_operation`);
their difference is what the transaction adds: EndTxn through the gateway to the
coordinator, its replicated PrepareCommit, a COMMIT marker on every partition and the
follower fetches that replicate them. At a commit every 100 ms, that CPU per commit
against what the cluster spends on 100 ms of plain produce is the transactional
produce ratio's budget (the ``produce`` section)."""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from bench_support import err

from strand import Admin, Producer

from .cost import CostMeter, Reading, cost_per_operation
from .stats import rotated, spread

RECORDS_ONLY, TRANSACTION = "records_only", "transaction"


def _timed(meter: CostMeter, iterations: int, step: Callable[[], None],
           settle: Callable[[], Reading]) -> dict[str, Any]:
    """``iterations`` of ``step``, then ``settle`` (outside the wall time, inside the
    CPU), whose reading ends the side's: the work a step leaves running once it has
    returned belongs to its side."""
    before = meter.read()
    began = time.perf_counter()
    for _ in range(iterations):
        step()
    seconds = time.perf_counter() - began
    result = cost_per_operation(before, settle(), iterations)
    result["ms_per_iteration"] = round(seconds * 1e3 / iterations, 3)
    return result


def _extra(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per process, the median over the rounds of transaction minus records only."""
    processes = sorted(set().union(*(r[TRANSACTION]["cpu_ms"] for r in rows)))
    return {process: round(statistics.median(
        r[TRANSACTION]["cpu_ms"].get(process, 0.0) - r[RECORDS_ONLY]["cpu_ms"].get(process, 0.0)
        for r in rows), 2) for process in processes}


def _leaders(bootstrap: str, topic: str) -> int:
    with Admin(bootstrap) as admin:
        return len({p.leader for p in admin.describe_topics([topic])[0].partitions})


def _markers_served(reading: Reading) -> float:
    return sum(n for (_, api), n in reading.requests.items() if api == "WriteTxnMarkers")


class MarkerWatch:
    """Waits until every commit's markers are on its partitions' leaders (one
    WriteTxnMarkers to each per commit, counted where they are served).
    commit_transaction() returns once the coordinator has logged PrepareCommit; the
    markers follow, and would otherwise be counted in the next side's reading. (The
    coordinator's state cannot tell: a producer committing in a loop has its next
    transaction open by then, so its id is Ongoing, not CompleteCommit.)"""

    def __init__(self, meter: CostMeter, leaders: int) -> None:
        self.meter = meter
        self.leaders = leaders
        self.commits = 0
        self.served_before = _markers_served(meter.read())

    def wait(self, timeout_s: float = 60.0) -> Reading:
        """The first reading with them all served."""
        deadline = time.monotonic() + timeout_s
        while True:
            reading = self.meter.read()
            if _markers_served(reading) - self.served_before >= self.commits * self.leaders:
                return reading
            if time.monotonic() > deadline:
                raise TimeoutError(f"the markers of {self.commits} commits to "
                                   f"{self.leaders} leaders were not all written within "
                                   f"{timeout_s} s")
            time.sleep(0.005)


def commit_cost_section(bootstrap: str, topic: str, partitions: int, iterations: int,
                        rounds: int, record_size: int, meter: CostMeter) -> dict[str, Any]:
    value = b"x" * record_size
    markers = MarkerWatch(meter, _leaders(bootstrap, topic))
    settings: dict[str, Any] = {"acks": "all", "linger_ms": 0}
    plain = Producer(bootstrap, enable_idempotence=True, **settings)
    txn = Producer(bootstrap, transactional_id=f"eos-commit-cost-{uuid.uuid4().hex[:8]}",
                   **settings)

    def send_all(producer: Producer) -> None:
        for partition in range(partitions):
            producer.send(topic, value=value, partition=partition)

    def records_only() -> None:
        send_all(plain)
        plain.flush()

    def transaction() -> None:
        txn.begin_transaction()
        send_all(txn)
        txn.commit_transaction()
        markers.commits += 1

    steps = {RECORDS_ONLY: records_only, TRANSACTION: transaction}
    settles = {RECORDS_ONLY: meter.read, TRANSACTION: markers.wait}
    measured: list[dict[str, Any]] = []
    try:
        txn.init_transactions()
        for step in steps.values():  # warm-up: connections, metadata, the first writes
            for _ in range(min(iterations, 20)):
                step()
        markers.wait()
        for i in range(rounds):
            row: dict[str, Any] = {"round": i, "order": rotated(list(steps), i)}
            for name in row["order"]:
                row[name] = _timed(meter, iterations, steps[name], settles[name])
            row["transaction_adds_cpu_ms"] = round(
                row[TRANSACTION]["cpu_ms"]["total"] - row[RECORDS_ONLY]["cpu_ms"]["total"], 2)
            measured.append(row)
            err.print(f"commit cost round {i + 1}/{rounds}: "
                      f"{row['transaction_adds_cpu_ms']:.1f} ms of CPU per commit")
    finally:
        plain.close()
        txn.close()
    return {
        "parameters": {"partitions": partitions, "records_per_partition": 1,
                       "iterations_per_round": iterations, "rounds": rounds,
                       "record_size": record_size, "topic": topic, "acks": "all",
                       RECORDS_ONLY: "an idempotent producer: one record to each "
                                     "partition, then flush()",
                       TRANSACTION: "a transactional producer: begin, the same records, "
                                    "commit_transaction()"},
        "rounds": measured,
        "cpu_ms_per_iteration": {name: spread([r[name]["cpu_ms"]["total"] for r in measured])
                                 for name in steps},
        "ms_per_iteration": {name: spread([r[name]["ms_per_iteration"] for r in measured])
                             for name in steps},
        "transaction_adds_cpu_ms": spread([r["transaction_adds_cpu_ms"] for r in measured]),
        "transaction_adds_cpu_ms_by_process": _extra(measured),
    }
