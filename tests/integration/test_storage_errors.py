"""Bad input to a storage node: each answered with its typed error, nothing written."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from strand.launcher import EtcdServer, ServiceProcess
from strand.records import BatchBuilder
from strand.v1 import common_pb2 as pb
from tests.integration.test_storage_support import (
    StorageClient,
    make_batch,
    put_topic,
    start_storage,
)


@pytest.fixture
def client(etcd: EtcdServer, tmp_path: Path) -> Iterator[StorageClient]:
    put_topic(etcd, "mine", 2, config={"max.message.bytes": "1000"})
    put_topic(etcd, "theirs", 1, leader=2)  # led by another node
    process: ServiceProcess = start_storage(etcd, tmp_path)
    storage = StorageClient(process.address)
    storage.wait_until_led("mine", range(2))
    yield storage
    storage.close()
    process.stop()


def _corrupt(batch: bytes) -> bytes:
    damaged = bytearray(batch)
    damaged[-1] ^= 0xFF  # inside the CRC's range
    return bytes(damaged)


def _produce_errors(client: StorageClient, records: bytes, acks: int = -1) -> tuple[int, str]:
    answer = client.produce("mine", 0, records, acks=acks)
    return answer.error_code, answer.error_message


def test_bad_batches_are_refused_and_nothing_is_written(client: StorageClient) -> None:
    good = make_batch([b"ok"])
    assert client.produce("mine", 0, good).error_code == pb.NONE

    code, message = _produce_errors(client, _corrupt(make_batch([b"v"])))
    assert code == pb.CORRUPT_MESSAGE and "CRC" in message
    code, message = _produce_errors(client, make_batch([b"x" * 2000]))
    assert code == pb.MESSAGE_TOO_LARGE and "max.message.bytes" in message
    code, _ = _produce_errors(client, b"\x00" * 10)  # not a batch at all
    assert code == pb.CORRUPT_MESSAGE
    code, _ = _produce_errors(client, b"")
    assert code == pb.INVALID_RECORD
    builder = BatchBuilder(control=True)
    builder.append(b"marker", key=b"\x00\x00\x00\x00")
    code, message = _produce_errors(client, builder.build())
    assert code == pb.INVALID_RECORD and "control" in message
    # A good batch followed by a bad one: the whole partition request is refused.
    code, _ = _produce_errors(client, good + _corrupt(good))
    assert code == pb.CORRUPT_MESSAGE
    code, message = _produce_errors(client, good, acks=2)
    assert code == pb.INVALID_REQUIRED_ACKS and "acks" in message

    assert client.latest("mine", 0) == 1
    assert [r.value for r in client.read_all("mine", 0)] == [b"ok"]


def test_one_bad_partition_does_not_fail_the_others(client: StorageClient) -> None:
    response = client.produce_request({
        ("mine", 0): _corrupt(make_batch([b"bad"])),
        ("mine", 1): make_batch([b"good"]),
        ("nope", 0): make_batch([b"unknown"]),
    })
    answers = {(t.topic, p.partition): p for t in response.topics for p in t.partitions}
    assert answers[("mine", 0)].error_code == pb.CORRUPT_MESSAGE
    assert answers[("mine", 1)].error_code == pb.NONE
    assert answers[("nope", 0)].error_code == pb.UNKNOWN_TOPIC_OR_PARTITION
    assert (client.latest("mine", 0), client.latest("mine", 1)) == (0, 1)


def test_unknown_topic_or_partition(client: StorageClient) -> None:
    for topic, partition in (("nope", 0), ("mine", 2), ("mine", -1)):
        assert client.produce(topic, partition, make_batch([b"v"])).error_code == (
            pb.UNKNOWN_TOPIC_OR_PARTITION)
        assert client.fetch(topic, partition, 0).error_code == pb.UNKNOWN_TOPIC_OR_PARTITION
        assert client.list_offset(topic, partition, -1).error_code == (
            pb.UNKNOWN_TOPIC_OR_PARTITION)


def test_partition_led_by_another_node(client: StorageClient) -> None:
    answer = client.produce("theirs", 0, make_batch([b"v"]))
    assert answer.error_code == pb.NOT_LEADER_OR_FOLLOWER
    assert "node 2" in answer.error_message
    assert client.fetch("theirs", 0, 0).error_code == pb.NOT_LEADER_OR_FOLLOWER
    assert client.list_offset("theirs", 0, -1).error_code == pb.NOT_LEADER_OR_FOLLOWER


def test_fetch_errors_answer_at_once(client: StorageClient) -> None:
    assert client.produce("mine", 0, make_batch([b"a", b"b"])).error_code == pb.NONE
    for offset in (3, -1):
        started = time.monotonic()
        answer = client.fetch("mine", 0, offset, max_wait_ms=5000)
        assert time.monotonic() - started < 2
        assert answer.error_code == pb.OFFSET_OUT_OF_RANGE
        assert (answer.high_watermark, answer.log_start_offset) == (2, 0)
        assert answer.records == b""
    assert client.fetch("mine", 0, 2).error_code == pb.NONE  # the log end is in range

    # A partition in error makes the whole fetch answer now, with the others' data.
    started = time.monotonic()
    fetched = client.fetch_many({("mine", 0): 0, ("mine", 1): 99}, max_wait_ms=5000,
                                min_bytes=1 << 20)
    assert time.monotonic() - started < 2
    assert fetched[("mine", 0)].error_code == pb.NONE and fetched[("mine", 0)].records
    assert fetched[("mine", 1)].error_code == pb.OFFSET_OUT_OF_RANGE

    assert client.fetch("mine", 0, 0, partition_max_bytes=-1).error_code == (
        pb.INVALID_FETCH_SIZE)


def test_leader_epoch_of_the_fetch_is_checked(etcd: EtcdServer, client: StorageClient) -> None:
    put_topic(etcd, "epochs", leader_epoch=5)
    client.wait_until_led("epochs")
    assert client.fetch("epochs", 0, 0, leader_epoch=5).error_code == pb.NONE
    assert client.fetch("epochs", 0, 0, leader_epoch=-1).error_code == pb.NONE
    fenced = client.fetch("epochs", 0, 0, leader_epoch=4)
    assert fenced.error_code == pb.FENCED_LEADER_EPOCH and "older" in fenced.error_message
    unknown = client.fetch("epochs", 0, 0, leader_epoch=6)
    assert unknown.error_code == pb.UNKNOWN_LEADER_EPOCH and "newer" in unknown.error_message
