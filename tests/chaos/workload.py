"""The chaos workload: producers and consumers on threads, using the SDK as an
application would, recording everything they see into the :class:`History`.

- Writers send unique values (``<writer>:<seq>``), round-robin over the partitions,
  with ``acks=all`` and retries on, at a steady rate, and record each send's outcome
  from its future: acknowledged (with the offset of its RecordMetadata), definitely
  refused, or ambiguous.
- Tail readers follow every partition from the beginning. When a consumer fails
  they start a new one (a new session) at the positions they had reached.
- A rewinding reader starts a new session every few seconds at random offsets
  (sometimes 0) and reads a window, so offsets are read again, through whichever
  leader serves them by then (divergence shows up there).
- ``read_back`` is the final read of every partition up to its high watermark.

Lists are appended from several threads: ``list.append`` is atomic in CPython, and
each session appends only from its own thread, so a session's reads keep their order.
"""

from __future__ import annotations

import contextlib
import functools
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from strand import Consumer, Producer, TopicPartition
from strand.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidRequiredAcksError,
    InvalidTimestampError,
    InvalidTopicError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)
from strand.producer import RecordFuture

from .history import AMBIGUOUS, FAILED, FINAL_SESSION, OK, Read, Send

# Refusals that depend only on the batch's bytes and the topic: an earlier attempt of
# the same batch would have been refused too, so the record was never appended. Any
# other failure after the record left send() (timeouts, transport errors, retriable
# errors that ran out of time, unknown server errors, the producer closing) may come
# after an attempt that *was* appended: ambiguous.
DEFINITE_REFUSALS = (CorruptRecordError, InvalidRecordError, RecordTooLargeError,
                     UnsupportedCompressionError, InvalidTimestampError, InvalidTopicError,
                     InvalidRequiredAcksError)


def classify(error: BaseException) -> str:
    return FAILED if isinstance(error, DEFINITE_REFUSALS) else AMBIGUOUS


def describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error)[:200]}"


def _value(raw: bytes | None) -> str:
    return "<null>" if raw is None else raw.decode("utf-8", "replace")


@dataclass(frozen=True)
class ProducerSettings:
    request_timeout_ms: float = 5_000
    delivery_timeout_ms: float = 30_000
    max_block_ms: float = 5_000
    retry_backoff_ms: float = 100
    linger_ms: float = 5
    # True: each batch carries a producer id, epoch and sequence, so that a retry is
    # not written twice (needs a transaction coordinator for the id).
    enable_idempotence: bool = False


class Writer(threading.Thread):
    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, rate: float,
                 sink: list[Send], stop: threading.Event,
                 settings: ProducerSettings = ProducerSettings()) -> None:
        super().__init__(name=f"chaos-{name}", daemon=True)
        self.writer_name, self.bootstrap, self.topic = name, bootstrap, topic
        self.partitions, self.rate, self.sink, self.stop_event = partitions, rate, sink, stop
        self.settings = settings
        self.error: BaseException | None = None

    def run(self) -> None:
        s = self.settings
        try:
            producer = Producer(self.bootstrap, acks="all", linger_ms=s.linger_ms,
                                request_timeout_ms=s.request_timeout_ms,
                                delivery_timeout_ms=s.delivery_timeout_ms,
                                max_block_ms=s.max_block_ms, retry_backoff_ms=s.retry_backoff_ms,
                                enable_idempotence=s.enable_idempotence,
                                client_id=f"chaos-{self.writer_name}")
        except BaseException as exc:
            self.error = exc
            return
        try:
            self._produce(producer)
        except BaseException as exc:  # reported by the runner: the workload broke
            self.error = exc
        finally:
            # What is still pending after this is recorded as such (ambiguous).
            with contextlib.suppress(Exception):
                producer.flush(timeout=s.delivery_timeout_ms / 1000 + 5)
            producer.close(timeout=2)

    def _produce(self, producer: Producer) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        seq = 0
        while not self.stop_event.is_set():
            partition = seq % self.partitions
            send = Send(f"{self.writer_name}:{seq}", partition, time.monotonic())
            self.sink.append(send)
            seq += 1
            try:
                future = producer.send(self.topic, send.value.encode(), partition=partition)
            except Exception as exc:  # refused before it was queued: never sent
                send.outcome, send.error, send.t_done = FAILED, describe(exc), time.monotonic()
            else:
                future.add_done_callback(functools.partial(_complete, send))
            next_at += interval
            pause = next_at - time.monotonic()
            if pause > 0:
                self.stop_event.wait(pause)
            elif pause < -1.0:
                next_at = time.monotonic()  # blocked in send(): do not burst to catch up


def _complete(send: Send, future: RecordFuture) -> None:
    """Runs on the producer's sender thread: quick, and never raises."""
    error = future.exception(0)
    if error is None:
        send.offset = future.metadata().offset
        send.outcome = OK
    else:
        send.outcome, send.error = classify(error), describe(error)
    send.t_done = time.monotonic()


def _consumer(bootstrap: str, session: str) -> Consumer:
    return Consumer(bootstrap, fetch_max_wait_ms=300, request_timeout_ms=5_000,
                    retry_backoff_ms=100, auto_offset_reset="earliest", client_id=session)


