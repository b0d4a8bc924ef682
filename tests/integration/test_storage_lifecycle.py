"""A storage node over time: restarts, membership, metadata changes, topic deletion."""

from __future__ import annotations

import json
import time
from pathlib import Path

from services.storage.layout import read_topic_id, write_topic_id
from strand.cluster.model import PartitionRecord, TopicRecord
from strand.launcher import EtcdServer
from strand.log.checkpoint import CLEAN_SHUTDOWN_FILE
from strand.log.config import LogConfig
from strand.log.log import PartitionLog
from strand.records import BatchBuilder
from strand.v1 import common_pb2 as pb
from tests.integration.test_storage_support import (
    KEYS,
    StorageClient,
    data_dir,
    delete_topic,
    get_key,
    make_batch,
    put_records,
    put_topic,
    restart,
    revoke_lease,
    start_storage,
)
from tests.support.waiting import wait_until


def _produce_values(client: StorageClient, topic: str, partition: int, count: int,
                    prefix: str = "v") -> None:
    for i in range(count):
        answer = client.produce(topic, partition, make_batch([f"{prefix}{i}".encode()]))
        assert answer.error_code == pb.NONE, answer


def test_restart_after_sigterm_keeps_and_serves_data(etcd: EtcdServer, tmp_path: Path) -> None:
    put_topic(etcd, "durable", 2)
    node = start_storage(etcd, tmp_path)
    client = StorageClient(node.address)
    client.wait_until_led("durable", range(2))
    _produce_values(client, "durable", 0, 5)
    _produce_values(client, "durable", 1, 3)
    waiting = client.stub.Fetch.future(
        client.fetch_request({("durable", 0): 5}, max_wait_ms=20_000), timeout=30)
    started = time.monotonic()
    node.stop()  # SIGTERM: the waiting fetch is answered, every log closed cleanly
    assert time.monotonic() - started < 5
    assert waiting.result().topics[0].partitions[0].error_code == pb.NONE
    client.close()
    assert node.process is not None and node.process.returncode == 0
    for p in range(2):
        assert (data_dir(tmp_path) / f"durable-{p}" / CLEAN_SHUTDOWN_FILE).exists()
    assert get_key(etcd, KEYS.broker(1)) is None  # lease revoked: deregistered at once

    node = restart(node)
    client = StorageClient(node.address)
    try:
        assert [r.value for r in client.read_all("durable", 0)] == [
            f"v{i}".encode() for i in range(5)]
        assert client.latest("durable", 1) == 3
        assert client.produce("durable", 0, make_batch([b"more"])).base_offset == 5
    finally:
        client.close()
        node.stop()


def test_restart_after_sigkill_keeps_and_serves_data(etcd: EtcdServer, tmp_path: Path) -> None:
    put_topic(etcd, "crashy")
    node = start_storage(etcd, tmp_path)
    client = StorageClient(node.address)
    client.wait_until_led("crashy")
    _produce_values(client, "crashy", 0, 20)
    client.close()
    node.kill()  # SIGKILL: no clean-shutdown marker, the logs are recovered on open
    assert not (data_dir(tmp_path) / "crashy-0" / CLEAN_SHUTDOWN_FILE).exists()
    registered = get_key(etcd, KEYS.broker(1))
    assert registered is not None  # the old lease has not expired yet

    node = restart(node)
    client = StorageClient(node.address)
    try:
        # Registered again, under a new lease (the old one's expiry must not remove it).
        current = get_key(etcd, KEYS.broker(1))
        assert current is not None and current.lease != registered.lease
        assert [r.value for r in client.read_all("crashy", 0)] == [
            f"v{i}".encode() for i in range(20)]
        assert client.latest("crashy", 0) == 20
        assert client.produce("crashy", 0, make_batch([b"after"])).base_offset == 20
    finally:
        client.close()
        node.stop()


