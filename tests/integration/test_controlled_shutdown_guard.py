"""ControlledShutdown cannot take a healthy node out of service (KIP-380): the
controller acts only on the request of the registered broker itself, carrying its
registration's broker epoch, once that registration says it is shutting down. A
request from anyone else is refused and changes no leader and no ISR. (The node's
own SIGTERM path: test_replication.py::test_leader_sigterm_fails_no_produce.)"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import grpc

from strand import Admin, NewTopic
from strand.cluster.keys import KeySpace
from strand.cluster.model import BrokerRegistration
from strand.errors import ErrorCode
from strand.launcher.etcd_reads import etcd_range
from strand.v1 import controller_pb2 as pb_ctl
from strand.v1 import controller_pb2_grpc
from tests.support.cluster import placement
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from tests.support.cluster import SdkCluster

def test_a_controlled_shutdown_not_asked_by_the_broker_itself_changes_nothing(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    cluster = sdk_cluster_factory(nodes=2)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("guarded", 4, 2)])
    def led_by_1_and_in_sync() -> bool:
        current = placement(cluster, "guarded").values()
        return (all(len(isr) == 2 for _, isr in current)
                and any(leader == 1 for leader, _ in current))

    wait_until(led_by_1_and_in_sync, 30, "node 1 to lead a partition with both nodes in every ISR")
    before = placement(cluster, "guarded")
    key = KeySpace(cluster.name).broker(1)
    registration = BrokerRegistration.from_json(etcd_range(cluster.etcd.endpoint, key)[key])
    assert registration.epoch != 0 and not registration.shutting_down

    with grpc.insecure_channel(cluster.controllers[0].address) as channel:
        stub = controller_pb2_grpc.ControllerStub(channel)

        def ask(epoch: int) -> pb_ctl.ControlledShutdownResponse:
            answer: pb_ctl.ControlledShutdownResponse = stub.ControlledShutdown(
                pb_ctl.ControlledShutdownRequest(broker_id=1, broker_epoch=epoch), timeout=30)
            return answer

        for forged in (0, registration.epoch + 1):  # no epoch, another registration's
            refused = ask(forged)
            assert ErrorCode(refused.error_code) == ErrorCode.STALE_BROKER_EPOCH, refused
            assert "only the registered broker itself" in refused.error_message
        # The right epoch, but the broker is running: it did not mark itself stopping.
        refused = ask(registration.epoch)
        assert ErrorCode(refused.error_code) == ErrorCode.INVALID_REQUEST, refused
        assert "has not marked its registration as shutting down" in refused.error_message

    time.sleep(1)  # what a wrongly accepted request would change shows within this
    assert placement(cluster, "guarded") == before
