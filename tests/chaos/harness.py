"""A local Strand cluster of real processes the chaos harness can hurt.

etcd, two controllers, three storage nodes, a gateway, two group coordinators
(``services.groups``: one takes the chaos group's shard over when the other dies) and
two transaction coordinators (``services.transactions``: likewise for the shards of
``__transaction_state``) on 127.0.0.1, each a real process started by
:mod:`strand.launcher`. Storage nodes and controllers listen on private ports and
advertise a port of the proxy process (``proxy.py``), so that a node can be cut off
from its peers, the gateway and the controllers while etcd stays reachable.

Every child is started through ``setpriv --pdeathsig KILL`` (see
``strand.launcher.signals``): if the harness itself is killed, the kernel kills the
cluster with it (no orphans). That signal fires when the *thread* that spawned the
child ends, so processes are only ever started from the harness's main thread.

Cluster state is read from etcd directly (its v3 JSON gateway, stdlib only): it is
the source of truth for leaders, epochs and ISRs, and the harness must keep finding
the current leader once leaders move (replication and failover).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strand.cluster.keys import KeySpace
from strand.coordination.shards import GROUP_TOPIC, TRANSACTION_TOPIC, shard_for
from strand.launcher import (
    REPO,
    Boot,
    Cluster,
    ClusterSpec,
    Launch,
    Process,
    command_line,
    pinned_env,
    process_state,
    wait_until,
    with_death_signal,
)
from strand.launcher.etcd_reads import EtcdUnreachable, etcd_range

STORAGE_NODES = (1, 2, 3)
CONTROLLERS = ("controller-0", "controller-1")
COORDINATORS = ("groups-0", "groups-1")  # process names = their instance ids
TXN_COORDINATORS = ("txns-0", "txns-1")  # transaction coordinators, likewise
GROUP_ID = "chaos-group"  # the consumer group of group_workload.py
GROUP_SHARDS = 4  # partitions of __consumer_offsets
TXN_SHARDS = 4  # partitions of __transaction_state
STOP_TIMEOUT = 10.0  # s for each kind of process to stop before SIGKILL


def child(command: list[str], log_path: Path) -> subprocess.Popen[str]:
    """A helper process of the harness (proxy, group member): this checkout's code,
    text pipes in and out, stderr to ``log_path``, killed by the kernel when the
    harness dies (see the module doc)."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            with_death_signal(command), cwd=REPO, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=log, env={**os.environ, **pinned_env()},
            text=True, bufsize=1)


class ProxyProcess:
    """The proxy process (``proxy.py``) and its JSON-lines command channel."""

    def __init__(self, mode: str, tag: str, log_path: Path) -> None:
        self.log_path = log_path
        self.process = child([sys.executable, "-m", "tests.chaos.proxy", "--mode", mode,
                              "--tag", tag], log_path)

    def command(self, **message: Any) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the proxy process died; see {self.log_path}")
        answer: dict[str, Any] = json.loads(line)
        if not answer.get("ok"):
            raise RuntimeError(f"proxy command {message} failed: {answer.get('error')}")
        return answer

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                assert self.process.stdin is not None
                self.process.stdin.close()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass(frozen=True, slots=True)
class PartitionState:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


# ------------------------------------------------------------------------- the cluster

