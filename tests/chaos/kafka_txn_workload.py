"""The transactional workload through confluent-kafka (librdkafka) and the gateway's
Kafka listener: a producer with a transactional id writes transactions over the same
topics as the SDK's transactional producers (``chaos-txa``, ``chaos-txb``), recorded
into ``History.txns`` like theirs, so that the same checks (aborted reads, torn, past
LSO, txns lost, divergence) judge them; a read_committed confluent-kafka consumer
follows those topics (its reads are ``History.txn_reads``, sessions ``ktxn…``).

librdkafka ends transactions with EndTxn below v5: the coordinator keeps the
producer's epoch, and one instance runs transaction after transaction. Each
transaction is committed, deliberately aborted, or fenced (its records flushed, a new
instance's ``init_transactions()`` bumps the epoch, the old one's commit must fail
with a fatal fenced error). An error on the way: abortable (``txn_requires_abort``)
aborts the transaction (ABORTED once the abort returns); retriable repeats the call;
anything else replaces the instance, and the transaction is AMBIGUOUS.
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition

from .history import (
    ABORTED,
    AMBIGUOUS,
    COMMITTED,
    FENCED,
    KAFKA_TXN_READER,
    Txn,
    TxnRead,
    TxnRecord,
)
from .kafka_clients import CLIENT_LOG, describe
from .txn_workload import Tp, TxnSettings

FENCED_CODES = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                          KafkaError.INVALID_PRODUCER_EPOCH})


def _error(exc: KafkaException) -> KafkaError:
    error = exc.args[0] if exc.args else None
    return error if isinstance(error, KafkaError) else KafkaError(KafkaError._FAIL)


def _acknowledged(record: TxnRecord, error: KafkaError | None, message: Message) -> None:
    offset = message.offset()
    if error is None and offset is not None:
        record.offset = offset


class KafkaTxnWriter(threading.Thread):
    def __init__(self, txn_id: str, bootstrap: str, topics: tuple[list[Tp], list[Tp]],
                 sink: list[Txn], errors: list[str], stop: threading.Event,
                 rng: random.Random, settings: TxnSettings) -> None:
        super().__init__(name=f"chaos-{txn_id}", daemon=True)
        self.txn_id, self.bootstrap, self.topics = txn_id, bootstrap, topics
        self.sink, self.errors, self.stop_event = sink, errors, stop
        self.rng, self.settings = rng, settings
        self.instance = -1
        self.producer: Producer | None = None
        self.error: BaseException | None = None
        self.fencing_failures: list[str] = []  # a fenced instance's commit succeeded

    def _new_instance(self) -> bool:
        """The next instance, its transactions initialised (False: stopped first)."""
        s = self.settings
        while not self.stop_event.is_set():
            self.instance += 1
            producer = Producer({
                "bootstrap.servers": self.bootstrap, "transactional.id": self.txn_id,
                "logger": CLIENT_LOG, "debug": "eos",
                "client.id": f"{self.txn_id}#{self.instance}", "linger.ms": 5,
                "transaction.timeout.ms": s.transaction_timeout_ms,
                "request.timeout.ms": s.request_timeout_ms,
                # librdkafka refuses a delivery timeout past the transaction timeout.
                "message.timeout.ms": min(s.delivery_timeout_ms, s.transaction_timeout_ms),
                "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 1_000})
            try:
                producer.init_transactions(s.call_timeout)
            except KafkaException as exc:  # the coordinator moving: a new instance tries
                self.errors.append(f"{self.txn_id}#{self.instance} init_transactions: "
                                   f"{describe(_error(exc))}")
                self.stop_event.wait(0.5)
            else:
                self.producer = producer
                return True
        return False

    def run(self) -> None:
        try:
            number = 0
            running = self._new_instance()
            while running and not self.stop_event.is_set():
                started = time.monotonic()
                txn = self._plan(number)
                number += 1
                self.sink.append(txn)  # before the first send: its intended content
                running = self._fence(txn) if txn.intent == "fence" else self._run(txn)
                self.stop_event.wait(max(0.0, 1 / self.settings.rate
                                         - (time.monotonic() - started)))
        except BaseException as exc:  # reported by the runner: the workload broke
            self.error = exc

    def _plan(self, number: int) -> Txn:
        first, second = self.topics
        tps = (self.rng.sample(first, self.rng.randint(2, len(first)))
               + self.rng.sample(second, self.rng.randint(1, len(second))))
        roll = self.rng.random()
        s = self.settings
        intent = "fence" if roll < s.fence_share else (
            "abort" if roll < s.fence_share + s.abort_share else "commit")
        label = f"{self.txn_id}.{self.instance}.{number}"
        return Txn(self.txn_id, self.instance, number, intent, [
            TxnRecord(topic, partition, f"{label}:{topic}-{partition}:{k}")
            for topic, partition in tps for k in range(self.rng.randint(1, 2))],
            time.monotonic())

    def _send_all(self, producer: Producer, txn: Txn) -> None:
        for record in txn.records:
            producer.produce(record.topic, record.value.encode(), partition=record.partition,
                             on_delivery=functools.partial(_acknowledged, record))
        producer.flush(self.settings.call_timeout)  # serves the delivery reports

    def _repeated(self, call: Callable[[float], Any]) -> None:
        """A commit or an abort, repeated while it fails retriably."""
        for attempt in range(self.settings.attempts):
            try:
                call(self.settings.call_timeout)
                return
            except KafkaException as exc:
                if not _error(exc).retriable() or attempt + 1 == self.settings.attempts:
                    raise

    def _run(self, txn: Txn) -> bool:
        producer = self.producer
        assert producer is not None
        try:
            producer.begin_transaction()
            self._send_all(producer, txn)
            if txn.intent == "abort":
                self._repeated(producer.abort_transaction)
                txn.outcome = ABORTED
            else:
                self._repeated(producer.commit_transaction)
                txn.outcome = COMMITTED
            txn.t_end = time.monotonic()
            return True
        except KafkaException as exc:
            error = _error(exc)
            txn.error = describe(error)
            if error.txn_requires_abort():
                try:
                    self._repeated(producer.abort_transaction)
                    txn.outcome, txn.t_end = ABORTED, time.monotonic()
                    return True
                except KafkaException as again:
                    txn.error += f"; abort: {describe(_error(again))}"
        # Unusable (fatal, or a call that kept failing): what the transaction became
        # is not known; the next instance's init_transactions() settles it.
        txn.outcome, txn.t_end = AMBIGUOUS, time.monotonic()
        self.producer = None
        return self._new_instance()

    def _fence(self, txn: Txn) -> bool:
        """Send the transaction and flush its records, fence this instance with a new
        one, then commit with the old one: it must be refused as fenced."""
        zombie = self.producer
        assert zombie is not None
        try:
            zombie.begin_transaction()
            self._send_all(zombie, txn)
        except KafkaException as exc:
            txn.error = describe(_error(exc))
        self.producer = None
        running = self._new_instance()
        try:
            zombie.commit_transaction(self.settings.call_timeout)
        except KafkaException as exc:
            error = _error(exc)
            fenced = error.code() in FENCED_CODES
            txn.outcome = FENCED if fenced or running else AMBIGUOUS
            if not fenced:
                txn.error = describe(error)
        else:
            txn.outcome = COMMITTED
            if running:
                self.fencing_failures.append(
                    f"{txn.txn_id}: transaction {txn.number} of instance {txn.instance} "
                    f"committed after instance {self.instance} fenced it (zombie fencing "
                    "failed)")
        txn.t_end = time.monotonic()
        return running


class KafkaCommittedReader(threading.Thread):
    """A read_committed confluent-kafka consumer following the transactional topics
    (a failed one is replaced by a new session at the positions reached). librdkafka
    does not hand out each fetch's last stable offset: its reads carry none (-1)."""

    def __init__(self, bootstrap: str, tps: list[Tp], sink: list[TxnRead], errors: list[str],
                 stop: threading.Event) -> None:
        super().__init__(name=f"chaos-{KAFKA_TXN_READER}", daemon=True)
        self.bootstrap, self.tps, self.sink = bootstrap, tps, sink
        self.errors, self.stop_event = errors, stop
        self.positions: dict[Tp, int] = {}

    def run(self) -> None:
        number = 0
        while not self.stop_event.is_set():
            session = f"{KAFKA_TXN_READER}#{number}"
            number += 1
            consumer = Consumer({
                "bootstrap.servers": self.bootstrap, "client.id": session, "logger": CLIENT_LOG,
                "group.id": f"chaos-{session}", "enable.auto.commit": False,
                "isolation.level": "read_committed", "fetch.wait.max.ms": 300,
                "socket.timeout.ms": 5_000, "reconnect.backoff.max.ms": 1_000})
            try:
                consumer.assign([KafkaTopicPartition(t, p, self.positions.get(
                    (t, p), OFFSET_BEGINNING)) for t, p in self.tps])
                while not self.stop_event.is_set():
                    self._record(session, consumer.consume(500, 0.3))
            except KafkaException as exc:
                self.errors.append(f"{session}: {describe(_error(exc))}")
                self.stop_event.wait(0.5)
            finally:
                consumer.close()

    def _record(self, session: str, messages: list[Message]) -> None:
        now = time.monotonic()
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    self.errors.append(f"{session}: {describe(error)}")
                continue
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            assert topic is not None and partition is not None and offset is not None
            raw = message.value()
            value = "<null>" if raw is None else bytes(raw).decode("utf-8", "replace")
            self.sink.append(TxnRead(session, topic, partition, offset, value, now))
            self.positions[(topic, partition)] = offset + 1
