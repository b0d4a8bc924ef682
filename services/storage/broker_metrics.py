"""A storage node's metrics under the names operators know from Kafka's brokers.

Per topic, what clients write and read (``BrokerTopicMetrics``): ``BytesIn``,
``MessagesIn``, ``BytesOut`` and records out, counted where they happen (the
leader's appends, consumers' fetches; replication traffic is not client traffic and
is left out, as in Kafka). Per node, the state of its replicas (``ReplicaManager``):
partitions, leaders, under-replicated and under-min-ISR partitions (counted by the
leader, so a sum over the nodes counts each partition once), ISR shrinks and
expands of the partitions it leads, whoever made them (its own proposals, or the
controller taking a dead or stopping node out): each change is counted once, when
the leader first applies it. The gauges are read when the metrics are scraped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from strand.records.batch import HEADER_SIZE, read_header

if TYPE_CHECKING:
    from services.storage.replica import Replica

__all__ = ["BrokerMetrics", "records_in", "replica_counts"]


def replica_counts(replicas: Iterable[Replica]) -> dict[str, int]:
    """The node's replicas as the gauges count them."""
    partitions = leaders = under_replicated = under_min_isr = 0
    for replica in replicas:
        if replica.closing:
            continue
        partitions += 1
        state = replica.leader_state
        if state is None:
            continue
        leaders += 1
        in_sync = len(state.isr)
        if in_sync < len(replica.record.replicas):
            under_replicated += 1
        if in_sync < replica.log.config.min_insync_replicas:
            under_min_isr += 1
    return {"partitions": partitions, "leaders": leaders,
            "under_replicated_partitions": under_replicated,
            "under_min_isr_partitions": under_min_isr}


def records_in(data: bytes | memoryview) -> int:
    """How many records the batches of ``data`` hold (their headers' counts)."""
    view = memoryview(data)
    count = pos = 0
    while len(view) - pos >= HEADER_SIZE:
        header = read_header(view, pos)
        if header.size_in_bytes < HEADER_SIZE:
            break
        count += header.record_count
        pos += header.size_in_bytes
    return count


class BrokerMetrics:
    """The instruments; ``replicas`` is read at scrape time (the node's replica map).

    The per-topic totals are plain counts read by observable counters when scraped:
    an OpenTelemetry counter's ``add`` with attributes costs some 10 µs, too much
    on every append and fetch."""

    def __init__(self, source: metrics.Meter, replicas: Mapping[Any, Replica]) -> None:
        self._replicas = replicas
        # topic → [bytes in, records in, bytes out, records out]
        self._topics: dict[str, list[int]] = {}
        self._isr = [0, 0]  # shrinks, expands
        for index, (name, description) in enumerate((
                ("bytes_in", "bytes producers appended to partitions this node leads "
                             "(BytesInPerSec)"),
                ("messages_in", "records producers appended (MessagesInPerSec)"),
                ("bytes_out", "bytes sent to consumers, replication excluded "
                              "(BytesOutPerSec)"),
                ("messages_out", "records sent to consumers, replication excluded"))):
            source.create_observable_counter(
                f"strand.broker.topic.{name}", callbacks=[self._per_topic(index)],
                description=description)
        for index, (name, description) in enumerate((
                ("isr_shrinks", "ISR shrinks of the partitions this node leads "
                                "(IsrShrinksPerSec)"),
                ("isr_expands", "ISR expansions of the partitions this node leads "
                                "(IsrExpandsPerSec)"))):
            source.create_observable_counter(
                f"strand.replica_manager.{name}", callbacks=[self._isr_count(index)],
                description=description)
        for name, description in (
                ("partitions", "replicas this node hosts (PartitionCount)"),
                ("leaders", "partitions this node leads (LeaderCount)"),
                ("under_replicated_partitions",
                 "partitions this node leads whose ISR is smaller than their replica set"),
                ("under_min_isr_partitions",
                 "partitions this node leads whose ISR is below min.insync.replicas")):
            source.create_observable_gauge(
                f"strand.replica_manager.{name}", callbacks=[self._observer(name)],
                description=description)

    def _per_topic(self, index: int) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            # Scrapes run on the exporter's thread: copies, never the live dict.
            return [Observation(counts[index], {"topic": topic})
                    for topic, counts in list(self._topics.items())]
        return observe

    def _isr_count(self, index: int) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(self._isr[index])]  # present from the start, as Kafka's
        return observe

    def _observer(self, name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            counts = replica_counts(list(self._replicas.values()))
            return [Observation(counts[name])]
        return observe

    def _counts(self, topic: str) -> list[int]:
        counts = self._topics.get(topic)
        if counts is None:
            counts = self._topics[topic] = [0, 0, 0, 0]
        return counts

    def appended(self, topic: str, records: int, size: int) -> None:
        counts = self._counts(topic)
        counts[0] += size
        counts[1] += records

    def fetched(self, topic: str, data: bytes) -> None:
        if data:
            counts = self._counts(topic)
            counts[2] += len(data)
            counts[3] += records_in(data)

    def isr_changed(self, old: Sequence[int], new: Sequence[int]) -> None:
        if len(new) < len(old):
            self._isr[0] += 1
        elif len(new) > len(old):
            self._isr[1] += 1
