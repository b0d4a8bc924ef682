"""The transactional workload: producers with transactional ids, writing transactions
that span at least 3 partitions of 2 topics — committed, deliberately aborted, or left
open while a new instance of the same transactional id fences the producer.

Each transaction is recorded (``History.txns``) with the records it meant to write
before the first send, and with how it ended (``history.py``):

- **commit**: ``commit_transaction()``; a timeout is retried (the API allows it);
  COMMITTED once it returns, AMBIGUOUS if it never does.
- **abort**: ``abort_transaction()`` after sending everything; ABORTED.
- **fence**: its records flushed to the log, a new Producer with the same
  transactional id runs ``init_transactions()`` (which aborts the open transaction
  and bumps the epoch); the old instance's commit must then fail with
  ``ProducerFencedError``: FENCED. A commit that succeeds anyway is a fencing failure,
  reported as a workload error (and the transaction counts as COMMITTED: whatever the
  log shows is checked).
- any error on the way: the transaction is aborted (an abortable error) or, if the
  producer is no longer usable, a new instance takes over (its ``init_transactions()``
  settles the open transaction): ABORTED when the abort returned, else AMBIGUOUS.

The read_committed readers (``txn_reader.py``) and ``txn_checker.py`` do the rest.
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from strand import Producer
from strand.errors import ProducerFencedError, RequestTimedOutError
from strand.producer import RecordFuture
from strand.producer.errors import TransactionAbortableError

from .history import ABORTED, AMBIGUOUS, COMMITTED, FENCED, Txn, TxnRecord
from .workload import describe

Tp = tuple[str, int]


@dataclass(frozen=True)
class TxnSettings:
    rate: float = 5.0  # transactions per second per producer
    abort_share: float = 0.2  # of the transactions, deliberately aborted
    fence_share: float = 0.05  # left open while a new instance fences the producer
    transaction_timeout_ms: int = 10_000
    request_timeout_ms: int = 5_000
    delivery_timeout_ms: int = 30_000
    call_timeout: float = 10.0  # s for init/commit/abort before one more try
    attempts: int = 3  # tries of a commit or an abort that timed out


def acknowledged(record: TxnRecord, future: RecordFuture) -> None:
    """On the producer's sender thread: quick, never raises."""
    if future.exception(0) is None:
        record.offset = future.metadata().offset


class TransactionalProducer:
    """A transactional id's current Producer instance, replaced by a new one (whose
    ``init_transactions()`` settles the open transaction) when it becomes unusable.
    Shared by the transactional workload and the pipeline."""

    def __init__(self, txn_id: str, bootstrap: str, settings: TxnSettings, errors: list[str],
                 stop: threading.Event) -> None:
        self.txn_id, self.bootstrap, self.settings = txn_id, bootstrap, settings
        self.errors, self.stop_event = errors, stop
        self.instance = -1
        self.producer: Producer | None = None

    def replace(self) -> bool:
        """Close the current instance and start the next, its transactions initialised
        (False: stopped first)."""
        self.close()
        s = self.settings
        while not self.stop_event.is_set():
            self.instance += 1
            producer = Producer(self.bootstrap, transactional_id=self.txn_id,
                                transaction_timeout_ms=s.transaction_timeout_ms,
                                request_timeout_ms=s.request_timeout_ms,
                                delivery_timeout_ms=s.delivery_timeout_ms, linger_ms=5,
                                client_id=f"chaos-{self.txn_id}#{self.instance}")
            try:
                producer.init_transactions(timeout=s.call_timeout)
            except Exception as exc:  # the coordinator moving: a new instance tries again
                self.errors.append(f"{self.txn_id}#{self.instance} init_transactions: "
                                   f"{describe(exc)}")
                producer.close(timeout=1)
                self.stop_event.wait(0.5)
            else:
                self.producer = producer
                return True
        return False

    def close(self) -> None:
        if self.producer is not None:
            self.producer.close(timeout=1)
            self.producer = None

    def plan(self, number: int, intent: str, records: list[TxnRecord]) -> Txn:
        return Txn(self.txn_id, self.instance, number, intent, records, time.monotonic())

    @property
    def label(self) -> str:
        return f"{self.txn_id}.{self.instance}"

    def run(self, txn: Txn, body: Callable[[Producer], None]) -> None:
        """One transaction: begin, ``body`` (the sends; the offsets), then commit or
        abort as ``txn.intent`` says. On an abortable error the transaction is
        aborted; on any other the instance is replaced (AMBIGUOUS)."""
        producer = self.producer
        assert producer is not None
        try:
            producer.begin_transaction()
            body(producer)
            if txn.intent == "abort":
                self._end(producer.abort_transaction, txn, ABORTED)
            else:
                self._end(producer.commit_transaction, txn, COMMITTED)
            return
        except TransactionAbortableError as exc:
            txn.error = describe(exc)
            try:
                self._end(producer.abort_transaction, txn, ABORTED)
                return
            except Exception as again:
                txn.error += f"; abort: {describe(again)}"
        except Exception as exc:
            txn.error = describe(exc)
        # Unusable (fenced by a timeout's epoch bump, or a call that kept timing out):
        # what the transaction became is not known; a new instance settles it.
        txn.outcome, txn.t_end = AMBIGUOUS, time.monotonic()
        self.replace()

    def repeated(self, call: Callable[..., None], *args: object) -> None:
        """``call(*args, timeout=...)``, repeated when it timed out (the API allows
        it: RequestTimedOutError is retriable)."""
        for attempt in range(self.settings.attempts):
            try:
                call(*args, timeout=self.settings.call_timeout)
                return
            except RequestTimedOutError:
                if attempt + 1 == self.settings.attempts:
                    raise

    def _end(self, call: Callable[..., None], txn: Txn, outcome: str) -> None:
        """Commit or abort (repeated after a timeout)."""
        self.repeated(call)
        txn.outcome, txn.t_end = outcome, time.monotonic()