def test_registration_is_bound_to_a_lease_and_renewed_after_loss(
        etcd: EtcdServer, tmp_path: Path) -> None:
    node = start_storage(etcd, tmp_path, 7, "--rack", "zone-a")
    try:
        stored = get_key(etcd, KEYS.broker(7))
        assert stored is not None and stored.lease != 0
        # The broker epoch (KIP-380) is the id of the lease the registration lives under.
        assert json.loads(stored.value) == {
            "node_id": 7, "host": "127.0.0.1", "port": node.listen_port, "rack": "zone-a",
            "epoch": stored.lease}
        revoke_lease(etcd, stored.lease)  # as if the lease had expired
        wait_until(lambda: (k := get_key(etcd, KEYS.broker(7))) is not None
                   and k.lease != stored.lease, 10, "the node to register again")
        again = get_key(etcd, KEYS.broker(7))
        assert again is not None and json.loads(again.value)["epoch"] == again.lease
    finally:
        node.stop()
    assert get_key(etcd, KEYS.broker(7)) is None


def test_topic_deletion_closes_and_removes_the_directory(etcd: EtcdServer,
                                                        tmp_path: Path) -> None:
    put_topic(etcd, "doomed", 2)
    put_topic(etcd, "kept")
    node = start_storage(etcd, tmp_path)
    client = StorageClient(node.address)
    try:
        client.wait_until_led("doomed", range(2))
        _produce_values(client, "doomed", 0, 3)
        _produce_values(client, "kept", 0, 2)
        assert (data_dir(tmp_path) / "doomed-0").is_dir()
        waiting = client.stub.Fetch.future(
            client.fetch_request({("doomed", 0): 3}, max_wait_ms=20_000), timeout=30)
        delete_topic(etcd, "doomed")
        answer = waiting.result().topics[0].partitions[0]  # at once, not after 20 s
        assert answer.error_code == pb.UNKNOWN_TOPIC_OR_PARTITION
        wait_until(lambda: not (data_dir(tmp_path) / "doomed-0").exists()
                   and not (data_dir(tmp_path) / "doomed-1").exists(),
                   10, "the deleted topic's directories to go")
        assert client.produce("doomed", 0, make_batch([b"v"])).error_code == (
            pb.UNKNOWN_TOPIC_OR_PARTITION)
        assert client.latest("kept", 0) == 2

        # Created again under the same name: a new, empty topic.
        put_topic(etcd, "doomed", 1)
        client.wait_until_led("doomed")
        assert client.latest("doomed", 0) == 0
        assert client.produce("doomed", 0, make_batch([b"new"])).base_offset == 0
    finally:
        client.close()
        node.stop()


def test_stale_directory_of_an_older_topic_is_not_served(etcd: EtcdServer,
                                                         tmp_path: Path) -> None:
    put_topic(etcd, "reborn", topic_id="first")
    node = start_storage(etcd, tmp_path)
    client = StorageClient(node.address)
    client.wait_until_led("reborn")
    _produce_values(client, "reborn", 0, 4)
    client.close()
    node.stop()
    # Deleted and created again while the node was down: a new topic id.
    put_topic(etcd, "reborn", topic_id="second")
    node = restart(node)
    client = StorageClient(node.address)
    try:
        assert client.latest("reborn", 0) == 0
        assert read_topic_id(data_dir(tmp_path) / "reborn-0") == "second"
    finally:
        client.close()
        node.stop()


def test_leadership_changes_are_followed(etcd: EtcdServer, tmp_path: Path) -> None:
    put_topic(etcd, "moving", replicas=(1, 2))
    node = start_storage(etcd, tmp_path)
    client = StorageClient(node.address)
    try:
        client.wait_until_led("moving")
        _produce_values(client, "moving", 0, 2)
        put_records(etcd, [PartitionRecord("moving", 0, (1, 2), 2, 1, (2,))])
        wait_until(lambda: client.produce("moving", 0, make_batch([b"x"])).error_code
                   == pb.NOT_LEADER_OR_FOLLOWER, 10, "the node to stop leading")
        assert client.fetch("moving", 0, 0).error_code == pb.NOT_LEADER_OR_FOLLOWER
        put_records(etcd, [PartitionRecord("moving", 0, (1, 2), 1, 2, (1,))])
        client.wait_until_led("moving")
        assert client.produce("moving", 0, make_batch([b"back"])).base_offset == 2
        assert client.fetch("moving", 0, 0, leader_epoch=2).error_code == pb.NONE
        stored = client.fetch("moving", 0, 2).records
        assert stored[12:16] == (2).to_bytes(4, "big")  # stamped with the new leader epoch
    finally:
        client.close()
        node.stop()


