"""The chaos workloads through Kafka's own protocol: confluent-kafka (librdkafka)
against the gateway's Kafka listener, recording into the same :class:`History` as the
SDK's workloads, so that the same checks judge them.

- **KafkaWriter**: an idempotent confluent-kafka Producer (``enable.idempotence``,
  ``acks=all``) sends unique values ``k<i>:<seq>`` round-robin over the chaos topic's
  partitions, interleaved with the SDK writers' batches. Each delivery report is the
  send's outcome: acknowledged (the offset it reports), refused (an error that
  depends only on the record, or ``produce()`` itself raising: never appended), or
  ambiguous (timeouts, transport errors, purged at close: an earlier attempt may have
  been appended). A fatal error (the idempotent producer gave up) is recorded and a
  new Producer carries on.
- **KafkaTailReader**: a confluent-kafka Consumer (``assign``, no group,
  ``read_committed``) follows every partition; a failed consumer is replaced by a new
  session at the positions reached.
- :func:`read_back_kafka`: a second final read-back, through a ``read_uncommitted``
  Consumer, from each partition's start to its high watermark (session
  ``kafka-final``): the checker runs its lost and duplicate checks on it as on the
  SDK's read-back (``kafka_checker.py``).

The clients connect to the gateway's Kafka port directly, as the SDK's clients do to
its gRPC port: the gateway is never a fault's victim, and the faults (storage nodes,
controllers, etcd, coordinators, the cut through the proxy between the gateway and
the storage nodes) hit both paths behind it alike.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
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

from .harness import ChaosCluster
from .history import (
    AMBIGUOUS,
    FAILED,
    KAFKA_FINAL_SESSION,
    KAFKA_TAIL,
    KAFKA_TXN_PREFIX,
    OK,
    PENDING,
    History,
    Read,
    Send,
)
from .kafka_clients import CLIENT_LOG, describe
from .kafka_txn_workload import KafkaCommittedReader, KafkaTxnWriter
from .txn_workload import Tp, TxnSettings

# Delivery errors that depend only on the record (or that librdkafka raises before
# sending it): no attempt was ever appended. Anything else may follow an attempt that
# was (librdkafka does not report a record's persistence status to Python).
DEFINITE_REFUSALS = frozenset({
    KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_MSG, KafkaError.INVALID_MSG_SIZE,
    KafkaError.INVALID_RECORD, KafkaError.INVALID_TIMESTAMP,
    KafkaError.TOPIC_EXCEPTION, KafkaError.INVALID_REQUIRED_ACKS,
    KafkaError.UNSUPPORTED_COMPRESSION_TYPE, KafkaError._INVALID_ARG,
    KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC,
})


def classify(error: KafkaError) -> str:
    return FAILED if error.code() in DEFINITE_REFUSALS else AMBIGUOUS


@dataclass(frozen=True)
class KafkaSettings:
    writers: int = 1  # idempotent confluent-kafka producers on the chaos topic (0: none)
    rate: float = 50.0  # records per second per writer
    tail_readers: int = 1  # confluent-kafka consumers following the chaos topic
    # confluent-kafka transactional producers over the SDK's transactional topics
    # (and a read_committed reader of them), when that workload runs.
    transactional_producers: int = 1
    # librdkafka's defaults: a request waiting out a cut follower's removal from the
    # ISR is answered rather than timed out. (When librdkafka bumps its idempotent
    # epoch — after skipped sequence numbers, logs/kafka-clients.log: DRAIN — it sends
    # the records it holds unacknowledged again under the new epoch, which no broker
    # can deduplicate: the duplicate check catches any that had been appended.)
    request_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 60_000  # librdkafka's message.timeout.ms

    @property
    def enabled(self) -> bool:
        return self.writers > 0 or self.tail_readers > 0 or self.transactional_producers > 0


def _producer_config(bootstrap: str, client_id: str, s: KafkaSettings) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "client.id": client_id, "logger": CLIENT_LOG,
            "debug": "eos",
            "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "request.timeout.ms": s.request_timeout_ms,
            "message.timeout.ms": s.delivery_timeout_ms,
            "retry.backoff.ms": 100, "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 1_000}


def _consumer(bootstrap: str, session: str, isolation: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "client.id": session, "logger": CLIENT_LOG,
                     # assign() only: no group is joined, nothing is committed.
                     "group.id": f"chaos-{session}", "enable.auto.commit": False,
                     "isolation.level": isolation, "fetch.wait.max.ms": 300,
                     "socket.timeout.ms": 5_000, "reconnect.backoff.ms": 100,
                     "reconnect.backoff.max.ms": 1_000,
                     "topic.metadata.refresh.interval.ms": 5_000})


def _value(raw: bytes | str | None) -> str:
    if raw is None:
        return "<null>"
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


class KafkaWriter(threading.Thread):
    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int,
                 sink: list[Send], errors: list[str], stop: threading.Event,
                 settings: KafkaSettings) -> None:
        super().__init__(name=f"chaos-{name}", daemon=True)
        self.writer_name, self.bootstrap, self.topic = name, bootstrap, topic
        self.partitions, self.sink, self.errors = partitions, sink, errors
        self.stop_event, self.settings = stop, settings
        self.error: BaseException | None = None
        self.fatal: list[str] = []  # fatal errors: each replaced its Producer
        self.instances = 0

    def run(self) -> None:
        seq = 0
        try:
            while not self.stop_event.is_set():
                seq = self._instance(seq)
        except BaseException as exc:  # reported by the runner: the workload broke
            self.error = exc

    def _instance(self, seq: int) -> int:
        """One Producer until the stop or a fatal error; returns the next sequence."""
        s = self.settings
        fatal = threading.Event()

        def on_error(error: KafkaError) -> None:  # librdkafka's background errors
            if error.fatal():
                self.fatal.append(describe(error))
                fatal.set()
            else:
                self.errors.append(f"{self.writer_name}: {describe(error)}")

        self.instances += 1
        producer = Producer(_producer_config(self.bootstrap, f"chaos-{self.writer_name}", s)
                            | {"error_cb": on_error})
        interval = 1.0 / s.rate
        next_at = time.monotonic()
        try:
            while not self.stop_event.is_set() and not fatal.is_set():
                partition = seq % self.partitions
                send = Send(f"{self.writer_name}:{seq}", partition, time.monotonic())
                self.sink.append(send)
                seq += 1
                try:
                    producer.produce(self.topic, send.value.encode(), partition=partition,
                                     on_delivery=functools.partial(_delivered, send))
                except (KafkaException, BufferError) as exc:  # never queued: never sent
                    send.outcome, send.error = FAILED, describe(exc)
                    send.t_done = time.monotonic()
                producer.poll(0)  # serves delivery reports on this thread
                next_at += interval
                while (pause := next_at - time.monotonic()) > 0 and not self.stop_event.is_set():
                    producer.poll(min(pause, 0.05))
                if pause < -1.0:
                    next_at = time.monotonic()  # blocked: do not burst to catch up
        finally:
            # What is still undelivered after this is purged: ambiguous.
            producer.flush(0 if fatal.is_set() else s.delivery_timeout_ms / 1000 + 5)
            with contextlib.suppress(KafkaException):
                producer.purge()
            producer.flush(1)
        return seq


def _delivered(send: Send, error: KafkaError | None, message: Message) -> None:
    """A delivery report (on the writer's thread, from poll/flush)."""
    if send.outcome != PENDING:
        return
    if error is None:
        offset = message.offset()  # None: the broker's answer carried no offset (-1)
        send.offset = -1 if offset is None else offset
        send.outcome = OK
        if send.offset < 0:
            send.error = f"acknowledged without an offset (latency {message.latency()})"
    else:
        send.outcome, send.error = classify(error), describe(error)
    send.t_done = time.monotonic()


def _record(sink: list[Read], session: str, messages: list[Message],
            errors: list[str]) -> dict[int, int]:
    """Append the records read; returns each partition's next offset."""
    now = time.monotonic()
    reached: dict[int, int] = {}
    for message in messages:
        error = message.error()
        if error is not None:
            if error.code() != KafkaError._PARTITION_EOF:
                errors.append(f"{session}: {describe(error)}")
            continue
        partition, offset = message.partition(), message.offset()
        assert partition is not None and offset is not None
        sink.append(Read(session, partition, offset, _value(message.value()), now))
        reached[partition] = offset + 1
    return reached


class KafkaTailReader(threading.Thread):
    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int,
                 sink: list[Read], errors: list[str], stop: threading.Event,
                 isolation: str = "read_committed") -> None:
        super().__init__(name=f"chaos-{name}", daemon=True)
        self.reader_name, self.bootstrap, self.topic = name, bootstrap, topic
        self.partitions, self.sink, self.errors, self.stop_event = partitions, sink, errors, stop
        self.isolation = isolation
        self.positions: dict[int, int] = {}

    def run(self) -> None:
        number = 0
        while not self.stop_event.is_set():
            session = f"{self.reader_name}#{number}"
            number += 1
            consumer = _consumer(self.bootstrap, session, self.isolation)
            try:
                consumer.assign([KafkaTopicPartition(self.topic, p,
                                                     self.positions.get(p, OFFSET_BEGINNING))
                                 for p in range(self.partitions)])
                while not self.stop_event.is_set():
                    messages = consumer.consume(500, 0.3)
                    self.positions |= _record(self.sink, session, messages, self.errors)
            except KafkaException as exc:  # a new session carries on from the positions
                self.errors.append(f"{session}: {describe(exc)}")
                self.stop_event.wait(0.5)
            finally:
                consumer.close()


