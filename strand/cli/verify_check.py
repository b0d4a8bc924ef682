"""What ``strand verify consume`` makes of what it read (Kafka's VerifiableConsumer and
its checks, as plain code): the sequence numbers one ``strand verify produce`` run
wrote, against those it was told were acknowledged — lost, duplicated, out of order
within a partition, and the end-to-end latency."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["Tally", "percentile"]


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return round(sorted_values[index], 3)


@dataclass
class Tally:
    """Records of one run, as they are read (partition by partition, in offset order)."""

    seen: dict[int, int] = field(default_factory=dict)  # sequence -> times read
    last_in_partition: dict[int, int] = field(default_factory=dict)
    out_of_order: int = 0
    latencies_ms: list[float] = field(default_factory=list)

    def add(self, partition: int, sequence: int, latency_ms: float | None = None) -> None:
        self.seen[sequence] = self.seen.get(sequence, 0) + 1
        last = self.last_in_partition.get(partition)
        if last is not None and sequence < last:
            self.out_of_order += 1  # one producer: a partition's sequences only grow
        self.last_in_partition[partition] = max(sequence, last if last is not None else -1)
        if latency_ms is not None:
            self.latencies_ms.append(latency_ms)

    def report(self, acknowledged: Iterable[int]) -> dict[str, object]:
        """``acknowledged``: what the producer was told was written; any of it not read
        is lost (records not acknowledged may or may not be there: not counted)."""
        acked = set(acknowledged)
        lost = sorted(acked - self.seen.keys())
        duplicated = sorted(s for s, n in self.seen.items() if n > 1)
        latencies = sorted(self.latencies_ms)
        return {
            "acknowledged": len(acked),
            "read": sum(self.seen.values()),
            "distinct": len(self.seen),
            "lost": len(lost),
            "lost_sample": lost[:20],
            "duplicated": len(duplicated),
            "duplicated_sample": duplicated[:20],
            "out_of_order": self.out_of_order,
            "unacknowledged_but_read": len(self.seen.keys() - acked),
            "latency_ms": {"p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99),
                           "max": latencies[-1] if latencies else 0.0},
        }
