"""Produce, fetch and list offsets against a real storage node (real etcd, real process)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from strand.launcher import EtcdServer, ServiceProcess
from strand.records import Compression, RecordBatch, iter_record_batches
from strand.v1 import common_pb2 as pb
from tests.integration.test_storage_support import (
    BASE_TS,
    StorageClient,
    decode,
    make_batch,
    put_topic,
    start_storage,
)


@pytest.fixture
def node(etcd: EtcdServer, tmp_path: Path) -> Iterator[ServiceProcess]:
    process = start_storage(etcd, tmp_path)
    yield process
    process.stop()


@pytest.fixture
def client(node: ServiceProcess) -> Iterator[StorageClient]:
    storage = StorageClient(node.address)
    yield storage
    storage.close()


def test_round_trip_over_partitions_with_every_codec(etcd: EtcdServer,
                                                    client: StorageClient) -> None:
    codecs = list(Compression)
    put_topic(etcd, "events", len(codecs), leader_epoch=3)
    client.wait_until_led("events", range(len(codecs)))

    sent = {}
    for p, codec in enumerate(codecs):
        values = [f"{codec.name}-{i}".encode() * 20 for i in range(5)] + [None]
        keys = [f"key-{i}".encode() for i in range(5)] + [None]
        headers = [[("trace", f"{p}-{i}".encode()), ("empty", None)] for i in range(6)]
        sent[p] = (values, keys, headers, codec)
    first = {("events", p): make_batch(v[:3], keys=k[:3], headers=h[:3], compression=c)
             for p, (v, k, h, c) in sent.items()}
    second = {("events", p): make_batch(v[3:], keys=k[3:], headers=h[3:], compression=c)
              for p, (v, k, h, c) in sent.items()}
    # One request carries every partition; a second one appends after the first.
    for request, base in ((first, 0), (second, 3)):
        response = client.produce_request(request, acks=-1)
        answers = [p for t in response.topics for p in t.partitions]
        assert sorted(a.partition for a in answers) == list(range(len(codecs)))
        for answer in answers:
            assert answer.error_code == pb.NONE, answer
            assert answer.base_offset == base
            assert answer.log_append_time_ms == -1
            assert answer.log_start_offset == 0

    fetched = client.fetch_many({("events", p): 0 for p in sent})
    for p, (values, keys, headers, codec) in sent.items():
        answer = fetched[("events", p)]
        assert answer.error_code == pb.NONE, answer
        assert (answer.high_watermark, answer.last_stable_offset, answer.log_start_offset) == (
            6, 6, 0)
        batches = list(iter_record_batches(answer.records))
        assert [b.header.base_offset for b in batches] == [0, 3]
        assert all(b.header.compression == codec for b in batches)
        assert all(b.header.partition_leader_epoch == 3 for b in batches)  # stamped
        records = [r for b in batches for r in b.records()]
        assert [r.offset for r in records] == list(range(6))
        assert [r.value for r in records] == values
        assert [r.key for r in records] == keys
        assert [r.headers for r in records] == headers
        assert all(r.timestamp == BASE_TS for r in records)


def test_acks_zero_one_and_all_are_accepted(etcd: EtcdServer, client: StorageClient) -> None:
    put_topic(etcd, "acks")
    client.wait_until_led("acks")
    for expected_offset, acks in enumerate((0, 1, -1)):
        answer = client.produce("acks", 0, make_batch([b"v"]), acks=acks)
        assert answer.error_code == pb.NONE, answer
        assert answer.base_offset == expected_offset
    assert client.latest("acks", 0) == 3


def test_concurrent_appends_to_one_partition_get_distinct_offsets(
        etcd: EtcdServer, node: ServiceProcess, client: StorageClient) -> None:
    put_topic(etcd, "busy")
    client.wait_until_led("busy")
    clients = [StorageClient(node.address) for _ in range(4)]
    try:
        calls = [clients[i % 4].stub.Produce.future(pb.ProduceRequest(acks=1, topics=[
            pb.TopicProduceData(topic="busy", partitions=[pb.PartitionProduceData(
                partition=0, records=make_batch([f"m{i}".encode()] * 2))])]), timeout=10)
            for i in range(40)]
        offsets = sorted(c.result().topics[0].partitions[0].base_offset for c in calls)
    finally:
        for other in clients:
            other.close()
    assert offsets == list(range(0, 80, 2))
    records = client.read_all("busy", 0)
    assert [r.offset for r in records] == list(range(80))
    assert sorted(r.value or b"" for r in records) == sorted(
        f"m{i}".encode() for i in range(40) for _ in range(2))


def test_fetch_size_limits_return_the_first_batch_whole(etcd: EtcdServer,
                                                        client: StorageClient) -> None:
    put_topic(etcd, "sizes", 3)
    client.wait_until_led("sizes", range(3))
    big = make_batch([b"x" * 5000])  # larger than every limit below
    small = make_batch([b"y" * 100])
    for p in range(3):
        assert client.produce("sizes", p, big).error_code == pb.NONE
        assert client.produce("sizes", p, small).error_code == pb.NONE
    offsets = {("sizes", p): 0 for p in range(3)}

    # KIP-74: the first batch of the first partition with data comes whole; the rest of
    # the response respects partition_max_bytes and max_bytes.
    fetched = client.fetch_many(offsets, max_bytes=1000, partition_max_bytes=500)
    assert fetched[("sizes", 0)].records == _stored(big, 0)
    assert fetched[("sizes", 1)].records == b""
    assert fetched[("sizes", 2)].records == b""
    assert all(f.high_watermark == 2 for f in fetched.values())

    # Reading past the big batch: small ones fit partition_max_bytes, up to max_bytes.
    offsets = {("sizes", p): 1 for p in range(3)}
    fetched = client.fetch_many(offsets, max_bytes=2 * len(small), partition_max_bytes=500)
    assert [len(fetched[("sizes", p)].records) for p in range(3)] == [
        len(small), len(small), 0]

    # A roomy fetch returns both batches of every partition.
    fetched = client.fetch_many({("sizes", p): 0 for p in range(3)})
    assert all(len(f.records) == len(big) + len(small) for f in fetched.values())


def _stored(batch: bytes, base_offset: int, epoch: int = 0) -> bytes:
    """``batch`` as the log holds it: stamped with its offset and leader epoch."""
    stamped = bytearray(batch)
    stamped[0:8] = base_offset.to_bytes(8, "big")
    stamped[12:16] = epoch.to_bytes(4, "big")
    RecordBatch(stamped)  # still valid: the stamp lies outside the CRC
    return bytes(stamped)


def test_list_offsets_earliest_latest_and_by_timestamp(etcd: EtcdServer,
                                                      client: StorageClient) -> None:
    put_topic(etcd, "times", leader_epoch=2)
    client.wait_until_led("times")
    empty = client.list_offset("times", 0, -1)
    assert (empty.error_code, empty.offset) == (pb.NONE, 0)
    for base in (0, 10, 20):  # three batches of ten records, 1 ms apart
        batch = make_batch([b"v"] * 10, timestamp=BASE_TS + base, timestamp_step=1)
        assert client.produce("times", 0, batch).error_code == pb.NONE

    earliest = client.list_offset("times", 0, -2)
    assert (earliest.error_code, earliest.offset, earliest.timestamp) == (pb.NONE, 0, -1)
    assert earliest.leader_epoch == 2
    latest = client.list_offset("times", 0, -1)
    assert (latest.offset, latest.timestamp, latest.leader_epoch) == (30, -1, 2)
    for wanted, offset in ((0, 0), (BASE_TS, 0), (BASE_TS + 15, 15), (BASE_TS + 29, 29)):
        answer = client.list_offset("times", 0, wanted)
        assert (answer.error_code, answer.offset, answer.timestamp) == (
            pb.NONE, offset, max(wanted, BASE_TS))
        assert answer.leader_epoch == 2
    after = client.list_offset("times", 0, BASE_TS + 30)
    assert (after.error_code, after.offset, after.timestamp) == (pb.NONE, -1, -1)
    bad = client.list_offset("times", 0, -7)
    assert bad.error_code == pb.INVALID_REQUEST


def test_log_append_time_topic_stamps_the_broker_time(etcd: EtcdServer,
                                                      client: StorageClient) -> None:
    put_topic(etcd, "appendtime", config={"message.timestamp.type": "LogAppendTime"})
    client.wait_until_led("appendtime")
    answer = client.produce("appendtime", 0, make_batch([b"a", b"b"], timestamp=1))
    assert answer.error_code == pb.NONE
    assert answer.log_append_time_ms > BASE_TS
    records = decode(client.fetch("appendtime", 0, 0).records)
    assert [r.timestamp for r in records] == [answer.log_append_time_ms] * 2
