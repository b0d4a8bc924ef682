"""Issue 11, point 1, end to end: batches with a correct CRC and a lying body, sent
through the gateway's raw Produce API to a partition replicated on 3 nodes, are refused
with Kafka's code; the log end offset does not move, a consumer reads every valid
record (those before the bad batch included) and the three replicas hold the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc

from strand import Admin, Consumer, NewTopic
from strand.errors import ErrorCode
from strand.v1 import gateway_pb2_grpc
from tests.support.cluster import SdkCluster, placement
from tests.support.malformed import ISSUE_CASES, valid_batch
from tests.support.raw_produce import log_end, produce
from tests.support.waiting import wait_until

TOPIC = "lies"


def segment_bytes(data_dir: Path) -> bytes:
    return b"".join(path.read_bytes()
                    for path in sorted((data_dir / f"{TOPIC}-0").glob("*.log")))


def test_lying_batches_are_refused_and_the_partition_stays_whole(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    cluster = sdk_cluster_factory(nodes=3)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3,
                                      config={"min.insync.replicas": "3"})])
    wait_until(lambda: len(placement(cluster, TOPIC)[0][1]) == 3, 30, "all 3 replicas in sync")
    stub = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(cluster.bootstrap))
    expected: list[bytes] = []

    def good(tag: str) -> None:
        answer = produce(stub, TOPIC, valid_batch(3, tag))
        assert int(answer.error_code) == ErrorCode.NONE, answer.error_message
        expected.extend(f"{tag}-{i}".encode() for i in range(3))

    wait_until(lambda: int(produce(stub, TOPIC, valid_batch(1, "warm")).error_code)
               == ErrorCode.NONE, 30, "the leader to take writes")
    expected.append(b"warm-0")
    good("before")
    for name, (build, code) in ISSUE_CASES.items():
        end = log_end(stub, TOPIC)
        answer = produce(stub, TOPIC, build())
        assert int(answer.error_code) == code, f"{name}: {answer.error_code} {answer.error_message}"
        assert answer.error_message, name
        assert log_end(stub, TOPIC) == end, f"{name} moved the log end offset"
        # A good batch in the same request as a bad one is not written either.
        answer = produce(stub, TOPIC, valid_batch(2, "dropped") + build())
        assert int(answer.error_code) == code, name
        assert log_end(stub, TOPIC) == end, name
    good("after")

    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(TOPIC, 0)])
        got: list[bytes] = []

        def read_all() -> bool:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value or b"" for r in records)
            return len(got) >= len(expected)

        wait_until(read_all, 30, "a consumer to read every valid record")
    assert got == expected
    assert log_end(stub, TOPIC) == len(expected)

    replicas = [segment_bytes(cluster.data_dir(node)) for node in (1, 2, 3)]
    assert replicas[0] and replicas[0] == replicas[1] == replicas[2]
