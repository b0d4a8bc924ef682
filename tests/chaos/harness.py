"""A local Strand cluster of real processes the chaos harness can hurt.

etcd, two controllers, three storage nodes, a gateway and two group coordinators
(``services.groups``: one takes the chaos group's shard over when the other dies) on
127.0.0.1, each a real process started with the integration tests' helpers
(``tests/integration/cluster_helpers.py``). Storage nodes and controllers listen on
private ports and advertise a port of the proxy process (``proxy.py``), so that a
node can be cut off from its peers, the gateway and the controllers while etcd stays
reachable.

Every child is started through ``setpriv --pdeathsig KILL`` when available: if the
harness itself is killed, the kernel kills the cluster with it (no orphans). That
signal fires when the *thread* that spawned the child ends, so processes are only
ever started from the harness's main thread.

Cluster state is read from etcd directly (its v3 JSON gateway, stdlib only): it is
the source of truth for leaders, epochs and ISRs, and the harness must keep finding
the current leader once leaders move (replication and failover).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_INTEGRATION = str(Path(__file__).resolve().parents[1] / "integration")
if _INTEGRATION not in sys.path:
    sys.path.insert(0, _INTEGRATION)

from cluster_helpers import (  # noqa: E402 - needs the path above
    REPO,
    EtcdServer,
    ServiceProcess,
    free_port,
)
from cluster_helpers import wait_until as wait_until  # noqa: E402 - re-exported

from strand.coordination.shards import GROUP_TOPIC, shard_for  # noqa: E402

STORAGE_NODES = (1, 2, 3)
CONTROLLERS = ("controller-0", "controller-1")
COORDINATORS = ("groups-0", "groups-1")  # process names = their instance ids
GROUP_ID = "chaos-group"  # the consumer group of group_workload.py
GROUP_SHARDS = 4  # partitions of __consumer_offsets
_SETPRIV = shutil.which("setpriv")


def guarded(command: list[str]) -> list[str]:
    """The command, killed by the kernel when the harness dies (see the module doc)."""
    return [_SETPRIV, "--pdeathsig", "KILL", "--", *command] if _SETPRIV else command


class Service(ServiceProcess):
    """A Strand service as ``ServiceProcess`` starts it, plus the death signal and a
    split between spawning and waiting (so several can boot at once)."""

    def spawn(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by Popen
        env = {**os.environ, "PYTHONPATH": str(REPO), "STRAND_LOG_LEVEL": "INFO"}
        self.process = subprocess.Popen(
            guarded([sys.executable, "-m", f"services.{self.name}", "--listen", self.address,
                     *self.args]), cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env)

    def wait_healthy(self, timeout: float = 30) -> None:
        wait_until(self.healthy, timeout, f"{self.name} on {self.address} to be healthy", 0.1)

    def start(self) -> Service:
        self.spawn()
        self.wait_healthy()
        return self

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None


class Etcd(EtcdServer):
    """``EtcdServer`` with the death signal; restartable on the same ports and data."""

    def start(self) -> None:
        binary = shutil.which("etcd")
        if binary is None:
            raise RuntimeError("etcd is not installed: run `make setup` (apt etcd-server)")
        log = open(self.data_dir.with_suffix(".log"), "ab")  # noqa: SIM115 - owned by Popen
        self.process = subprocess.Popen(guarded(
            [binary, "--data-dir", str(self.data_dir), "--name", "chaos",
             "--listen-client-urls", f"http://{self.endpoint}",
             "--advertise-client-urls", f"http://{self.endpoint}",
             "--listen-peer-urls", f"http://127.0.0.1:{self.peer_port}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer_port}",
             "--initial-cluster", f"chaos=http://127.0.0.1:{self.peer_port}"]),
            stdout=log, stderr=subprocess.STDOUT)
        wait_until(self._serving, 20, "etcd to serve", 0.1)


class ProxyProcess:
    """The proxy process (``proxy.py``) and its JSON-lines command channel."""

    def __init__(self, mode: str, tag: str, log_path: Path) -> None:
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                guarded([sys.executable, "-m", "tests.chaos.proxy", "--mode", mode,
                         "--tag", tag]),
                cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                env={**os.environ, "PYTHONPATH": str(REPO)}, text=True, bufsize=1)

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


# ------------------------------------------------------------------------- etcd reads

def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def etcd_range(endpoint: str, key: str, prefix: bool = False,
               timeout: float = 2.0) -> dict[str, bytes]:
    """Keys and values under ``key`` (or exactly ``key``), via etcd's JSON gateway."""
    raw = key.encode()
    body: dict[str, str] = {"key": _b64(raw)}
    if prefix:
        end = bytearray(raw)
        end[-1] += 1  # keys here are ASCII paths: no 0xff byte to carry
        body["range_end"] = _b64(bytes(end))
    request = urllib.request.Request(f"http://{endpoint}/v3/kv/range",
                                     data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        answer = json.load(response)
    return {base64.b64decode(kv["key"]).decode(): base64.b64decode(kv.get("value", ""))
            for kv in answer.get("kvs", [])}


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
    etcd: Etcd | None = None
    services: dict[str, Service] = field(default_factory=dict)
    proxy_ports: dict[str, int] = field(default_factory=dict)
    proxy: ProxyProcess | None = None
    spawned: set[int] = field(default_factory=set)  # every PID ever started (orphan check)
    group_id: str = GROUP_ID

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        logs = self.workdir / "logs"
        logs.mkdir(exist_ok=True)
        self.proxy = ProxyProcess(self.cut_mode, self.name, logs / "proxy.log")
        self.spawned.add(self.proxy.process.pid)
        self.etcd = Etcd(self.workdir / "etcd")
        self.etcd.start()
        assert self.etcd.process is not None
        self.spawned.add(self.etcd.process.pid)
        common = ["--etcd", self.etcd.endpoint, "--cluster", self.name]
        ttl = ["--lease-ttl", str(self.lease_ttl)]
        for cid in CONTROLLERS:
            self._add(cid, Service("controller", [*common, *ttl, "--id", cid,
                                                  "--advertise", self._proxied(cid)],
                                   logs / f"{cid}.log"))
        for node in STORAGE_NODES:
            name = f"storage-{node}"
            self._add(name, Service("storage", [
                *common, *ttl, "--node-id", str(node), "--rack", f"r{node}",
                "--data-dir", str(self.data_dir(node)), "--advertise", self._proxied(name),
                "--maintenance-interval", "1"], logs / f"{name}.log"))
        self._add("gateway", Service("gateway", common, logs / "gateway.log"))
        # Controllers and storage nodes boot together; the gateway after them.
        for name in self.services:
            if name != "gateway":
                self._spawn(name)
        for name, service in self.services.items():
            if name != "gateway":
                service.wait_healthy(60)
        self._spawn("gateway")
        self.services["gateway"].wait_healthy(60)
        wait_until(lambda: len(self.brokers()) == len(STORAGE_NODES), 30,
                   "every storage node to register", 0.1)
        # The coordinators write __consumer_offsets through the gateway; the first to
        # find it missing has the controller create it (RF 3).
        for cid in COORDINATORS:
            self._add(cid, Service("groups", [
                *common, *ttl, "--id", cid, "--bootstrap", self.bootstrap,
                "--shards", str(GROUP_SHARDS), "--initial-rebalance-delay-ms", "500"],
                logs / f"{cid}.log"))
            self._spawn(cid)
        for cid in COORDINATORS:
            self.services[cid].wait_healthy(60)
        wait_until(lambda: len(self.coordinators()) == len(COORDINATORS)
                   and self.shard_owner() is not None, 60,
                   "both group coordinators to register and one to own the group's shard", 0.2)

    def _proxied(self, name: str) -> str:
        port = free_port()
        self.proxy_ports[name] = port
        return f"127.0.0.1:{port}"

    def _add(self, name: str, service: Service) -> None:
        self.services[name] = service
        if name in self.proxy_ports:
            assert self.proxy is not None
            self.proxy.command(op="add", name=name, listen=self.proxy_ports[name],
                               target=service.listen_port)

    def _spawn(self, name: str) -> None:
        service = self.services[name]
        service.spawn()
        assert service.pid is not None
        self.spawned.add(service.pid)
        if name in self.proxy_ports:
            assert self.proxy is not None
            self.proxy.command(op="pid", name=name, pid=service.pid)

    def stop(self) -> None:
        """Stop everything in dependency order: the group coordinators, the gateway, the
        storage nodes (while
        a controller can still take their controlled shutdown), the controllers, etcd
        and the proxy. Paused processes are continued first so that SIGTERM works."""
        for group in (COORDINATORS, ["gateway"], [f"storage-{n}" for n in STORAGE_NODES],
                      CONTROLLERS):
            running = [self.services[n] for n in group
                       if n in self.services and self.running(n)]
            for service in running:
                assert service.process is not None
                with contextlib.suppress(ProcessLookupError):
                    os.kill(service.process.pid, signal.SIGCONT)
                    service.process.terminate()
            deadline = time.monotonic() + 10
            for service in running:
                assert service.process is not None
                try:
                    service.process.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    service.process.kill()
                    service.process.wait()
        if self.etcd is not None:
            if self.etcd.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.etcd.process.pid, signal.SIGCONT)
            self.etcd.stop()
        if self.proxy is not None:
            self.proxy.stop()

    def alive_pids(self) -> list[int]:
        """PIDs this cluster started that still run (should be none after stop()). A
        PID counts only if its command line still names this run: PIDs get reused."""
        alive = []
        for pid in sorted(self.spawned):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # reap it if it is our zombie
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except (OSError, IndexError):
                continue  # gone
            if state != "Z" and (self.name in command or str(self.workdir) in command):
                alive.append(pid)
        return alive

    # -- addresses and files --------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return self.services["gateway"].address

    def data_dir(self, node: int) -> Path:
        return self.workdir / f"data-{node}"

    def pid(self, name: str) -> int | None:
        if name == "etcd":
            return self.etcd.process.pid if self.etcd and self.etcd.process else None
        return self.services[name].pid

    def running(self, name: str) -> bool:
        process = (self.etcd.process if name == "etcd" and self.etcd
                   else self.services[name].process)
        return process is not None and process.poll() is None

    def exited(self) -> dict[str, int]:
        """Processes that are not running, with their exit status (negative: the
        signal that ended them). Right after a heal, these exited on their own."""
        out = {}
        for name in ("etcd", *self.services):
            process = (self.etcd.process if name == "etcd" and self.etcd
                       else self.services[name].process)
            if process is not None and process.poll() is not None:
                out[name] = int(process.returncode)
        return out

    # -- faults' primitives ---------------------------------------------------------------

    def signal(self, name: str, sig: int) -> None:
        pid = self.pid(name)
        if pid is None:
            raise RuntimeError(f"{name} has no process")
        os.kill(pid, sig)

    def kill(self, name: str) -> None:
        """SIGKILL and reap."""
        if name == "etcd":
            assert self.etcd is not None and self.etcd.process is not None
            self.etcd.process.kill()
            self.etcd.process.wait()
        else:
            self.services[name].kill()

    def restart(self, name: str) -> None:
        """Start a stopped process again: same ports, same data, same identity."""
        if name == "etcd":
            assert self.etcd is not None
            self.etcd.start()
            assert self.etcd.process is not None
            self.spawned.add(self.etcd.process.pid)
            return
        self._spawn(name)
        self.services[name].wait_healthy(60)

    def cut(self, name: str) -> int:
        assert self.proxy is not None
        return int(self.proxy.command(op="cut", names=[name])["silenced"])

    def heal(self, name: str) -> int:
        assert self.proxy is not None
        return int(self.proxy.command(op="heal", names=[name])["reset"])

    # -- cluster state, from etcd ---------------------------------------------------------

    def _etcd_get(self, key: str, prefix: bool = False) -> dict[str, bytes]:
        assert self.etcd is not None
        return etcd_range(self.etcd.endpoint, f"/strand/{self.name}/{key}", prefix)

    def brokers(self) -> set[int]:
        try:
            return {int(k.rsplit("/", 1)[1]) for k in self._etcd_get("brokers/", True)}
        except (OSError, urllib.error.URLError, ValueError):
            return set()

    def active_controller(self) -> str | None:
        try:
            value = self._etcd_get("controller").get(f"/strand/{self.name}/controller")
        except (OSError, urllib.error.URLError):
            return None
        return str(json.loads(value)["controller_id"]) if value else None

    def coordinators(self) -> set[str]:
        """The group coordinator instances registered (under their leases)."""
        try:
            return {k.rsplit("/", 1)[1] for k in self._etcd_get("coordinators/", True)}
        except (OSError, urllib.error.URLError):
            return set()

    def group_shard(self) -> int | None:
        """The partition of __consumer_offsets holding the chaos group (None: no topic)."""
        try:
            value = self._etcd_get(f"topics/{GROUP_TOPIC}").get(
                f"/strand/{self.name}/topics/{GROUP_TOPIC}")
        except (OSError, urllib.error.URLError):
            return None
        return shard_for(self.group_id, int(json.loads(value)["partitions"])) if value else None

    def shard_owner(self) -> str | None:
        """The coordinator instance that owns the chaos group's shard, from etcd."""
        shard = self.group_shard()
        if shard is None:
            return None
        try:
            value = self._etcd_get(f"shards/groups/{shard}").get(
                f"/strand/{self.name}/shards/groups/{shard}")
        except (OSError, urllib.error.URLError):
            return None
        return str(json.loads(value)["instance_id"]) if value else None

    def partitions(self, topic: str) -> dict[int, PartitionState]:
        """Every partition's record (empty when etcd cannot be read)."""
        try:
            raw = self._etcd_get(f"partitions/{topic}/", True)
        except (OSError, urllib.error.URLError):
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
        partition of __consumer_offsets has a registered leader."""
        down = [name for name in ("etcd", *self.services) if not self.running(name)]
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
        shard = self.group_shard()
        offsets = self.partitions(GROUP_TOPIC).get(shard) if shard is not None else None
        if shard is None or self.shard_owner() is None:
            found.append(f"the group's shard {shard} has no coordinator")
        elif offsets is None or offsets.leader not in brokers:
            found.append(f"{GROUP_TOPIC}-{shard} has no registered leader")
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
