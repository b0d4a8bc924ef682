"""ListGroups while coordinator shards move (real processes): every answer is either
complete or names the shards of ``__consumer_offsets`` it lacks, never a list that
looks complete and is not (Kafka answers COORDINATOR_LOAD_IN_PROGRESS per broker).

A coordinator instance is killed (its shards have no live owner until its lease
expires, then another instance loads them) and started again (rendezvous hashing
hands some shards back: released, taken, loaded), while a thread lists the groups
through the gateway with a short wait, so answers land inside those windows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import grpc
import pytest

from strand import Admin, NewTopic, TopicPartition
from strand.coordination.shards import shard_for
from strand.errors import CoordinatorLoadInProgressError, CoordinatorNotAvailableError
from strand.v1 import common_pb2, gateway_pb2_grpc
from strand.v1 import groups_pb2 as pb
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from tests.support.cluster import SdkCluster

SHARDS = 4  # the SDK tests' coordinators run with --shards 4 (tests.support.cluster)
INCOMPLETE = {common_pb2.ErrorCode.Value("COORDINATOR_LOAD_IN_PROGRESS"),
              common_pb2.ErrorCode.Value("COORDINATOR_NOT_AVAILABLE")}


def group_names(per_shard: int) -> dict[str, int]:
    """Group ids covering every shard ``per_shard`` times, with their shards."""
    names: dict[str, int] = {}
    counts = dict.fromkeys(range(SHARDS), 0)
    i = 0
    while min(counts.values()) < per_shard:
        name, i = f"listed-{i}", i + 1
        shard = shard_for(name, SHARDS)
        if counts[shard] < per_shard:
            counts[shard] += 1
            names[name] = shard
    return names


def check(answer: pb.ListGroupsResponse, groups: dict[str, int]) -> bool:
    """Asserts the answer is complete or says what it lacks; True when complete."""
    listed = {g.group_id for g in answer.groups}
    if answer.error_code == 0:
        assert sorted(answer.listed_shards) == list(range(SHARDS)), answer
        assert not answer.unavailable_shards, answer
        assert set(groups) <= listed, (sorted(set(groups) - listed), answer)
        return True
    assert answer.error_code in INCOMPLETE, answer
    lacking = set(answer.unavailable_shards)
    assert lacking, answer
    assert lacking.isdisjoint(answer.listed_shards), answer
    assert lacking | set(answer.listed_shards) == set(range(SHARDS)), answer
    for shard in lacking:
        assert f"shard {shard}:" in answer.error_message, answer.error_message
    expected = {g for g, shard in groups.items() if shard not in lacking}
    assert expected <= listed, (sorted(expected - listed), answer)
    return False


@pytest.mark.slow
def test_listing_during_shard_take_over_is_complete_or_names_what_it_lacks(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    cluster = sdk_cluster_factory(nodes=1, coordinators=2)
    groups = group_names(per_shard=2)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("orders", 1, 1)])

        def commit_all() -> bool:
            try:
                for i, name in enumerate(groups):
                    admin.alter_group_offsets(name, {TopicPartition("orders", 0): i})
            except (CoordinatorNotAvailableError, CoordinatorLoadInProgressError):
                return False
            return True

        wait_until(commit_all, 60, "the coordinators to serve every shard")
        assert {g.group_id for g in admin.list_groups()} >= set(groups)

        answers: list[pb.ListGroupsResponse] = []
        stop = threading.Event()

        def list_continuously() -> None:
            with grpc.insecure_channel(cluster.bootstrap) as channel:
                stub = gateway_pb2_grpc.GatewayStub(channel)
                while not stop.is_set():
                    answers.append(stub.ListGroups(pb.ListGroupsRequest(timeout_ms=200),
                                                   timeout=30))

        lister = threading.Thread(target=list_continuously, daemon=True)
        lister.start()
        try:
            victim = cluster.coordinators[0]
            victim.kill()
            # Right after the kill the dead instance still holds its shards (its lease
            # has not expired): a short listing must name them, not leave them out.
            with pytest.raises((CoordinatorNotAvailableError,
                                CoordinatorLoadInProgressError)) as raised:
                admin.list_groups(timeout_ms=100)
            assert "the list is incomplete" in str(raised.value)
            assert "shard " in str(raised.value)
            # With the default wait, the listing waits for the take-over instead.
            assert {g.group_id for g in admin.list_groups()} >= set(groups)

            # Started again, the instance takes some shards back (release, take, load).
            mark = len(answers)
            cluster.coordinators[0] = cluster.group_coordinator(
                0, port=victim.listen_port).start()
            wait_until(lambda: any(check(a, groups) for a in answers[mark + 1:]), 60,
                       "a complete listing after the restart")
            assert {g.group_id for g in admin.list_groups()} >= set(groups)
        finally:
            stop.set()
            lister.join(35)
    complete = [check(answer, groups) for answer in answers]
    assert complete.count(False) >= 1, "no answer fell inside a take-over"
    assert complete.count(True) >= 1