def read_back_kafka(bootstrap: str, topic: str, partitions: int, sink: list[Read],
                    errors: list[str], timeout: float,
                    log: Callable[[str], None] = lambda _: None
                    ) -> tuple[set[int], dict[int, int]]:
    """Read every partition from its start to its high watermark (taken once, at the
    beginning) through confluent-kafka. Returns the partitions read to the end and
    each one's watermark."""
    deadline = time.monotonic() + timeout
    ends: dict[int, int] = {}
    complete: set[int] = set()
    reached = dict.fromkeys(range(partitions), OFFSET_BEGINNING)
    while len(complete) < partitions and time.monotonic() < deadline:
        consumer = _consumer(bootstrap, KAFKA_FINAL_SESSION, "read_uncommitted")
        try:
            for p in range(partitions):
                if p not in ends:
                    ends[p] = consumer.get_watermark_offsets(
                        KafkaTopicPartition(topic, p), timeout=5)[1]
            complete |= {p for p, hw in ends.items() if hw == 0}
            consumer.assign([KafkaTopicPartition(topic, p, reached[p])
                             for p in range(partitions) if p not in complete])
            while len(complete) < partitions and time.monotonic() < deadline:
                got = _record(sink, KAFKA_FINAL_SESSION, consumer.consume(500, 0.5), errors)
                reached |= got
                done = [p for p in got if reached[p] >= ends[p]]
                complete |= set(done)
                if done:
                    consumer.pause([KafkaTopicPartition(topic, p) for p in done])
        except KafkaException as exc:
            log(f"kafka final read: {describe(exc)}; retrying")
            time.sleep(0.5)
        finally:
            consumer.close()
    return complete, ends


