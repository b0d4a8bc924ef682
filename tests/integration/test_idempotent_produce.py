"""Issue 12, point 2, end to end: a producer's retry is answered with the offsets of its
first attempt, not written twice, even by a new leader after the old one was
SIGKILLed: the followers built the same producer state as they copied the batches.
Raw Produce requests through the gateway with a fixed producer id and epoch (no
transaction coordinator hands out ids yet).
"""

from __future__ import annotations

from collections.abc import Callable

import grpc

from strand import Admin, NewTopic
from strand.errors import ErrorCode
from strand.records import BatchBuilder
from strand.v1 import common_pb2 as pb
from strand.v1 import gateway_pb2_grpc
from tests.support.cluster import SdkCluster, placement
from tests.support.raw_produce import log_end, produce
from tests.support.waiting import wait_until

TOPIC = "idempotent"
PRODUCER_ID, EPOCH = 4242, 0
RETRIABLE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
             ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS,
             ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def batch(sequence: int, count: int = 3, epoch: int = EPOCH) -> bytes:
    builder = BatchBuilder(producer_id=PRODUCER_ID, producer_epoch=epoch,
                           base_sequence=sequence)
    for i in range(count):
        builder.append(b"seq-%d" % (sequence + i))
    return builder.build()


def produce_retrying(stub: gateway_pb2_grpc.GatewayStub,
                     records: bytes) -> pb.PartitionProduceResponse:
    """As a producer does: the same bytes again while the answer is retriable."""
    answers: list[pb.PartitionProduceResponse] = []

    def settled() -> bool:
        answers.append(produce(stub, TOPIC, records, timeout_ms=5_000))
        return int(answers[-1].error_code) not in RETRIABLE

    wait_until(settled, 60, "a non-retriable answer", interval=0.3)
    return answers[-1]


def test_a_retry_after_leader_failover_gets_its_original_offsets(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    cluster = sdk_cluster_factory(nodes=3)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3,
                                      config={"min.insync.replicas": "2"})])
    wait_until(lambda: len(placement(cluster, TOPIC)[0][1]) == 3, 30, "all 3 replicas in sync")
    stub = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(cluster.bootstrap))
    offsets = []
    for sequence in (0, 3, 6):
        answer = produce_retrying(stub, batch(sequence))
        assert int(answer.error_code) == ErrorCode.NONE, answer.error_message
        offsets.append(answer.base_offset)
    assert offsets == [0, 3, 6]
    # The same leader answers a retry from its state.
    again = produce(stub, TOPIC, batch(3))
    assert (int(again.error_code), again.base_offset) == (ErrorCode.NONE, 3)
    assert log_end(stub, TOPIC) == 9

    old_leader = placement(cluster, TOPIC)[0][0]
    assert old_leader is not None
    cluster.storage[old_leader - 1].kill()  # SIGKILL: no snapshot, no clean shutdown
    wait_until(lambda: placement(cluster, TOPIC)[0][0] not in (None, old_leader), 30,
               "a new leader")

    # Retries of the last batches reach the new leader: answered, not written again.
    for sequence, offset in ((6, 6), (0, 0)):
        retry = produce_retrying(stub, batch(sequence))
        assert (int(retry.error_code), retry.base_offset) == (ErrorCode.NONE, offset), \
            retry.error_message
    assert log_end(stub, TOPIC) == 9
    # It checks sequences too: a gap and a zombie's old epoch are refused, nothing written.
    gap = produce_retrying(stub, batch(12))
    assert int(gap.error_code) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, gap.error_message
    assert "last sequence written is 8" in gap.error_message
    following = produce_retrying(stub, batch(9))
    assert (int(following.error_code), following.base_offset) == (ErrorCode.NONE, 9)
    bumped = produce_retrying(stub, batch(0, epoch=1))
    assert int(bumped.error_code) == ErrorCode.NONE
    zombie = produce_retrying(stub, batch(12))
    assert int(zombie.error_code) == ErrorCode.INVALID_PRODUCER_EPOCH, zombie.error_message
    assert log_end(stub, TOPIC) == 15
