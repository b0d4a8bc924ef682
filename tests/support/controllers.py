"""Controllers as real processes on a real etcd, for the tests of the control plane:
storage nodes are stood in for by broker registrations under a lease the test holds
(that is all a storage node is to the controller)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
from etcd3aio import prefix_range_end

from strand.cluster.etcd import connect
from strand.cluster.keys import KeySpace
from strand.cluster.model import BrokerRegistration, ControllerRecord
from strand.launcher import ServiceProcess
from strand.v1 import controller_pb2_grpc
from tests.support.waiting import wait_until

CLUSTER = "itest"
KEYS = KeySpace(CLUSTER)
LEASE_TTL = 2
RACKS = {1: "a", 2: "b", 3: "c"}


async def _etcd_get_prefix(endpoint: str, prefix: str) -> dict[str, bytes]:
    etcd = await connect([endpoint])
    try:
        response = await etcd.kv.get(prefix, range_end=prefix_range_end(prefix.encode()))
        return {kv.key.decode(): bytes(kv.value) for kv in response.kvs}
    finally:
        await etcd.close()


def etcd_prefix(endpoint: str, prefix: str) -> dict[str, bytes]:
    return asyncio.run(_etcd_get_prefix(endpoint, prefix))


async def register_brokers(endpoint: str) -> None:
    etcd = await connect([endpoint])
    try:
        lease = await etcd.lease.grant(ttl=3600)
        for node_id, rack in RACKS.items():
            record = BrokerRegistration(node_id, "127.0.0.1", 9100 + node_id, rack)
            await etcd.kv.put(KEYS.broker(node_id), record.to_json(), lease=int(lease.ID))
    finally:
        await etcd.close()


def active_controller(endpoint: str) -> ControllerRecord | None:
    value = etcd_prefix(endpoint, KEYS.controller).get(KEYS.controller)
    return None if value is None else ControllerRecord.from_json(value)


def start_controllers(endpoint: str, directory: Path, count: int = 2) -> list[ServiceProcess]:
    """``count`` controllers of cluster CLUSTER (three registered brokers), once one
    of them is active."""
    asyncio.run(register_brokers(endpoint))
    procs = [
        ServiceProcess("controller", ["--etcd", endpoint, "--cluster", CLUSTER,
                                      "--lease-ttl", str(LEASE_TTL), "--id", f"c{i}"],
                       directory / f"controller-{i}.log").start()
        for i in range(count)
    ]
    wait_until(lambda: active_controller(endpoint) is not None, 15, "an active controller")
    return procs


def stub_for(address: str) -> controller_pb2_grpc.ControllerStub:
    return controller_pb2_grpc.ControllerStub(grpc.insecure_channel(address))


def split(procs: list[ServiceProcess], endpoint: str) -> tuple[ServiceProcess, ServiceProcess]:
    """The active controller and a standby."""
    record = active_controller(endpoint)
    assert record is not None
    active = next(p for p in procs if p.address == record.address)
    standby = next(p for p in procs if p is not active)
    return active, standby
