"""Helpers of the storage-node integration tests (a module of helpers: no tests).

Partitions are assigned by writing TopicRecord/PartitionRecord JSON into etcd
directly, as the controller would: these tests need no controller.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from etcd3aio import prefix_range_end

from strand.cluster.etcd import connect
from strand.cluster.keys import KeySpace
from strand.cluster.model import PartitionRecord, TopicRecord
from strand.launcher import EtcdServer, ServiceProcess
from strand.records import BatchBuilder, Compression, Record, iter_record_batches
from strand.records.record import Header
from strand.v1 import common_pb2 as pb
from strand.v1 import storage_pb2_grpc
from tests.support.waiting import wait_until

CLUSTER = "storage-test"
KEYS = KeySpace(CLUSTER)
# Recent, so that retention (7 days by default) leaves the test data alone.
BASE_TS = (time.time_ns() // 1_000_000) - 60_000


def start_storage(etcd: EtcdServer, tmp_path: Path, node_id: int = 1,
                  *extra: str) -> ServiceProcess:
    """A storage node with data under ``tmp_path/node-<id>`` (the same on restarts)."""
    process = ServiceProcess(
        "storage",
        ["--etcd", etcd.endpoint, "--cluster", CLUSTER, "--node-id", str(node_id),
         "--data-dir", str(data_dir(tmp_path, node_id)), "--lease-ttl", "2",
         "--maintenance-interval", "0.5", *extra],
        tmp_path / f"storage-{node_id}.log")
    return process.start()


def restart(process: ServiceProcess) -> ServiceProcess:
    """The same node again (same flags, same listen port, same data)."""
    return process.start()


def data_dir(tmp_path: Path, node_id: int = 1) -> Path:
    return tmp_path / f"node-{node_id}"


# -- metadata in etcd -------------------------------------------------------------------------


def put_topic(etcd: EtcdServer, name: str, partitions: int = 1, *,
              leaders: Mapping[int, int] | None = None, leader: int = 1,
              replicas: Sequence[int] | None = None, leader_epoch: int = 0,
              config: Mapping[str, str] | None = None, topic_id: str | None = None,
              ) -> TopicRecord:
    """Assign ``name``'s partitions (leader ``leader`` unless ``leaders`` says otherwise)."""
    topic = TopicRecord(name, topic_id or f"id-{name}-{time.monotonic_ns()}", partitions,
                        1, dict(config or {}))
    records = []
    for p in range(partitions):
        lead = (leaders or {}).get(p, leader)
        nodes = tuple(replicas) if replicas is not None else (lead,)
        records.append(PartitionRecord(name, p, nodes, lead, leader_epoch, (lead,)))
    put_records(etcd, records, topic)
    return topic


def put_records(etcd: EtcdServer, partitions: Iterable[PartitionRecord],
                topic: TopicRecord | None = None) -> None:
    """Partition records first and the topic record last, as the controller writes them."""
    async def write() -> None:
        client = await connect([etcd.endpoint])
        try:
            for record in partitions:
                await client.kv.put(KEYS.partition(record.topic, record.partition),
                                    record.to_json())
            if topic is not None:
                await client.kv.put(KEYS.topic(topic.name), topic.to_json())
        finally:
            await client.close()

    asyncio.run(write())


def delete_topic(etcd: EtcdServer, name: str) -> None:
    async def delete() -> None:
        client = await connect([etcd.endpoint])
        try:
            await client.kv.delete(KEYS.topic(name))
            prefix = KEYS.topic_partitions(name)
            await client.kv.delete(prefix, range_end=prefix_range_end(prefix.encode()))
        finally:
            await client.close()

    asyncio.run(delete())


@dataclass(frozen=True)
class StoredKey:
    value: bytes
    lease: int


def get_key(etcd: EtcdServer, key: str) -> StoredKey | None:
    async def get() -> StoredKey | None:
        client = await connect([etcd.endpoint])
        try:
            response = await client.kv.get(key)
        finally:
            await client.close()
        if not response.kvs:
            return None
        return StoredKey(bytes(response.kvs[0].value), int(response.kvs[0].lease))

    return asyncio.run(get())


def revoke_lease(etcd: EtcdServer, lease_id: int) -> None:
    async def revoke() -> None:
        client = await connect([etcd.endpoint])
        try:
            await client.lease.revoke(lease_id)
        finally:
            await client.close()

    asyncio.run(revoke())


# -- record batches ---------------------------------------------------------------------------


