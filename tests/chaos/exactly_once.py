"""The exactly-once workloads of a run, started and stopped together by the runner:

- the transactional producers (``txn_workload.py``) over the topics ``chaos-txa``
  (3 partitions) and ``chaos-txb`` (2);
- the pipeline (``pipeline_workload.py``): an idempotent writer feeding ``chaos-in``,
  workers writing ``chaos-out``;
- a read_committed reader (``txn_reader.py``) following all of the transactional
  topics and the pipeline's output, and their final read-back.

(The chaos topic's writers are the idempotent workload: ``ChaosConfig.idempotence``.)
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from strand import Admin, NewTopic

from .harness import ChaosCluster
from .history import History
from .pipeline_workload import PipelineWorker, caught_up
from .txn_reader import CommittedReader, Tp, read_back_committed
from .txn_workload import TxnSettings, TxnWriter
from .workload import ProducerSettings, Writer

TXN_TOPICS = {"chaos-txa": 3, "chaos-txb": 2}
PIPELINE_INPUT, PIPELINE_OUTPUT, PIPELINE_PARTITIONS = "chaos-in", "chaos-out", 3


@dataclass(frozen=True)
class ExactlyOnceSettings:
    transactional_producers: int = 2  # 0: no transactional workload
    pipeline_workers: int = 2  # 0: no pipeline
    pipeline_rate: float = 20.0  # input records per second
    txn: TxnSettings = field(default_factory=TxnSettings)
    drain_timeout: float = 60.0  # s for the pipeline to process every input after the run


class ExactlyOnceWorkloads:
    def __init__(self, cluster: ChaosCluster, settings: ExactlyOnceSettings, history: History,
                 rng: random.Random, errors: list[str], say: Callable[[str], None]) -> None:
        self.cluster, self.settings, self.history = cluster, settings, history
        self.errors, self.say = errors, say
        self.stop_producers, self.stop_pipeline, self.stop_readers = (
            threading.Event(), threading.Event(), threading.Event())
        bootstrap = cluster.bootstrap
        tps = {t: [(t, p) for p in range(n)] for t, n in TXN_TOPICS.items()}
        first, second = tps.values()
        # What the confluent-kafka transactional producers write too (kafka_workload.py).
        self.txn_topics = (first, second) if settings.transactional_producers else None
        self.writers = [TxnWriter(f"chaos-tx-{i}", bootstrap, (first, second), history.txns,
                                  history.txn_errors, self.stop_producers,
                                  random.Random(rng.random()), settings.txn)
                        for i in range(settings.transactional_producers)]
        self.workers = [PipelineWorker(i, bootstrap, PIPELINE_INPUT, PIPELINE_OUTPUT,
                                       history.txns, history.txn_errors, self.stop_pipeline,
                                       settings.txn)
                        for i in range(settings.pipeline_workers)]
        self.feeder = (Writer("in", bootstrap, PIPELINE_INPUT, PIPELINE_PARTITIONS,
                              settings.pipeline_rate, history.pipeline_inputs,
                              self.stop_producers, ProducerSettings(enable_idempotence=True))
                       if self.workers else None)
        self.tps: list[Tp] = [tp for t in tps.values() for tp in t] if self.writers else []
        if self.workers:
            history.pipeline_output = PIPELINE_OUTPUT
            self.tps += [(PIPELINE_OUTPUT, p) for p in range(PIPELINE_PARTITIONS)]
        self.reader = CommittedReader("committed", bootstrap, self.tps, history.txn_reads,
                                      history.txn_errors, self.stop_readers)
        cluster.txn_ids = tuple(w.producer.txn_id for w in self.writers) + tuple(
            w.producer.txn_id for w in self.workers)

    @property
    def enabled(self) -> bool:
        return bool(self.tps)

    def create_topics(self, replication_factor: int, min_insync_replicas: int) -> None:
        topics = dict(TXN_TOPICS) if self.writers else {}
        if self.workers:
            topics |= {PIPELINE_INPUT: PIPELINE_PARTITIONS, PIPELINE_OUTPUT: PIPELINE_PARTITIONS}
        if not topics:
            return
        with Admin(self.cluster.bootstrap, request_timeout_ms=10_000) as admin:
            admin.create_topics([NewTopic(name, partitions, replication_factor, config={
                "min.insync.replicas": str(min_insync_replicas)})
                for name, partitions in topics.items()])

    def threads(self) -> list[threading.Thread]:
        if not self.enabled:
            return []
        return [*self.writers, *self.workers, *([self.feeder] if self.feeder else []),
                self.reader]

    def start(self) -> None:
        for thread in self.threads():
            thread.start()

    def abort(self) -> None:
        for event in (self.stop_producers, self.stop_pipeline, self.stop_readers):
            event.set()

    def stop_writing(self) -> None:
        """Stop the transactional producers and the pipeline's feeder (the pipeline
        goes on until :meth:`drain`)."""
        self.stop_producers.set()
        for thread in [*self.writers, *([self.feeder] if self.feeder else [])]:
            thread.join(60)
        for writer in self.writers:
            if writer.error is not None:
                self.errors.append(f"{writer.producer.txn_id}: {writer.error!r}")
            self.errors.extend(writer.fencing_failures)
        if self.feeder is not None and self.feeder.error is not None:
            self.errors.append(f"pipeline feeder: {self.feeder.error!r}")

    def drain(self) -> None:
        """Let the pipeline process every input (bounded), then stop it."""
        if self.workers:
            self.say("letting the pipeline process its input")
            deadline = time.monotonic() + self.settings.drain_timeout
            while time.monotonic() < deadline:
                try:
                    if caught_up(self.cluster.bootstrap, PIPELINE_INPUT, PIPELINE_PARTITIONS):
                        break
                except Exception as exc:  # the cluster still settling: look again
                    self.say(f"pipeline progress not known yet: {exc}")
                time.sleep(1)
            else:
                self.say(f"the pipeline did not catch up within {self.settings.drain_timeout:g}s")
        self.stop_pipeline.set()
        for worker in self.workers:
            worker.join(60)
            if worker.error is not None:
                self.errors.append(f"{worker.producer.txn_id}: {worker.error!r}")

    def read_back(self, timeout: float) -> None:
        self.stop_readers.set()
        if not self.enabled:
            return
        self.reader.join(30)
        self.say("reading the transactional topics back (read_committed)")
        self.history.txn_final_complete = read_back_committed(
            self.cluster.bootstrap, self.tps, self.history.txn_reads, timeout, self.say)


def save_txn_history(history: History, path: Path) -> None:
    """Every transaction (intent, outcome, records with their offsets, times from the
    start of the run) and the transactional clients' errors: to study a kept run."""
    def shifted(t: float) -> float:
        return round(t - history.t_start, 3) if t >= 0 else t

    path.write_text(json.dumps({
        "transactions": [asdict(t) | {"t_begin": shifted(t.t_begin), "t_end": shifted(t.t_end)}
                         for t in history.txns],
        "errors": history.txn_errors}, indent=1))