class KafkaWorkloads:
    """The confluent-kafka writers and tail readers of a run, and their read-back;
    with ``txn_topics`` (the SDK's transactional topics, created), the confluent-kafka
    transactional producers and their read_committed reader too."""

    def __init__(self, cluster: ChaosCluster, topic: str, partitions: int,
                 settings: KafkaSettings, history: History, stop_writers: threading.Event,
                 stop_readers: threading.Event, rng: random.Random,
                 txn_topics: tuple[list[Tp], list[Tp]] | None, txn: TxnSettings) -> None:
        bootstrap = cluster.kafka_bootstrap
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.history = history
        self.txn_writers: list[KafkaTxnWriter] = []
        self.txn_readers: list[KafkaCommittedReader] = []
        if txn_topics is not None and settings.transactional_producers > 0:
            self.txn_writers = [
                KafkaTxnWriter(f"{KAFKA_TXN_PREFIX}{i}", bootstrap, txn_topics, history.txns,
                               history.txn_errors, stop_writers, random.Random(rng.random()),
                               txn) for i in range(settings.transactional_producers)]
            self.txn_readers = [KafkaCommittedReader(
                bootstrap, [*txn_topics[0], *txn_topics[1]], history.txn_reads,
                history.txn_errors, stop_readers)]
        cluster.txn_ids += tuple(w.txn_id for w in self.txn_writers)
        self.log_handler = logging.FileHandler(cluster.workdir / "logs" / "kafka-clients.log")
        self.log_handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        self.writers = [KafkaWriter(f"k{i}", bootstrap, topic, partitions, history.sends,
                                    history.kafka_errors, stop_writers, settings)
                        for i in range(settings.writers)]
        self.readers = [KafkaTailReader(f"{KAFKA_TAIL}{i}", bootstrap, topic, partitions,
                                        history.reads, history.kafka_errors, stop_readers)
                        for i in range(settings.tail_readers)]
        history.kafka_writers = [w.writer_name for w in self.writers]

    def start(self) -> None:
        CLIENT_LOG.addHandler(self.log_handler)
        CLIENT_LOG.propagate, CLIENT_LOG.disabled = False, False  # a logging config may
        # have reset them
        for thread in [*self.writers, *self.readers, *self.txn_writers, *self.txn_readers]:
            thread.start()

    def join_writers(self, errors: list[str]) -> None:
        """After the stop: they flush what they hold (bounded by the delivery timeout)."""
        for writer in self.writers:
            writer.join(writer.settings.delivery_timeout_ms / 1000 + 15)
            if writer.error is not None:
                errors.append(f"{writer.writer_name}: {writer.error!r}")
            self.history.kafka_fatal.extend(f"{writer.writer_name}: {f}" for f in writer.fatal)
        for txn_writer in self.txn_writers:
            txn_writer.join(60)
            if txn_writer.error is not None:
                errors.append(f"{txn_writer.txn_id}: {txn_writer.error!r}")
            errors.extend(txn_writer.fencing_failures)

    def join_readers(self) -> None:
        for reader in [*self.readers, *self.txn_readers]:
            reader.join(30)

    def read_back(self, timeout: float, log: Callable[[str], None]) -> None:
        if self.writers or self.readers:
            self.history.kafka_final_complete, self.history.kafka_final_hw = read_back_kafka(
                self.bootstrap, self.topic, self.partitions, self.history.reads,
                self.history.kafka_errors, timeout, log)
            self.history.kafka_read_back = True
        self.close()

    def close(self) -> None:
        CLIENT_LOG.removeHandler(self.log_handler)
        self.log_handler.close()
