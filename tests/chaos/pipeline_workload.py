"""The consume-transform-produce pipeline: exactly one output per input.

An idempotent :class:`~tests.chaos.workload.Writer` feeds the input topic. Workers
(threads, one transactional id each) read it in the consumer group
``chaos-pipeline`` with ``isolation_level="read_committed"`` and no auto-commit, and
for every poll's records write, in one transaction, one output per input to the same
partition of the output topic together with the group's next offsets
(``send_offsets_to_transaction`` with ``consumer.group_metadata()``: KIP-447, so a
worker whose partitions moved in a rebalance is fenced by the generation).

A transaction that did not commit is aborted, and the worker goes back to the group's
committed offsets of its partitions (Kafka's rule: the consumer's positions are past
the records of the aborted transaction); when they cannot be fetched, it replaces its
consumer, which starts from them once the group assigns it partitions. Each
transaction is a ``Txn`` of the history (its outputs are its records), so
``txn_checker.py`` checks them like the transactional workload's, and
``pipeline_checker.py`` counts outputs per input.
"""

from __future__ import annotations

import threading

from strand import Consumer, Producer, TopicPartition

from .history import COMMITTED, Txn, TxnRecord
from .pipeline_checker import output_value
from .txn_workload import TransactionalProducer, TxnSettings, send_all
from .workload import describe

GROUP = "chaos-pipeline"


class PipelineWorker(threading.Thread):
    def __init__(self, index: int, bootstrap: str, source: str, output: str,
                 sink: list[Txn], errors: list[str], stop: threading.Event,
                 settings: TxnSettings | None = None) -> None:
        super().__init__(name=f"chaos-pipe-{index}", daemon=True)
        self.bootstrap, self.source, self.output = bootstrap, source, output
        self.sink, self.errors, self.stop_event = sink, errors, stop
        self.producer = TransactionalProducer(f"chaos-pipe-{index}", bootstrap,
                                              settings or TxnSettings(), errors, stop)
        self.error: BaseException | None = None
        self.number = 0

    def _consumer(self) -> Consumer:
        consumer = Consumer(self.bootstrap, group_id=GROUP, isolation_level="read_committed",
                            enable_auto_commit=False, auto_offset_reset="earliest",
                            session_timeout_ms=6000, heartbeat_interval_ms=500,
                            request_timeout_ms=10_000, fetch_max_wait_ms=300,
                            client_id=f"chaos-{self.producer.txn_id}")
        consumer.subscribe([self.source])
        return consumer

    def run(self) -> None:
        consumer: Consumer | None = None
        try:
            if not self.producer.replace():
                return
            while not self.stop_event.is_set():
                if consumer is None:
                    consumer = self._consumer()
                try:
                    batches = consumer.poll(timeout_ms=300)
                except Exception as exc:  # a new consumer rejoins the group
                    self.errors.append(f"{self.producer.txn_id} poll: {describe(exc)}")
                    consumer.close()
                    consumer = None
                    self.stop_event.wait(0.5)
                    continue
                if any(batches.values()):
                    try:
                        self._transform(consumer, batches)
                    except Exception as exc:  # a rewind that failed: a new consumer
                        self.errors.append(f"{self.producer.txn_id} rewind: {describe(exc)}")
                        consumer.close()
                        consumer = None
                if self.producer.producer is None:
                    return  # stopped while replacing it
        except BaseException as exc:  # reported by the runner: the workload broke
            self.error = exc
        finally:
            if consumer is not None:
                consumer.close()
            self.producer.close()

    def _transform(self, consumer: Consumer, batches: dict[TopicPartition, list]) -> None:  # type: ignore[type-arg]
        label = f"{self.producer.label}.{self.number}"
        records = [(tp, r) for tp, rs in batches.items() for r in rs]
        txn = self.producer.plan(self.number, "commit", [
            TxnRecord(self.output, tp.partition, output_value(
                "<null>" if r.value is None else r.value.decode(), label))
            for tp, r in records])
        self.number += 1
        self.sink.append(txn)
        offsets = {tp: rs[-1].offset + 1 for tp, rs in batches.items() if rs}

        def body(producer: Producer) -> None:
            send_all(txn, producer)
            self.producer.repeated(producer.send_offsets_to_transaction, offsets,
                                   consumer.group_metadata())

        self.producer.run(txn, body)
        if txn.outcome != COMMITTED:
            self._rewind(consumer, list(offsets))

    def _rewind(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        """Back to the group's committed offsets (the log start if none) of the
        partitions still assigned: their records are processed again. Raises when the
        committed offsets cannot be had: the caller replaces the consumer, which
        starts from them when the group assigns it partitions."""
        for tp in tps:
            if tp in consumer.assignment():
                committed = consumer.committed(tp)
                if committed is None:
                    consumer.seek_to_beginning(tp)
                else:
                    consumer.seek(tp, committed)


def caught_up(bootstrap: str, source: str, partitions: int) -> bool:
    """Whether the group's committed offsets reached the input's high watermarks."""
    tps = [TopicPartition(source, p) for p in range(partitions)]
    with Consumer(bootstrap, group_id=GROUP, isolation_level="read_committed",
                  enable_auto_commit=False, request_timeout_ms=5_000) as probe:
        ends = probe.end_offsets(tps, timeout_ms=5_000)
        return all((probe.committed(tp) or 0) >= ends[tp] for tp in tps)
