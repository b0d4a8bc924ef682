"""What a partition does when too few replicas are left (real processes):

* ``min.insync.replicas``: with the ISR below it, acks=all is refused with
  NOT_ENOUGH_REPLICAS (nothing written) while acks=1 still works;
* ``unclean.leader.election.enable``: a partition whose only in-sync replica is
  gone stays leaderless, even with another replica alive, until the topic opts in;
  then the out-of-sync replica leads (and what it lacked is lost: the opt-in's cost).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from strand import Admin, NewTopic, Producer
from strand.errors import NotEnoughReplicasError
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from tests.support.cluster import SdkCluster


def _partition(admin: Admin, topic: str) -> tuple[int | None, tuple[int, ...]]:
    part = admin.describe_topics([topic])[0].partitions[0]
    return part.leader, part.isr


def test_acks_all_is_refused_below_min_insync_replicas(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    cluster = sdk_cluster_factory(nodes=3)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("guarded", 1, 3, replica_assignment={0: [1, 2, 3]},
                                      config={"min.insync.replicas": "2"})])
        with Producer(cluster.bootstrap, acks="all") as producer:
            producer.send("guarded", b"before").result(timeout=30)
        cluster.storage[1].kill()
        cluster.storage[2].kill()
        wait_until(lambda: _partition(admin, "guarded") == (1, (1,)), 30,
                   "the controller to shrink the ISR to the leader")
        with (Producer(cluster.bootstrap, acks="all", retries=0) as producer,
              pytest.raises(NotEnoughReplicasError)):
            producer.send("guarded", b"refused").result(timeout=30)
        with Producer(cluster.bootstrap, acks=1) as producer:
            metadata = producer.send("guarded", b"acks=1 works").result(timeout=30)
        assert metadata.offset == 1  # the refused record was not written


def test_unclean_leader_election_is_an_opt_in(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    cluster = sdk_cluster_factory(nodes=2)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("risky", 1, 2, replica_assignment={0: [1, 2]})])
        with Producer(cluster.bootstrap, acks="all") as producer:
            producer.send("risky", b"both have it").result(timeout=30)
        follower = cluster.storage[1]
        follower.kill()
        wait_until(lambda: _partition(admin, "risky") == (1, (1,)), 30, "ISR = [1]")
        with Producer(cluster.bootstrap, acks=1) as producer:
            producer.send("risky", b"only node 1 has it").result(timeout=30)
        cluster.storage[0].kill()
        cluster.storage[1] = cluster.storage_node(2, port=follower.listen_port).start()
        wait_until(lambda: _partition(admin, "risky")[0] is None, 30, "no leader")
        time.sleep(3)  # node 2 is alive but out of sync: it must not lead
        assert _partition(admin, "risky") == (None, (1,))

        admin.alter_configs("risky", set={"unclean.leader.election.enable": "true"})
        wait_until(lambda: _partition(admin, "risky") == (2, (2,)), 30,
                   "the out-of-sync replica to lead after the opt-in")
        with Producer(cluster.bootstrap, acks="all") as producer:
            metadata = producer.send("risky", b"after").result(timeout=30)
        assert metadata.offset == 1  # node 2 never had offset 1: it was lost