@dataclass
class ChaosCluster:
    workdir: Path
    name: str
    lease_ttl: int = 3
    cut_mode: str = "blackhole"
    cluster: Cluster | None = None
    proxy_ports: dict[str, int] = field(default_factory=dict)
    proxy: ProxyProcess | None = None
    spawned: set[int] = field(default_factory=set)  # every PID ever started (orphan check)
    group_id: str = GROUP_ID
    # The transactional ids the workloads use (their shards must have an owner for
    # the cluster to count as healthy; the transaction coordinator faults aim at them).
    txn_ids: tuple[str, ...] = ()

    # -- lifecycle ------------------------------------------------------------------------

    def spec(self) -> ClusterSpec:
        """Controllers and storage nodes boot together, then the gateway, then the
        group and transaction coordinators (they write __consumer_offsets and
        __transaction_state through the gateway; the first to find its topic missing
        has the controller create it, RF 3)."""
        return ClusterSpec(
            self.workdir, name=self.name, controllers=len(CONTROLLERS),
            storage_nodes=len(STORAGE_NODES), coordinators=len(COORDINATORS),
            txn_coordinators=len(TXN_COORDINATORS),
            lease_ttl=self.lease_ttl, storage_args=("--maintenance-interval", "1"),
            coordinator_args=("--shards", str(GROUP_SHARDS),
                              "--initial-rebalance-delay-ms", "500"),
            # Abandoned transactions (a fenced or killed producer's) abort within a
            # second of their timeout rather than ten.
            txn_coordinator_args=("--shards", str(TXN_SHARDS), "--abort-interval-ms", "1000"),
            boot=Boot.IN_STAGES, launch=Launch(die_with_parent=True))

    def start(self) -> None:
        logs = self.workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.proxy = ProxyProcess(self.cut_mode, self.name, logs / "proxy.log")
        self.spawned.add(self.proxy.process.pid)
        self.cluster = Cluster(self.spec(), on_spawn=self._spawned)
        for process in (*self.cluster.controllers, *self.cluster.storage):
            port = self.cluster.unused_port()  # the proxy's, advertised; the process
            # listens behind it
            self.proxy_ports[process.id] = port
            process.args += ["--advertise", f"127.0.0.1:{port}"]
            self.proxy.command(op="add", name=process.id, listen=port,
                               target=process.listen_port)
        self.cluster.start()
        wait_until(lambda: len(self.coordinators()) == len(COORDINATORS)
                   and len(self.coordinators(transactions=True)) == len(TXN_COORDINATORS)
                   and self.shard_owner() is not None, 60,
                   "the coordinators to register and one to own the group's shard", 0.2)

    def _spawned(self, process: Process) -> None:
        assert process.pid is not None
        self.spawned.add(process.pid)
        if process.id in self.proxy_ports:
            assert self.proxy is not None
            self.proxy.command(op="pid", name=process.id, pid=process.pid)

    def stop(self) -> None:
        """Stop everything in dependency order: the group coordinators, the gateway, the
        storage nodes (while a controller can still take their controlled shutdown),
        the controllers, etcd and the proxy. Paused processes are continued first so
        that SIGTERM works."""
        if self.cluster is not None:
            self.cluster.stop(STOP_TIMEOUT)
        if self.proxy is not None:
            self.proxy.stop()

    def alive_pids(self) -> list[int]:
        """PIDs this cluster started that still run (should be none after stop()). A
        PID counts only if its command line still names this run: PIDs get reused."""
        alive = []
        for pid in sorted(self.spawned):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # reap it if it is our zombie
            command = " ".join(command_line(pid))
            if process_state(pid) not in ("Z", None) and (
                    self.name in command or str(self.workdir) in command):
                alive.append(pid)
        return alive

    # -- addresses and files --------------------------------------------------------------

    def _cluster(self) -> Cluster:
        if self.cluster is None:
            raise RuntimeError("the chaos cluster was not started")
        return self.cluster

    @property
    def bootstrap(self) -> str:
        return self._cluster().bootstrap

    @property
    def kafka_bootstrap(self) -> str:
        """The gateway's Kafka listener (the launcher gives every gateway one)."""
        return self._cluster().kafka_bootstrap

    def data_dir(self, node: int) -> Path:
        return self.workdir / f"data-{node}"

    def process(self, name: str) -> Process:
        return self._cluster().process(name)

    def pid(self, name: str) -> int | None:
        return self.process(name).pid

    def running(self, name: str) -> bool:
        return self.process(name).running()

    def exited(self) -> dict[str, int]:
        """Processes that are not running, with their exit status (negative: the
        signal that ended them). Right after a heal, these exited on their own."""
        return {p.id: p.returncode for p in self._cluster().processes()
                if p.returncode is not None}

    # -- faults' primitives ---------------------------------------------------------------

    def signal(self, name: str, sig: int) -> None:
        self.process(name).signal(sig)

    def kill(self, name: str) -> None:
        """SIGKILL and reap."""
        self.process(name).kill()

    def restart(self, name: str) -> None:
        """Start a stopped process again: same ports, same data, same identity."""
        process = self.process(name)
        process.start(20 if name == "etcd" else 60)

    def cut(self, name: str) -> int:
        assert self.proxy is not None
        return int(self.proxy.command(op="cut", names=[name])["silenced"])

    def heal(self, name: str) -> int:
        assert self.proxy is not None
        return int(self.proxy.command(op="heal", names=[name])["reset"])

    # -- cluster state, from etcd ---------------------------------------------------------

    @property
    def keys(self) -> KeySpace:
        return KeySpace(self.name)

    def _etcd_get(self, key: str, prefix: bool = False) -> dict[str, bytes]:
        return etcd_range(self._cluster().etcd.endpoint, f"/strand/{self.name}/{key}", prefix)

    def brokers(self) -> set[int]:
        try:
            return {int(k.rsplit("/", 1)[1]) for k in self._etcd_get("brokers/", True)}
        except (*EtcdUnreachable, ValueError):
            return set()

    def active_controller(self) -> str | None:
        try:
            value = self._etcd_get("controller").get(f"/strand/{self.name}/controller")
        except EtcdUnreachable:
            return None
        return str(json.loads(value)["controller_id"]) if value else None

    def coordinators(self, transactions: bool = False) -> set[str]:
        """The group (or, with ``transactions``, transaction) coordinator instances
        registered (under their leases)."""
        try:
            key = self.keys.txn_coordinators if transactions else self.keys.coordinators
            return {k.rsplit("/", 1)[1]
                    for k in etcd_range(self._cluster().etcd.endpoint, key, True)}
        except EtcdUnreachable:
            return set()

    def group_shard(self) -> int | None:
        """The partition of __consumer_offsets holding the chaos group (None: no topic)."""
        try:
            value = self._etcd_get(f"topics/{GROUP_TOPIC}").get(
                f"/strand/{self.name}/topics/{GROUP_TOPIC}")
        except EtcdUnreachable:
            return None
        return shard_for(self.group_id, int(json.loads(value)["partitions"])) if value else None

    def shard_owner(self) -> str | None:
        """The coordinator instance that owns the chaos group's shard, from etcd."""
        shard = self.group_shard()
        return None if shard is None else self._owner(self.keys.group_shard(shard))

    def txn_shard(self, transactional_id: str) -> int | None:
        """The partition of __transaction_state holding ``transactional_id`` (None: no
        topic yet)."""
        try:
            value = self._etcd_get(f"topics/{TRANSACTION_TOPIC}").get(
                f"/strand/{self.name}/topics/{TRANSACTION_TOPIC}")
        except EtcdUnreachable:
            return None
        return shard_for(transactional_id, int(json.loads(value)["partitions"])) \
            if value else None

    def txn_shard_owner(self, transactional_id: str) -> str | None:
        """The transaction coordinator instance that owns ``transactional_id``'s shard."""
        shard = self.txn_shard(transactional_id)
        return None if shard is None else self._owner(self.keys.txn_shard(shard))

    def _owner(self, key: str) -> str | None:
        try:
            value = etcd_range(self._cluster().etcd.endpoint, key).get(key)
        except EtcdUnreachable:
            return None
        return str(json.loads(value)["instance_id"]) if value else None

    def partitions(self, topic: str) -> dict[int, PartitionState]:
        """Every partition's record (empty when etcd cannot be read)."""
        try:
            raw = self._etcd_get(f"partitions/{topic}/", True)
        except EtcdUnreachable:
            return {}
        states = {}
        for value in raw.values():
            record = json.loads(value)
            states[int(record["partition"])] = PartitionState(
                int(record["partition"]), int(record["leader"]), int(record["leader_epoch"]),
                tuple(int(r) for r in record["replicas"]), tuple(int(r) for r in record["isr"]))
        return states

    def problems(self, topic: str, partitions: int, full_isr: bool = False) -> list[str]:
        """Why the cluster is not healthy yet (empty once it is): every process must
        run, every node be registered, a controller be elected and every partition
        have a registered leader (and, with ``full_isr``, every replica in its ISR);
        both group coordinators registered, one owning the chaos group's shard, whose
        partition of __consumer_offsets has a registered leader; both transaction
        coordinators registered, one owning each of the workloads' transactional ids."""
        down = [p.id for p in self._cluster().processes() if not p.running()]
        if down:
            return [f"not running: {down}"]
        found = []
        brokers = self.brokers()
        if len(brokers) != len(STORAGE_NODES):
            found.append(f"registered nodes {sorted(brokers)}")
        if self.active_controller() is None:
            found.append("no active controller")
        states = self.partitions(topic)
        if len(states) != partitions:
            found.append(f"{len(states)} of {partitions} partition records readable")
        for s in states.values():
            if s.leader not in brokers:
                found.append(f"partition {s.partition}: leader {s.leader} not registered")
            elif full_isr and set(s.isr) != set(s.replicas):
                found.append(f"partition {s.partition}: isr {list(s.isr)}")
        coordinators = self.coordinators()
        if len(coordinators) != len(COORDINATORS):
            found.append(f"registered coordinators {sorted(coordinators)}")
        txn_coordinators = self.coordinators(transactions=True)
        if len(txn_coordinators) != len(TXN_COORDINATORS):
            found.append(f"registered transaction coordinators {sorted(txn_coordinators)}")
        shard = self.group_shard()
        offsets = self.partitions(GROUP_TOPIC).get(shard) if shard is not None else None
        if shard is None or self.shard_owner() is None:
            found.append(f"the group's shard {shard} has no coordinator")
        elif offsets is None or offsets.leader not in brokers:
            found.append(f"{GROUP_TOPIC}-{shard} has no registered leader")
        orphans = [t for t in self.txn_ids if self.txn_shard_owner(t) is None]
        if orphans:
            found.append(f"the shards of transactional ids {orphans} have no coordinator")
        return found

    def healthy(self, topic: str, partitions: int, full_isr: bool = False) -> bool:
        return not self.problems(topic, partitions, full_isr)

    def replica_log(self, node: int, topic: str, partition: int) -> bytes | None:
        """The concatenated segment files of a replica (None: no directory)."""
        directory = self.data_dir(node) / f"{topic}-{partition}"
        if not directory.is_dir():
            return None
        chunks = []
        for segment in sorted(directory.glob("*.log")):  # names are zero-padded offsets
            with contextlib.suppress(FileNotFoundError):  # deleted by retention meanwhile
                chunks.append(segment.read_bytes())
        return b"".join(chunks)
