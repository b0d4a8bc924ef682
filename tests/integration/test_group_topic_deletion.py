"""Issue 11 point 7, with real processes: the committed offsets of a deleted topic go
with it. Re-created under the same name with fewer partitions, the topic starts clean
for the group (``group describe`` works, a group consumer starts it per
auto.offset.reset), a commit still in flight for the old topic is refused, and the
removal is in ``__consumer_offsets`` (tombstones), so a restarted coordinator keeps
it clean."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import grpc
from click.testing import CliRunner

from services.groups.records import OffsetKey, decode_key
from strand import Admin, Consumer, NewTopic, Producer, TopicPartition
from strand.cli.main import cli
from strand.coordination.shard_fence import FENCE_KEY
from strand.coordination.shards import GROUP_TOPIC, shard_for
from strand.v1 import common_pb2, gateway_pb2_grpc
from strand.v1 import groups_pb2 as pb
from tests.support.waiting import poll_records, wait_until

if TYPE_CHECKING:
    from tests.support.cluster import SdkCluster

TOPIC = "reborn"
GROUP = "rebirth-readers"


def produce(cluster: SdkCluster, partitions: int, per_partition: int) -> None:
    with Producer(cluster.bootstrap, acks="all") as producer:
        for p in range(partitions):
            for i in range(per_partition):
                producer.send(TOPIC, f"{p}-{i}".encode(), partition=p)
        producer.flush(timeout=30)


def group_consumer(cluster: SdkCluster) -> Consumer:
    consumer = Consumer(cluster.bootstrap, group_id=GROUP, auto_offset_reset="earliest",
                        session_timeout_ms=6000, heartbeat_interval_ms=500)
    consumer.subscribe([TOPIC])
    return consumer


def describe(cluster: SdkCluster) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["--bootstrap", cluster.bootstrap, "group", "describe",
                                      GROUP, "--json"])
    assert result.exit_code == 0, result.output
    described: dict[str, Any] = json.loads(result.stdout)
    return described


def committed_in_log(cluster: SdkCluster) -> dict[tuple[str, int], bytes | None]:
    """The latest value of each offset key of the group in its shard of
    __consumer_offsets, read as a plain consumer (what a new coordinator loads)."""
    with Admin(cluster.bootstrap) as admin:
        shards = len(admin.describe_topics([GROUP_TOPIC])[0].partitions)
    tp = TopicPartition(GROUP_TOPIC, shard_for(GROUP, shards))
    latest: dict[tuple[str, int], bytes | None] = {}
    with Consumer(cluster.bootstrap) as reader:
        reader.assign([tp])
        reader.seek_to_beginning(tp)
        end = reader.end_offsets([tp])[tp]
        while reader.position(tp) < end:
            for records in reader.poll(timeout_ms=500).values():
                for record in records:
                    if record.key == FENCE_KEY:  # an owner's fence, not the group's
                        continue
                    key = decode_key(record.key or b"")
                    if isinstance(key, OffsetKey) and key.group == GROUP:
                        latest[(key.topic, key.partition)] = record.value
    return latest


def test_a_deleted_topic_takes_its_offsets_and_a_recreated_one_starts_clean(
        group_cluster: SdkCluster) -> None:
    cluster = group_cluster
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 4, 1)])
        old_id = admin.describe_topics([TOPIC])[0].topic_id
    produce(cluster, 4, 2)
    with group_consumer(cluster) as consumer:
        assert len(poll_records(consumer, 8, timeout=60)) == 8
        consumer.commit()
    with Admin(cluster.bootstrap) as admin:
        assert admin.list_group_offsets(GROUP) == {TopicPartition(TOPIC, p): 2 for p in range(4)}
        admin.delete_topics([TOPIC])
        admin.create_topics([NewTopic(TOPIC, 2, 1)])
    produce(cluster, 2, 5)

    # A commit for the old topic still in flight is refused, not applied to the new one.
    with grpc.insecure_channel(cluster.bootstrap) as channel:
        late = gateway_pb2_grpc.GatewayStub(channel).OffsetCommit(pb.OffsetCommitRequest(
            group_id=GROUP, generation_id=-1, partitions=[pb.OffsetCommitPartition(
                topic=TOPIC, partition=0, offset=1, topic_id=old_id)]), timeout=30)
    assert late.error_code == common_pb2.ErrorCode.Value("UNKNOWN_TOPIC_ID"), late
    assert "deleted and re-created" in late.error_message

    described = describe(cluster)  # UNKNOWN_TOPIC_OR_PARTITION before the fix
    assert described["partitions"] == [], described
    # The old offsets are tombstoned in the shard's log.
    wait_until(lambda: all(committed_in_log(cluster).get((TOPIC, p), b"") is None
                           for p in range(4)), 30, "tombstones for the deleted topic's offsets")

    # The group starts the new topic per auto.offset.reset (earliest): all 10 records,
    # not 3 of each partition from the old topic's offset 2.
    with group_consumer(cluster) as consumer:
        records = poll_records(consumer, 10, timeout=60)
        assert sorted((r.partition, r.offset) for r in records) == \
            [(p, o) for p in range(2) for o in range(5)]
        consumer.commit()
    expected = {TopicPartition(TOPIC, p): 5 for p in range(2)}

    # A restarted coordinator loads the shard's log: still clean.
    victim = cluster.coordinators[0]
    victim.kill()
    cluster.coordinators[0] = cluster.group_coordinator(0, victim.listen_port).start()
    cluster.wait_coordinators_settled()
    with Admin(cluster.bootstrap) as admin:
        wait_until(lambda: admin.list_group_offsets(GROUP) == expected, 60,
                   "the restarted coordinator to serve the group's offsets")
    rows = describe(cluster)["partitions"]
    assert [(r["partition"], r["committed"], r["lag"]) for r in rows] == [(0, 5, 0), (1, 5, 0)]