def make_batch(values: Sequence[bytes | None], *, keys: Sequence[bytes | None] | None = None,
               headers: Sequence[Sequence[Header]] | None = None,
               compression: Compression = Compression.NONE, timestamp: int = BASE_TS,
               timestamp_step: int = 0) -> bytes:
    builder = BatchBuilder(compression=compression)
    for i, value in enumerate(values):
        builder.append(value, key=None if keys is None else keys[i],
                       headers=() if headers is None else headers[i],
                       timestamp=timestamp + i * timestamp_step)
    return builder.build()


def decode(records: bytes) -> list[Record]:
    return [record for batch in iter_record_batches(records) for record in batch.records()]


# -- the client ------------------------------------------------------------------------------


class StorageClient:
    """A synchronous client of one storage node (one channel)."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address, options=[
            ("grpc.max_receive_message_length", 64 << 20),
            ("grpc.max_send_message_length", 64 << 20)])
        self.stub = storage_pb2_grpc.StorageStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def produce_request(self, data: Mapping[tuple[str, int], bytes],
                        acks: int = -1) -> pb.ProduceResponse:
        topics: dict[str, list[pb.PartitionProduceData]] = {}
        for (topic, partition), records in data.items():
            topics.setdefault(topic, []).append(
                pb.PartitionProduceData(partition=partition, records=records))
        response: pb.ProduceResponse = self.stub.Produce(pb.ProduceRequest(
            acks=acks, timeout_ms=5000, topics=[pb.TopicProduceData(topic=t, partitions=ps)
                                                for t, ps in topics.items()]), timeout=10)
        return response

    def produce(self, topic: str, partition: int, records: bytes,
                acks: int = -1) -> pb.PartitionProduceResponse:
        response = self.produce_request({(topic, partition): records}, acks)
        answer: pb.PartitionProduceResponse = response.topics[0].partitions[0]
        return answer

    def fetch_request(self, offsets: Mapping[tuple[str, int], int], *, max_wait_ms: int = 0,
                      min_bytes: int = 1, max_bytes: int = 1 << 20,
                      partition_max_bytes: int = 1 << 20, leader_epoch: int = -1,
                      ) -> pb.FetchRequest:
        topics: dict[str, list[pb.PartitionFetchData]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(pb.PartitionFetchData(
                partition=partition, fetch_offset=offset,
                partition_max_bytes=partition_max_bytes, current_leader_epoch=leader_epoch))
        return pb.FetchRequest(max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                               max_bytes=max_bytes, topics=[
                                   pb.TopicFetchData(topic=t, partitions=ps)
                                   for t, ps in topics.items()])

    def fetch_many(self, offsets: Mapping[tuple[str, int], int],
                   **kwargs: int) -> dict[tuple[str, int], pb.PartitionFetchResponse]:
        response = self.stub.Fetch(self.fetch_request(offsets, **kwargs), timeout=30)
        return {(t.topic, p.partition): p for t in response.topics for p in t.partitions}

    def fetch(self, topic: str, partition: int, offset: int,
              **kwargs: int) -> pb.PartitionFetchResponse:
        return self.fetch_many({(topic, partition): offset}, **kwargs)[(topic, partition)]

    def list_offset(self, topic: str, partition: int,
                    timestamp: int) -> pb.PartitionListOffsetsResponse:
        response = self.stub.ListOffsets(pb.ListOffsetsRequest(topics=[pb.TopicListOffsets(
            topic=topic, partitions=[pb.PartitionListOffsets(partition=partition,
                                                             timestamp=timestamp)])]),
            timeout=10)
        answer: pb.PartitionListOffsetsResponse = response.topics[0].partitions[0]
        return answer

    def latest(self, topic: str, partition: int) -> int:
        answer = self.list_offset(topic, partition, -1)
        assert answer.error_code == pb.NONE, answer
        return int(answer.offset)

    def wait_until_led(self, topic: str, partitions: Iterable[int] = (0,),
                       timeout: float = 10) -> None:
        """Until this node answers for the partitions (the metadata watch is async)."""
        for partition in partitions:
            def led(p: int = partition) -> bool:
                return bool(self.list_offset(topic, p, -1).error_code == pb.NONE)

            wait_until(led, timeout, f"the node to lead {topic}-{partition}")

    def read_all(self, topic: str, partition: int, start: int = 0) -> list[Record]:
        """Every record from ``start`` to the high watermark."""
        out: list[Record] = []
        offset = start
        while True:
            answer = self.fetch(topic, partition, offset)
            assert answer.error_code == pb.NONE, answer
            records = [r for r in decode(answer.records) if r.offset >= offset]
            if not records:
                return out
            out.extend(records)
            offset = records[-1].offset + 1