class TxnWriter(threading.Thread):
    """One transactional id's transactions over the two topics."""

    def __init__(self, txn_id: str, bootstrap: str, topics: tuple[list[Tp], list[Tp]],
                 sink: list[Txn], errors: list[str], stop: threading.Event,
                 rng: random.Random, settings: TxnSettings | None = None) -> None:
        super().__init__(name=f"chaos-{txn_id}", daemon=True)
        self.topics, self.sink, self.errors, self.stop_event = topics, sink, errors, stop
        self.rng, self.settings = rng, settings or TxnSettings()
        self.producer = TransactionalProducer(txn_id, bootstrap, self.settings, errors, stop)
        self.error: BaseException | None = None
        self.fencing_failures: list[str] = []  # a fenced instance's commit succeeded

    def run(self) -> None:
        try:
            number = 0
            running = self.producer.replace()
            while running and not self.stop_event.is_set():
                started = time.monotonic()
                txn = self._plan(number)
                number += 1
                self.sink.append(txn)  # before the first send: its intended content
                if txn.intent == "fence":
                    running = self._fence(txn)
                else:
                    self.producer.run(txn, functools.partial(send_all, txn))
                    running = self.producer.producer is not None
                self.stop_event.wait(max(0.0, 1 / self.settings.rate
                                         - (time.monotonic() - started)))
        except BaseException as exc:  # reported by the runner: the workload broke
            self.error = exc
        finally:
            self.producer.close()

    def _plan(self, number: int) -> Txn:
        first, second = self.topics
        tps = (self.rng.sample(first, self.rng.randint(2, len(first)))
               + self.rng.sample(second, self.rng.randint(1, len(second))))
        roll = self.rng.random()
        s = self.settings
        intent = "fence" if roll < s.fence_share else (
            "abort" if roll < s.fence_share + s.abort_share else "commit")
        label = f"{self.producer.label}.{number}"
        return self.producer.plan(number, intent, [
            TxnRecord(topic, partition, f"{label}:{topic}-{partition}:{k}")
            for topic, partition in tps for k in range(self.rng.randint(1, 2))])

    def _fence(self, txn: Txn) -> bool:
        """Send the transaction and flush its records to the log, fence this instance
        with a new one, then try to commit with the old one: it must be refused."""
        zombie = self.producer.producer
        assert zombie is not None
        self.producer.producer = None  # replace() must not close it: it commits below
        try:
            zombie.begin_transaction()
            send_all(txn, zombie)
            zombie.flush(timeout=self.settings.call_timeout)
        except Exception as exc:
            txn.error = describe(exc)
        running = self.producer.replace()
        try:
            zombie.commit_transaction(timeout=self.settings.call_timeout)
        except ProducerFencedError:
            txn.outcome = FENCED
        except Exception as exc:  # refused otherwise: invisible once fenced
            txn.outcome, txn.error = FENCED if running else AMBIGUOUS, describe(exc)
        else:
            txn.outcome = COMMITTED
            if running:
                self.fencing_failures.append(
                    f"{txn.txn_id}: transaction {txn.number} of instance {txn.instance} "
                    f"committed after instance {self.producer.instance} fenced it (zombie "
                    "fencing failed)")
        txn.t_end = time.monotonic()
        zombie.close(timeout=1)
        return running


def send_all(txn: Txn, producer: Producer) -> None:
    """Send every record of the transaction, recording the acknowledged offsets."""
    for record in txn.records:
        future = producer.send(record.topic, record.value.encode(), partition=record.partition)
        future.add_done_callback(functools.partial(acknowledged, record))
