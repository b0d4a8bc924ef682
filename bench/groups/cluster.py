"""The benchmark's cluster and the defaults it reports: BenchCluster (etcd, a
controller, storage nodes, a gateway and group coordinators as real processes, by
:mod:`strand.launcher`), the defaults of the services and the SDK that the benchmark
reports or starts from, and the progress console."""

from __future__ import annotations

import inspect
from pathlib import Path

from bench_support import err

from services.groups.__main__ import parse_args as groups_parse_args
from strand import Admin, Consumer, StrandError
from strand.coordination.shards import shard_for
from strand.launcher import Boot, Cluster, ClusterSpec, wait_until


def default_delay_ms() -> int:
    """The groups service's own default for --initial-rebalance-delay-ms."""
    return int(groups_parse_args(["--bootstrap", "unused:1"]).initial_rebalance_delay_ms)


def default_assignors() -> tuple[str, ...]:
    """The SDK's default partition_assignment_strategy."""
    default = inspect.signature(Consumer).parameters["partition_assignment_strategy"].default
    return tuple(default)


# ----------------------------------------------------------------------------- cluster

class BenchCluster:
    """etcd, a controller, storage nodes, a gateway and group coordinators, started
    one by one like the SDK tests' clusters (tests/support/cluster.py) but with the
    services' own lease TTL by default (the tests' 2 s made storage nodes lose their
    lease on a busy machine); the coordinators can be restarted with another
    rebalance delay."""

    def __init__(self, directory: Path, storage_nodes: int, coordinators: int,
                 shards: int, lease_ttl: int) -> None:
        self.coordinator_count = coordinators
        self.shards = shards
        self.delay_ms: int | None = None
        self.cluster = Cluster(ClusterSpec(
            directory, name="groupbench", storage_nodes=storage_nodes, lease_ttl=lease_ttl,
            controller_args=("--preferred-leader-interval", "2"),
            coordinator_args=("--shards", str(shards)), etcd_fsync=False,
            boot=Boot.ONE_BY_ONE, healthy_timeout=30))

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def start(self) -> None:
        err.print(f"starting etcd, a controller, {len(self.cluster.storage)} storage nodes "
                  f"and a gateway in {self.cluster.directory}")
        self.cluster.start()

    def start_coordinators(self, delay_ms: int) -> None:
        """(Re)start the group coordinators with this initial rebalance delay and wait
        until every shard of __consumer_offsets is served through the gateway."""
        if self.delay_ms == delay_ms and self.cluster.coordinators:
            return
        self.stop_coordinators()
        err.print(f"starting {self.coordinator_count} group coordinator(s), "
                  f"--initial-rebalance-delay-ms {delay_ms}")
        for i in range(self.coordinator_count):
            coordinator = self.cluster.group_coordinator(
                i, args=("--initial-rebalance-delay-ms", str(delay_ms)))
            self.cluster.coordinators.append(coordinator)  # stopped even if it never serves
            coordinator.start()
        self.delay_ms = delay_ms
        probes = _probe_groups(self.shards)

        def serving() -> bool:
            try:
                with Admin(self.bootstrap, request_timeout_ms=5000) as admin:
                    for group in probes:
                        admin.describe_group(group)
            except StrandError:
                return False
            return True

        wait_until(serving, 60, "every group shard to be served", interval=0.2)

    def stop_coordinators(self) -> None:
        for process in self.cluster.coordinators:
            process.stop()
        self.cluster.coordinators = []
        self.delay_ms = None

    def stop(self) -> None:
        self.cluster.stop()


def _probe_groups(shards: int) -> list[str]:
    """One group id per shard of __consumer_offsets."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < shards:
        name = f"probe-{i}"
        found.setdefault(shard_for(name, shards), name)
        i += 1
    return [found[k] for k in sorted(found)]

