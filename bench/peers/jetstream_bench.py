"""Publish N records of S bytes to an R3, file-backed JetStream stream and wait for
every acknowledgement, the way ``strand bench produce --acks all`` does for Strand.

A JetStream publish ack is sent by the stream leader only once the message is
stored and committed through the stream's Raft group, i.e. written by a quorum
(2 of 3) of the replicas — the same guarantee as Strand's ``acks=all`` with
``min.insync.replicas=2``.

Two ways of pipelining are implemented (``publisher``):

* ``async`` (the default): nats-py's ``JetStreamContext.publish_async``. Each call
  writes the message with a unique reply inbox on one shared subscription and
  returns a future; the context's own semaphore (``publish_async_max_pending``)
  bounds the window of unacknowledged publishes.
* ``tasks``: one asyncio task per record around ``js.publish`` (a request/reply
  with its own timeout) and a semaphore for the window.

Measured here (2 cores, 50,000 x 1 KiB, windows 256, 1,000 and 4,000): ``async``
costs the client 32 to 36 µs of CPU per record, ``tasks`` 44 to 63 µs (a task, a
timer and a request future per record, against a future in a dict); on a quiet
machine ``async`` reached 20,000 to 24,500 records/s and ``tasks`` 10,700 to 16,300.
The client shares the 2 cores with the three servers, so its CPU is throughput:
``async`` is the default, with a window of 1,000.

``publish_async`` futures have no timeout of their own (an ack that never comes
would hang ``publish_async_completed`` forever): a watchdog stops the run when no
acknowledgement at all has arrived for ``ack_timeout`` seconds, and whatever is
unacknowledged then counts as failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from importlib.metadata import version
from typing import Any

import nats
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.client import JetStreamContext

STREAM = "BENCH"
SUBJECT = "bench.records"
PUBLISHERS = ("async", "tasks")


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile, the same definition as ``strand bench produce``."""
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return round(sorted_values[index], 3)


async def _quiet(_: Exception) -> None:
    """nats-py's default error callback logs every reconnect attempt; errors that
    matter show up here as failed or missing acknowledgements."""


async def create_stream(js: JetStreamContext, replicas: int, timeout: float = 30.0) -> None:
    """Create the stream and wait until its leader and every follower are current."""
    config = StreamConfig(name=STREAM, subjects=[SUBJECT], storage=StorageType.FILE,
                          num_replicas=replicas, retention=RetentionPolicy.LIMITS,
                          discard=DiscardPolicy.OLD, max_msgs=-1, max_bytes=-1)
    deadline = time.monotonic() + timeout
    while True:  # right after the meta leader is elected, placement can still refuse
        try:
            await js.add_stream(config)
            break
        except nats.js.errors.Error:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
    while True:
        info = await js.stream_info(STREAM)
        cluster = info.cluster
        followers = (cluster.replicas or []) if cluster is not None else []
        if (cluster is not None and cluster.leader and len(followers) == replicas - 1
                and all(peer.current for peer in followers)):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"stream {STREAM} has no leader with {replicas - 1} current "
                               f"followers after {timeout:.0f}s: {cluster}")
        await asyncio.sleep(0.2)


async def stream_leader(js: JetStreamContext) -> str:
    info = await js.stream_info(STREAM)
    if info.cluster is None or not info.cluster.leader:
        raise RuntimeError(f"stream {STREAM} has no leader")
    return info.cluster.leader


async def _publish_async(js: JetStreamContext, records: int, payload: bytes,
                         ack_timeout: float, latencies: list[float],
                         errors: list[BaseException]) -> int:
    """Returns how many records were never acknowledged (or never sent) because no
    acknowledgement at all arrived for ``ack_timeout`` seconds."""
    task = asyncio.current_task()
    assert task is not None
    pending: set[asyncio.Future[Any]] = set()
    last_ack = [time.perf_counter()]
    stalled = False

    async def watchdog() -> None:
        # One check a second instead of a timeout per publish: ``wait_stall`` would
        # make publish_async wrap every window wait in a task and a timer.
        nonlocal stalled
        while time.perf_counter() - last_ack[0] < ack_timeout or not pending:
            await asyncio.sleep(1)
        stalled = True
        task.cancel()

    dog = asyncio.ensure_future(watchdog())
    try:
        for _ in range(records):
            sent = time.perf_counter()
            try:
                future = await js.publish_async(SUBJECT, payload)
            except nats.js.errors.TooManyStalledMsgsError:
                # what nats-py makes of a cancellation of its window wait
                raise asyncio.CancelledError from None

            def done(f: asyncio.Future[Any], sent: float = sent) -> None:
                pending.discard(f)
                now = last_ack[0] = time.perf_counter()
                if f.cancelled():
                    return
                error = f.exception()
                if error is not None:
                    errors.append(error)
                else:
                    latencies.append((now - sent) * 1000)

            pending.add(future)
            future.add_done_callback(done)
        await js.publish_async_completed()
    except asyncio.CancelledError:
        if not stalled:
            raise
        task.uncancel()
    finally:
        dog.cancel()
    for future in list(pending):
        future.cancel()
    await asyncio.sleep(0)  # run the done callbacks of the cancelled futures
    return records - len(latencies) - len(errors)