def test_topic_config_changes_are_applied(etcd: EtcdServer, tmp_path: Path) -> None:
    topic = put_topic(etcd, "tunable")
    node = start_storage(etcd, tmp_path)
    client = StorageClient(node.address)
    try:
        client.wait_until_led("tunable")
        batch = make_batch([b"x" * 3000])
        assert client.produce("tunable", 0, batch).error_code == pb.NONE
        put_records(etcd, [], TopicRecord(topic.name, topic.topic_id, 1, 1,
                                          {"max.message.bytes": "1000"}))
        wait_until(lambda: client.produce("tunable", 0, batch).error_code
                   == pb.MESSAGE_TOO_LARGE, 10, "the new max.message.bytes to apply")
        assert client.latest("tunable", 0) == 1
    finally:
        client.close()
        node.stop()


def test_retention_runs_in_the_background(etcd: EtcdServer, tmp_path: Path) -> None:
    put_topic(etcd, "short", config={"segment.bytes": "300", "retention.bytes": "400"})
    node = start_storage(etcd, tmp_path)
    client = StorageClient(node.address)
    try:
        client.wait_until_led("short")
        _produce_values(client, "short", 0, 10, prefix="x" * 150)  # one segment each
        wait_until(lambda: client.list_offset("short", 0, -2).offset > 0, 10,
                   "retention to delete old segments")
        earliest = client.list_offset("short", 0, -2).offset
        assert client.latest("short", 0) == 10
        assert client.fetch("short", 0, 0).error_code == pb.OFFSET_OUT_OF_RANGE
        assert client.fetch("short", 0, earliest).log_start_offset == earliest
    finally:
        client.close()
        node.stop()


def test_compaction_runs_in_the_background(etcd: EtcdServer, tmp_path: Path) -> None:
    put_topic(etcd, "table", config={"cleanup.policy": "compact", "segment.bytes": "200",
                                     "min.cleanable.dirty.ratio": "0.01"})
    node = start_storage(etcd, tmp_path)
    client = StorageClient(node.address)
    try:
        client.wait_until_led("table")
        for i in range(12):  # three keys, each written four times; a segment per batch
            batch = make_batch([f"value-{i}".encode() * 4], keys=[f"key-{i % 3}".encode()])
            assert client.produce("table", 0, batch).error_code == pb.NONE
        wait_until(lambda: len(client.read_all("table", 0)) < 12, 10, "compaction")
        latest: dict[bytes | None, bytes | None] = {}
        for record in client.read_all("table", 0):
            latest[record.key] = record.value
        assert latest == {f"key-{i % 3}".encode(): f"value-{i}".encode() * 4
                          for i in range(9, 12)}
        assert client.latest("table", 0) == 12  # offsets are kept
    finally:
        client.close()
        node.stop()


def test_update_config_applies_to_the_active_segment(tmp_path: Path) -> None:
    """PartitionLog.update_config (used by the storage node for config changes)."""
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    try:
        builder = BatchBuilder()
        builder.append(b"x" * 500)
        batch = builder.build()
        log.append_as_leader(batch, 0)
        log.append_as_leader(batch, 0)
        assert len(log.segments) == 1
        smaller = LogConfig.from_properties({"segment.bytes": "1000",
                                             "max.message.bytes": "2000"})
        log.update_config(smaller)
        assert log.config == smaller and all(s.config == smaller for s in log.segments)
        log.append_as_leader(batch, 0)  # the active segment is full under the new size
        assert len(log.segments) == 2
        assert log.segments[-1].config == smaller
    finally:
        log.close()


def test_a_log_that_cannot_be_opened_is_reported_not_fatal(etcd: EtcdServer,
                                                           tmp_path: Path) -> None:
    topic = put_topic(etcd, "broken", 2)
    damaged = data_dir(tmp_path) / "broken-0"
    damaged.mkdir(parents=True)
    write_topic_id(damaged, topic.topic_id)
    (damaged / "offsets-checkpoint").write_text("not a checkpoint\n")
    node = start_storage(etcd, tmp_path)  # healthy: one bad log does not stop the node
    client = StorageClient(node.address)
    try:
        client.wait_until_led("broken", [1])
        answer = client.produce("broken", 0, make_batch([b"v"]))
        assert answer.error_code == pb.KAFKA_STORAGE_ERROR
        assert "offsets checkpoint" in answer.error_message
        assert client.produce("broken", 1, make_batch([b"v"])).error_code == pb.NONE
    finally:
        client.close()
        node.stop()
