"""Fetch long polling: waits without burning CPU, and wakes as soon as data arrives."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from strand.launcher import EtcdServer, ServiceProcess, cpu_seconds
from strand.v1 import common_pb2 as pb
from tests.integration.test_storage_support import (
    StorageClient,
    decode,
    make_batch,
    put_topic,
    start_storage,
)


@pytest.fixture
def node(etcd: EtcdServer, tmp_path: Path) -> Iterator[ServiceProcess]:
    put_topic(etcd, "poll", 2)
    process = start_storage(etcd, tmp_path)
    yield process
    process.stop()


@pytest.fixture
def client(node: ServiceProcess) -> Iterator[StorageClient]:
    storage = StorageClient(node.address)
    storage.wait_until_led("poll", range(2))
    yield storage
    storage.close()


def test_fetch_at_the_log_end_waits_max_wait_and_returns_empty(client: StorageClient) -> None:
    assert client.produce("poll", 0, make_batch([b"v"])).error_code == pb.NONE
    started = time.monotonic()
    answer = client.fetch("poll", 0, 1, max_wait_ms=700)
    elapsed = time.monotonic() - started
    assert 0.65 <= elapsed < 1.5
    assert (answer.error_code, answer.records, answer.high_watermark) == (pb.NONE, b"", 1)


def test_waiting_fetch_returns_when_another_client_produces(node: ServiceProcess,
                                                            client: StorageClient) -> None:
    producer = StorageClient(node.address)
    try:
        request = client.fetch_request({("poll", 0): 0, ("poll", 1): 0}, max_wait_ms=10_000)
        started = time.monotonic()
        waiting = client.stub.Fetch.future(request, timeout=30)
        time.sleep(0.3)
        assert not waiting.done()
        assert producer.produce("poll", 1, make_batch([b"hello"])).error_code == pb.NONE
        response = waiting.result()
        elapsed = time.monotonic() - started
    finally:
        producer.close()
    assert elapsed < 2, f"the waiting fetch answered after {elapsed:.2f}s"
    answers = {p.partition: p for t in response.topics for p in t.partitions}
    assert answers[0].records == b""
    assert [r.value for r in decode(answers[1].records)] == [b"hello"]
    assert answers[1].high_watermark == 1


def test_fetch_waits_for_min_bytes(node: ServiceProcess, client: StorageClient) -> None:
    batch = make_batch([b"x" * 200])
    request = client.fetch_request({("poll", 0): 0}, max_wait_ms=10_000,
                                   min_bytes=2 * len(batch))
    started = time.monotonic()
    waiting = client.stub.Fetch.future(request, timeout=30)
    assert client.produce("poll", 0, batch).error_code == pb.NONE
    time.sleep(0.3)
    assert not waiting.done()  # one batch is not min_bytes yet
    assert client.produce("poll", 0, batch).error_code == pb.NONE
    response = waiting.result()
    assert time.monotonic() - started < 2
    assert [r.offset for r in decode(response.topics[0].partitions[0].records)] == [0, 1]


def test_idle_long_poll_does_not_burn_cpu(node: ServiceProcess, client: StorageClient) -> None:
    assert node.process is not None
    request = client.fetch_request({("poll", 0): 0, ("poll", 1): 0}, max_wait_ms=2600)
    waiting = client.stub.Fetch.future(request, timeout=30)
    time.sleep(0.2)
    before = cpu_seconds(node.process.pid)
    time.sleep(2)
    used = cpu_seconds(node.process.pid) - before
    assert not waiting.done()
    assert used < 0.2, f"the server used {used:.2f}s of CPU in 2s of waiting"
    response = waiting.result()
    assert all(p.records == b"" for t in response.topics for p in t.partitions)
