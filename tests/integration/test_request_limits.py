"""Oversized requests do not stall the control plane (issue 11, point 5).

Creating a topic of 100,000 partitions used to hold the controller's event loop for
~13 s: it lost its etcd lease and stepped down. One Produce of 100,000 empty
partition entries took 12 s and stalled every other producer. Now a request may ask
for a configured maximum, is refused at once beyond it, and large legitimate work
leaves the loop free for lease keep-alives and other clients.

Timing bounds are generous (the machine is shared); each fails on the old code.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator

import grpc
import pytest

from strand import Admin, NewTopic, Producer
from strand.errors import InvalidPartitionsError, InvalidRequestError
from strand.launcher import EtcdServer, ServiceProcess
from strand.launcher.probes import healthy
from strand.v1 import common_pb2 as pb
from strand.v1 import gateway_pb2_grpc
from tests.support.cluster import SdkCluster
from tests.support.controllers import (
    CLUSTER,
    LEASE_TTL,
    active_controller,
    register_brokers,
)
from tests.support.waiting import wait_until

# Above what the old controller could do within its 2 s lease (it stalled ~3 s).
MAX_PARTITIONS = 30_000
MAX_TOPICS = 50
REFUSED_WITHIN_S = 2.0


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[tuple[ServiceProcess, ServiceProcess]]:
    """etcd, three registered brokers (no storage: the controller only needs their
    registrations), one controller with the test's limits, and a gateway."""
    directory = tmp_path_factory.mktemp("limits")
    etcd = EtcdServer(directory / "etcd", unsafe_no_fsync=True).start()
    asyncio.run(register_brokers(etcd.endpoint))
    common = ["--etcd", etcd.endpoint, "--cluster", CLUSTER]
    controller = ServiceProcess("controller", [
        *common, "--lease-ttl", str(LEASE_TTL), "--id", "c-limits",
        "--max-partitions-per-request", str(MAX_PARTITIONS),
        "--max-topics-per-request", str(MAX_TOPICS)], directory / "controller.log").start()
    gateway = ServiceProcess("gateway", common, directory / "gateway.log").start()
    wait_until(lambda: active_controller(etcd.endpoint) is not None, 15, "an active controller")
    try:
        yield controller, gateway
    finally:
        gateway.stop()
        controller.stop()
        etcd.stop()


class Prober:
    """Calls ``probe`` back to back in a thread; the slowest answer is the stall."""

    def __init__(self, probe: Callable[[], object]) -> None:
        self.probe = probe
        self.slowest = 0.0
        self.calls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.probe()
            self.slowest = max(self.slowest, time.monotonic() - started)
            self.calls += 1
            self._stop.wait(0.05)

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


def test_a_create_at_the_limit_keeps_the_lease_and_serves_others(
        control_plane: tuple[ServiceProcess, ServiceProcess]) -> None:
    controller, gateway = control_plane
    with Admin(gateway.address) as admin:
        admin.create_topics([NewTopic("small", 1, 1)])

        def health() -> None:
            assert healthy(controller.address, timeout=20)

        def metadata() -> None:
            with Admin(gateway.address, request_timeout_ms=20_000) as other:
                assert other.describe_topics(["small"])[0].partitions

        with Prober(health) as controller_probe, Prober(metadata) as gateway_probe:
            admin.create_topics([NewTopic("big", MAX_PARTITIONS, 3)], timeout_ms=120_000)
        assert len(admin.describe_topics(["big"])[0].partitions) == MAX_PARTITIONS
    log = controller.log_path.read_text()
    assert "stepped down" not in log and "lease lost" not in log
    assert controller_probe.calls > 3 and gateway_probe.calls > 3
    assert controller_probe.slowest < 1.5, f"controller stalled {controller_probe.slowest:.1f} s"
    assert gateway_probe.slowest < 2.0, f"metadata stalled {gateway_probe.slowest:.1f} s"


def test_over_the_limits_admin_requests_are_refused_at_once(
        control_plane: tuple[ServiceProcess, ServiceProcess]) -> None:
    _, gateway = control_plane
    with Admin(gateway.address) as admin:
        started = time.monotonic()
        with pytest.raises(InvalidPartitionsError) as refused:
            admin.create_topics([NewTopic("huge", MAX_PARTITIONS + 1, 1)])
        assert time.monotonic() - started < REFUSED_WITHIN_S
        assert f"at most {MAX_PARTITIONS} may be created by one request" in str(refused.value)
        assert "--max-partitions-per-request" in str(refused.value)
        assert "huge" not in admin.list_topics()

        admin.create_topics([NewTopic("grows", 1, 1)])
        with pytest.raises(InvalidPartitionsError, match="would create 30001 partitions"):
            admin.create_partitions("grows", MAX_PARTITIONS + 2)

        started = time.monotonic()
        with pytest.raises(InvalidRequestError) as too_many:
            admin.create_topics([NewTopic(f"t{i}", 1, 1) for i in range(MAX_TOPICS + 1)])
        assert time.monotonic() - started < REFUSED_WITHIN_S
        assert "--max-topics-per-request" in str(too_many.value)
        assert not any(name.startswith("t") for name in admin.list_topics())


def _entries(topic: str, count: int) -> pb.ProduceRequest:
    return pb.ProduceRequest(acks=1, timeout_ms=30_000, topics=[pb.TopicProduceData(
        topic=topic, partitions=[pb.PartitionProduceData(partition=0)] * count)])


def test_a_produce_of_100000_entries_is_refused_and_others_go_on(
        sdk_cluster_factory: Callable[..., SdkCluster]) -> None:
    cluster = sdk_cluster_factory(nodes=1)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("flood", 1, 1), NewTopic("steady", 1, 1)])
    with Producer(cluster.bootstrap, linger_ms=0) as producer:
        producer.send("steady", b"warm").result(20)

        def produce() -> None:
            producer.send("steady", b"x").result(20)

        stub = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(cluster.bootstrap))
        with Prober(produce) as other:
            time.sleep(0.3)
            started = time.monotonic()
            with pytest.raises(grpc.RpcError) as refused:
                stub.Produce(_entries("flood", 100_000), timeout=60)
            took = time.monotonic() - started
            time.sleep(0.3)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "names 100000 partitions; at most 10000" in (refused.value.details() or "")
    assert "--max-partition-entries" in (refused.value.details() or "")
    assert took < REFUSED_WITHIN_S, f"refused after {took:.1f} s"
    assert other.calls > 3 and other.slowest < REFUSED_WITHIN_S, (
        f"another producer waited {other.slowest:.1f} s")