def _record(sink: list[Read], session: str, batches: dict[TopicPartition, list]) -> None:  # type: ignore[type-arg]
    now = time.monotonic()
    for tp, records in batches.items():
        for r in records:
            sink.append(Read(session, tp.partition, r.offset, _value(r.value), now))


class TailReader(threading.Thread):
    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int,
                 sink: list[Read], errors: list[str], stop: threading.Event) -> None:
        super().__init__(name=f"chaos-{name}", daemon=True)
        self.reader_name, self.bootstrap = name, bootstrap
        self.tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.sink, self.errors, self.stop_event = sink, errors, stop
        self.positions: dict[TopicPartition, int] = {}

    def run(self) -> None:
        number = 0
        while not self.stop_event.is_set():
            session = f"{self.reader_name}#{number}"
            number += 1
            consumer = _consumer(self.bootstrap, session)
            try:
                consumer.assign(self.tps)
                for tp in self.tps:
                    if tp in self.positions:
                        consumer.seek(tp, self.positions[tp])
                    else:
                        consumer.seek_to_beginning(tp)
                while not self.stop_event.is_set():
                    batches = consumer.poll(timeout_ms=300)
                    _record(self.sink, session, batches)
                    for tp, records in batches.items():
                        if records:
                            self.positions[tp] = records[-1].offset + 1
            except Exception as exc:  # a new session carries on from the positions
                self.errors.append(f"{session}: {describe(exc)}")
                self.stop_event.wait(0.5)
            finally:
                consumer.close()


class RewindReader(threading.Thread):
    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int,
                 sink: list[Read], errors: list[str], stop: threading.Event,
                 rng: random.Random, interval: float = 5.0, window: int = 1_000) -> None:
        super().__init__(name=f"chaos-{name}", daemon=True)
        self.reader_name, self.bootstrap = name, bootstrap
        self.tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.sink, self.errors, self.stop_event = sink, errors, stop
        self.rng, self.interval, self.window = rng, interval, window

    def run(self) -> None:
        number = 0
        while not self.stop_event.wait(self.interval):
            session = f"{self.reader_name}#{number}"
            number += 1
            consumer = _consumer(self.bootstrap, session)
            try:
                self._pass(consumer, session)
            except Exception as exc:
                self.errors.append(f"{session}: {describe(exc)}")
            finally:
                consumer.close()

    def _pass(self, consumer: Consumer, session: str) -> None:
        consumer.assign(self.tps)
        ends = consumer.end_offsets(self.tps, timeout_ms=5_000)
        stop_at = {}
        for tp in self.tps:
            end = ends.get(tp, 0)
            start = 0 if end == 0 or self.rng.random() < 0.3 else self.rng.randrange(end)
            consumer.seek(tp, start)
            stop_at[tp] = min(end, start + self.window)
        deadline = time.monotonic() + 10
        open_tps = {tp for tp in self.tps if stop_at[tp] > 0}
        while open_tps and time.monotonic() < deadline and not self.stop_event.is_set():
            batches = consumer.poll(timeout_ms=300)
            _record(self.sink, session, batches)
            for tp, records in batches.items():
                if records and records[-1].offset + 1 >= stop_at[tp]:
                    open_tps.discard(tp)
                    consumer.pause(tp)


def read_back(bootstrap: str, topic: str, partitions: int, sink: list[Read],
              timeout: float, log: Callable[[str], None] = lambda _: None
              ) -> tuple[set[int], dict[int, int]]:
    """Read every partition from its start to its high watermark (taken once, at the
    beginning). Returns the partitions read to the end and each one's watermark."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    deadline = time.monotonic() + timeout
    consumer = _consumer(bootstrap, FINAL_SESSION)
    complete: set[int] = set()
    ends: dict[TopicPartition, int] = {}
    try:
        consumer.assign(tps)
        while not ends and time.monotonic() < deadline:
            try:
                ends = consumer.end_offsets(tps, timeout_ms=5_000)
            except Exception as exc:
                log(f"final read: end offsets not available yet ({describe(exc)})")
                time.sleep(1)
        consumer.seek_to_beginning(*tps)
        reached = {tp: 0 for tp in tps}
        complete = {tp.partition for tp in tps if ends.get(tp, -1) == 0}
        while len(complete) < partitions and time.monotonic() < deadline:
            try:
                batches = consumer.poll(timeout_ms=500)
            except Exception as exc:
                log(f"final read: {describe(exc)}; retrying")
                consumer.close()
                consumer = _consumer(bootstrap, FINAL_SESSION)
                consumer.assign(tps)
                for tp in tps:
                    consumer.seek(tp, reached[tp])
                continue
            _record(sink, FINAL_SESSION, batches)
            for tp, records in batches.items():
                if records:
                    reached[tp] = records[-1].offset + 1
                    if tp in ends and reached[tp] >= ends[tp]:
                        complete.add(tp.partition)
                        consumer.pause(tp)
    finally:
        consumer.close()
    return complete, {tp.partition: hw for tp, hw in ends.items()}