async def _publish_tasks(js: JetStreamContext, records: int, payload: bytes, window: int,
                         ack_timeout: float, latencies: list[float],
                         errors: list[BaseException]) -> int:
    semaphore = asyncio.Semaphore(window)

    async def one(sent: float) -> None:
        try:
            await js.publish(SUBJECT, payload, timeout=ack_timeout)
        except Exception as exc:
            errors.append(exc)
        else:
            latencies.append((time.perf_counter() - sent) * 1000)
        finally:
            semaphore.release()

    tasks: set[asyncio.Task[None]] = set()
    for _ in range(records):
        sent = time.perf_counter()  # as for publish_async: the window wait counts
        await semaphore.acquire()
        task = asyncio.ensure_future(one(sent))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.wait(set(tasks), timeout=ack_timeout * 2)
    lost = len(tasks)
    for task in list(tasks):
        task.cancel()
    return lost


async def run(servers: list[str], leader_server: dict[str, str], records: int,
              record_size: int, window: int = 1000, publisher: str = "async",
              replicas: int = 3, ack_timeout: float = 30.0) -> dict[str, Any]:
    """Create the stream through any node, then publish through the node that leads it
    (as a Kafka client sends to the partition leader: NATS at its best here)."""
    admin = await nats.connect(servers, error_cb=_quiet, connect_timeout=5)
    try:
        await create_stream(admin.jetstream(), replicas)
        leader = await stream_leader(admin.jetstream())
    finally:
        await admin.close()

    nc = await nats.connect([leader_server[leader]], error_cb=_quiet, connect_timeout=5,
                            dont_randomize=True)
    try:
        js = nc.jetstream(timeout=ack_timeout, publish_async_max_pending=window)
        payload = os.urandom(record_size)
        latencies: list[float] = []
        errors: list[BaseException] = []
        start, cpu_start = time.perf_counter(), time.process_time()
        if publisher == "async":
            lost = await _publish_async(js, records, payload, ack_timeout, latencies, errors)
        elif publisher == "tasks":
            lost = await _publish_tasks(js, records, payload, window, ack_timeout, latencies,
                                        errors)
        else:
            raise ValueError(f"publisher must be one of {PUBLISHERS}, not {publisher!r}")
        seconds = time.perf_counter() - start
        client_cpu = time.process_time() - cpu_start
        stream: dict[str, Any] = {"name": STREAM, "storage": "file", "num_replicas": replicas,
                                  "leader": leader}
        try:
            info = await js.stream_info(STREAM)
            stream.update(messages=info.state.messages, bytes=info.state.bytes)
        except (TimeoutError, nats.errors.Error) as exc:  # reported, not fatal
            stream["error"] = repr(exc)
    finally:
        with contextlib.suppress(Exception):
            await nc.close()

    acked = len(latencies)
    latencies.sort()
    failures = len(errors) + lost
    result: dict[str, Any] = {
        "records": records, "bytes": records * record_size, "seconds": round(seconds, 3),
        "records_per_s": round(acked / seconds, 1),
        "mb_per_s": round(acked * record_size / seconds / 1e6, 2),
        "latency_ms": {"p50": percentile(latencies, 0.50), "p99": percentile(latencies, 0.99),
                       "p999": percentile(latencies, 0.999)},
        "acked": acked, "failures": failures,
        "stream": stream,
        "publisher": publisher, "window": window, "client_cpu_s": round(client_cpu, 2),
        "client": f"nats-py {version('nats-py')}",
    }
    if errors:
        result["first_error"] = repr(errors[0])
    if lost:
        result["unacknowledged_after_s"] = ack_timeout
    return result


async def consume(server: str, records: int, batch: int = 1000,
                  idle_timeout: float = 10.0) -> dict[str, Any]:
    """Read the whole stream back through an ephemeral pull consumer (deliver all, no
    acks: a reader that keeps its own position, like a Kafka consumer that commits
    nothing), ``batch`` messages per fetch, until ``records`` have arrived; raises when
    nothing arrives for ``idle_timeout`` seconds first."""
    nc = await nats.connect([server], error_cb=_quiet, connect_timeout=5, dont_randomize=True)
    try:
        js = nc.jetstream()
        config = ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL)
        subscription = await js.pull_subscribe(SUBJECT, stream=STREAM, config=config)
        consumed = total_bytes = 0
        start = idle_since = time.perf_counter()
        while consumed < records:
            try:
                messages = await subscription.fetch(batch, timeout=1.0)
            except nats.errors.TimeoutError:
                messages = []
            if messages:
                idle_since = time.perf_counter()
            elif time.perf_counter() - idle_since > idle_timeout:
                raise TimeoutError(f"JetStream consume: only {consumed} of {records} records "
                                   f"arrived from stream {STREAM} within {idle_timeout:.0f} s "
                                   "of silence")
            consumed += len(messages)
            total_bytes += sum(len(m.data) for m in messages)
        seconds = time.perf_counter() - start
    finally:
        with contextlib.suppress(Exception):
            await nc.close()
    return {"records": consumed, "bytes": total_bytes, "seconds": round(seconds, 3),
            "records_per_s": round(consumed / seconds, 1),
            "mb_per_s": round(total_bytes / seconds / 1e6, 2),
            "consumer": f"ephemeral pull consumer, ack none, fetch batch {batch}"}
