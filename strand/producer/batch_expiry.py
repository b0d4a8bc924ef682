"""Batches the producer fails while they are still queued, never sent (Kafka's
``RecordAccumulator.expiredBatches`` and the sender's handling of unknown
partitions): batches past ``delivery_timeout_ms`` (no leader, cluster unreachable),
batches for partitions that do not exist, and the queued batches of a transaction
that is aborting. They are drained from the accumulator under a pseudo leader and
failed with a typed error that says why."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from strand.client.metadata import MetadataCache
from strand.errors import (
    ErrorCode,
    RequestTimedOutError,
    StrandError,
    UnknownTopicOrPartitionError,
    error_for,
)
from strand.producer.producer_batch import ProducerBatch, TopicPartition
from strand.producer.record_accumulator import RecordAccumulator
from strand.producer.transaction_manager import TransactionManager

__all__ = ["QueuedBatchFailer", "only_under"]

_EXPIRY_NODE = -1000  # a pseudo leader under which failed batches are drained


def only_under(partitions: set[TopicPartition], node: int
               ) -> Callable[[TopicPartition], int | None]:
    """A ``leader_of`` that puts ``partitions`` under ``node`` and hides the others, so
    that ``drain()`` takes exactly the batches asked for."""
    return lambda tp: node if tp in partitions else None


class QueuedBatchFailer:
    """Fails queued batches of one producer; ``fail`` completes a batch for good."""

    def __init__(self, accumulator: RecordAccumulator, metadata: MetadataCache,
                 fail: Callable[[ProducerBatch, StrandError], None],
                 clock: Callable[[], float], *, delivery_timeout_ms: float,
                 metadata_wait_ms: float, tm: TransactionManager | None) -> None:
        self.accumulator = accumulator
        self.metadata = metadata
        self.fail = fail
        self.clock = clock
        self.delivery_timeout_ms = delivery_timeout_ms
        self.metadata_wait_ms = metadata_wait_ms
        self.tm = tm

    def fail_missing_partitions(self, tps: Iterable[TopicPartition], now: float) -> None:
        """Batches for partitions that do not exist (an explicit partition sent before
        the metadata was known) fail with UnknownTopicOrPartitionError instead of
        expiring: at once for a partition beyond the topic's count, and after
        ``metadata_wait_ms`` (the producer's max_block_ms, what a keyed send would have
        waited) for a topic the cluster does not know; at once, with the typed error,
        for a topic the producer's principal may not describe."""
        metadata = self.metadata
        missing: set[TopicPartition] = set()
        unknown: set[TopicPartition] = set()
        refused: dict[TopicPartition, str] = {}
        for tp in tps:
            info = metadata.topic(tp[0])
            if info is None:
                continue
            if info.error == ErrorCode.NONE:
                if info.partitions and not 0 <= tp[1] < len(info.partitions):
                    missing.add(tp)
            elif info.error == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                refused[tp] = info.error_message
            elif info.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                queued = self.accumulator.queued_batches(tp)
                if queued and now - queued[0].created_ms >= self.metadata_wait_ms:
                    unknown.add(tp)
        if missing:
            self.drain_and_fail(missing, lambda tp, n: UnknownTopicOrPartitionError(
                f"{n} record(s) for {tp[0]}-{tp[1]}: topic {tp[0]!r} has "
                f"{metadata.partition_count(tp[0])} partitions"))
        if refused:
            self.drain_and_fail(set(refused), lambda tp, n: error_for(
                ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                f"{n} record(s) for {tp[0]}-{tp[1]}: {refused[tp]}"))
        if unknown:
            wait = self.metadata_wait_ms
            self.drain_and_fail(unknown, lambda tp, n: UnknownTopicOrPartitionError(
                f"{n} record(s) for {tp[0]}-{tp[1]}: topic {tp[0]!r} does not exist "
                f"(waited max_block_ms={wait:g})"),
                lambda batch: now - batch.created_ms >= wait)

    def expire(self, partitions: Iterable[TopicPartition], now: float) -> None:
        """Fail the batches of ``partitions`` queued longer than delivery_timeout_ms."""
        timeout = self.delivery_timeout_ms
        expired = set()
        for tp in list(partitions):
            queued = self.accumulator.queued_batches(tp)
            if queued and now - queued[0].created_ms >= timeout:
                expired.add(tp)
        if expired:
            tm = self.tm
            why = ""
            if tm is not None and not tm.has_producer_id:
                why = (f"; the idempotent producer has no producer id yet (InitProducerId: "
                       f"{tm.init_error or 'no answer'}): run a transaction coordinator, "
                       "or set enable_idempotence=False")
            self.drain_and_fail(expired, lambda tp, n: RequestTimedOutError(
                f"expiring {n} record(s) for {tp[0]}-{tp[1]}: {timeout:g} ms "
                f"(delivery_timeout_ms) passed since the batch was created{why}"),
                lambda batch: now - batch.created_ms >= timeout)

    def drain_and_fail(self, tps: set[TopicPartition],
                       error: Callable[[TopicPartition, int], StrandError],
                       still: Callable[[ProducerBatch], bool] | None = None) -> None:
        """Fail the queued batches of ``tps`` (while ``still(head)`` holds)."""
        acc = self.accumulator
        for _ in range(10_000):  # bounded: each round removes one batch per partition
            if not tps:
                return
            drained = acc.drain([_EXPIRY_NODE], 1 << 62,
                                leader_of=only_under(tps, _EXPIRY_NODE),
                                now=self.clock(), to_send=False)[_EXPIRY_NODE]
            if not drained:
                return
            for batch in drained:
                self.fail(batch, error(batch.topic_partition, batch.record_count))
            remaining = set()
            for tp in tps:
                queued = acc.queued_batches(tp)
                if queued and (still is None or still(queued[0])):
                    remaining.add(tp)
            tps = remaining
