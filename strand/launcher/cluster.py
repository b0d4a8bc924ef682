"""A Strand cluster of real processes on 127.0.0.1: etcd, controllers, storage nodes
(with racks), gateways, group and transaction coordinators, described by a
:class:`ClusterSpec`.

``Cluster(spec)`` creates every process (ports chosen, nothing started yet: a caller
may still adjust a process's arguments); :meth:`Cluster.start` boots them in the
spec's :class:`Boot` order and returns once every storage node is registered;
:meth:`Cluster.stop` stops them, clients first and etcd last. Process ids (and log
file names) are ``etcd``, ``controller-<i>``, ``storage-<node>``, ``gateway`` (then
``gateway-<i>``), ``groups-<i>`` and ``txns-<i>``; storage node ids count from 1.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self, TypeVar

from strand.launcher import etcd_reads, probes
from strand.launcher.process import EtcdServer, Launch, Process, ServiceProcess, stop_in_order
from strand.launcher.system import LOCALHOST, free_port, wait_until

if TYPE_CHECKING:
    from strand.security.tls import ClientTls, ServiceTls

P = TypeVar("P", bound=Process)


class Boot(enum.Enum):
    """How the services boot (etcd always first, coordinators after the gateway
    unless ALL_AT_ONCE)."""

    ONE_BY_ONE = "one by one"  # each serves before the next is started
    IN_STAGES = "in stages"  # controllers and storage nodes together, gateways, coordinators
    ALL_AT_ONCE = "all at once"  # every service spawned, then each waited for


@dataclass(frozen=True)
class ClusterSpec:
    directory: Path  # data: etcd/ and the storage nodes' folders
    name: str = "strand"  # the services' --cluster (and etcd's member name)
    controllers: int = 1
    storage_nodes: int = 1
    gateways: int = 1
    coordinators: int = 0  # group coordinators (services.groups)
    # Transaction coordinators (services.transactions): one by default, since the
    # producer is idempotent by default and gets its producer id from one.
    txn_coordinators: int = 1
    racks: tuple[str, ...] = ()  # node n's rack: racks[(n - 1) % len]; none: "r<n>"
    lease_ttl: int | None = None  # controllers', storage nodes' and coordinators' (s)
    # Further arguments of each kind of service.
    controller_args: tuple[str, ...] = ()
    storage_args: tuple[str, ...] = ()
    gateway_args: tuple[str, ...] = ()
    coordinator_args: tuple[str, ...] = ()
    txn_coordinator_args: tuple[str, ...] = ()
    logs: Path | None = None  # where the <id>.log files go (default: directory/logs)
    data_dir: str = "data-{node}"  # a storage node's folder under directory
    etcd_fsync: bool = True  # False: --unsafe-no-fsync (tests)
    etcd_port: int | None = None  # preferred ports (taken ones fall back to free ones);
    gateway_port: int | None = None  # etcd's peer port prefers etcd_port + 1
    kafka_port: int | None = None  # the first gateway's Kafka listener
    boot: Boot = Boot.IN_STAGES
    launch: Launch = field(default_factory=Launch)
    healthy_timeout: float = 60.0  # s, for each service to serve
    registered_timeout: float = 30.0  # s, for every storage node to register
    settled_timeout: float = 60.0  # s, for the coordinators to settle their shards
    # TLS on every listener and call between the services, and on etcd's client port
    # (None: plaintext); the launcher's own checks and clients use its client side.
    tls: ServiceTls | None = None
    # (name, password) of a SCRAM user the controllers create at start (their bootstrap
    # user) and the launcher's own checks authenticate as: give the gateways
    # --super-users User:<name> with --authorizer acl (None: no user).
    superuser: tuple[str, str] | None = None
    # Every service serves Prometheus metrics on a port of its own
    # (Cluster.metrics_ports; each service's --metrics-port).
    metrics: bool = False

    @property
    def log_dir(self) -> Path:
        return self.logs if self.logs is not None else self.directory / "logs"


class Cluster:
    def __init__(self, spec: ClusterSpec,
                 on_spawn: Callable[[Process], None] | None = None) -> None:
        self.spec = spec
        self.on_spawn = on_spawn  # called after each spawn (restarts too), with the process
        self._ports: set[int] = set()
        self.metrics_ports: dict[str, int] = {}  # process id → its metrics port
        self.kafka_ports: dict[str, int] = {}  # gateway process id → its Kafka listener's
        peer = spec.etcd_port + 1 if spec.etcd_port else None
        self.etcd = self._adopt(EtcdServer(
            spec.directory / "etcd", self.unused_port(spec.etcd_port), self.unused_port(peer),
            name=spec.name, log_path=spec.log_dir / "etcd.log",
            unsafe_no_fsync=not spec.etcd_fsync, launch=spec.launch, tls=spec.tls))
        self.controllers = [self.controller_node(i) for i in range(spec.controllers)]
        self.storage = [self.storage_node(n) for n in range(1, spec.storage_nodes + 1)]
        self.gateways = [self.gateway_node(i, self.unused_port(spec.gateway_port) if i == 0
                                           else None) for i in range(spec.gateways)]
        self.coordinators = [self.group_coordinator(i) for i in range(spec.coordinators)]
        self.txn_coordinators = [self.txn_coordinator(i)
                                 for i in range(spec.txn_coordinators)]

    # -- addresses and files ---------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def directory(self) -> Path:
        return self.spec.directory

    @property
    def gateway(self) -> ServiceProcess:
        return self.gateways[0]

    @gateway.setter
    def gateway(self, process: ServiceProcess) -> None:
        self.gateways[0] = self._adopt(process)

    @property
    def bootstrap(self) -> str:
        """The address clients connect to: the first gateway's."""
        return self.gateway.address

    @property
    def kafka_bootstrap(self) -> str:
        """The address Kafka clients connect to: the first gateway's Kafka listener
        (TLS when the cluster's ``tls`` is set: SSL or SASL_SSL)."""
        port = self.kafka_ports.get(self.gateway.id)
        if port is None:
            raise RuntimeError("the first gateway has not been started: no Kafka listener yet")
        return f"{LOCALHOST}:{port}"

    @property
    def etcd_tls(self) -> ClientTls | None:
        """How a client of this cluster's etcd connects (None: plaintext)."""
        return self.spec.tls.client if self.spec.tls is not None else None

    @property
    def common(self) -> list[str]:
        """The arguments every service gets: where etcd is, which cluster, its TLS."""
        args = ["--etcd", self.etcd.endpoint, "--cluster", self.spec.name]
        tls = self.spec.tls
        if tls is not None:
            args += ["--tls-cert", str(tls.server.cert), "--tls-key", str(tls.server.key)]
            if tls.server.ca is not None:
                args += ["--tls-ca", str(tls.server.ca)]
            if tls.server.require_client_cert:
                args += ["--tls-client-auth", "required"]
            if tls.service_names:
                args += ["--tls-service-names", ",".join(tls.service_names)]
            client = tls.client
            args += ["--etcd-tls-ca", str(client.ca)]
            if client.cert is not None and client.key is not None:
                args += ["--etcd-tls-cert", str(client.cert), "--etcd-tls-key", str(client.key)]
        return args

    def data_dir(self, node: int) -> Path:
        return self.spec.directory / self.spec.data_dir.format(node=node)

    def rack(self, node: int) -> str:
        racks = self.spec.racks
        return racks[(node - 1) % len(racks)] if racks else f"r{node}"

    def processes(self) -> list[Process]:
        """Every process, etcd first, in start order."""
        return [self.etcd, *self.controllers, *self.storage, *self.gateways,
                *self.coordinators, *self.txn_coordinators]

    def process(self, process_id: str) -> Process:
        for process in self.processes():
            if process.id == process_id:
                return process
        raise KeyError(f"no process {process_id!r} in cluster {self.spec.name}")

    # -- the services (created, not started: start() or .start() them) ---------------------

    def controller_node(self, index: int, port: int | None = None) -> ServiceProcess:
        process_id = f"controller-{index}"
        return self._service("controller", process_id, port, *self._leased,
                             "--id", process_id, *self._bootstrap_user,
                             *self.spec.controller_args)

    @property
    def _bootstrap_user(self) -> list[str]:
        """The controllers create the launcher's super user..."""
        user = self._superuser_file()
        return [] if user is None else ["--bootstrap-user", user[0],
                                        "--bootstrap-password-file", user[1]]

    @property
    def _gateway_user(self) -> list[str]:
        """...and the coordinators are that user at the gateway."""
        user = self._superuser_file()
        return [] if user is None else ["--gateway-user", user[0],
                                        "--gateway-password-file", user[1]]

    def _superuser_file(self) -> tuple[str, str] | None:
        """(name, the file holding its password), the file written on first use."""
        if self.spec.superuser is None:
            return None
        name, password = self.spec.superuser
        secret = self.spec.directory / "superuser.password"
        if not secret.exists():
            secret.parent.mkdir(parents=True, exist_ok=True)
            secret.touch(mode=0o600)
            secret.write_text(password + "\n")
        return name, str(secret)

    def storage_node(self, node: int, port: int | None = None) -> ServiceProcess:
        return self._service("storage", f"storage-{node}", port, *self._leased,
                             "--node-id", str(node), "--rack", self.rack(node),
                             "--data-dir", str(self.data_dir(node)), *self.spec.storage_args)

    def gateway_node(self, index: int = 0, port: int | None = None) -> ServiceProcess:
        process_id = f"gateway-{index}" if index else "gateway"
        # Each gateway advertises itself (its port kept across a restart); with the
        # cluster's TLS the Kafka port serves TLS too (the gateway's certificate).
        kafka_port = self.kafka_ports.get(process_id) or self.unused_port(
            None if index else self.spec.kafka_port)
        self.kafka_ports[process_id] = kafka_port
        return self._service("gateway", process_id, port, "--kafka-listen",
                             f"{LOCALHOST}:{kafka_port}", *self.spec.gateway_args)

    def group_coordinator(self, index: int, port: int | None = None,
                          args: Sequence[str] = ()) -> ServiceProcess:
        process_id = f"groups-{index}"
        return self._service("groups", process_id, port, *self._leased, "--id", process_id,
                             "--bootstrap", self.bootstrap, *self._gateway_user,
                             *self.spec.coordinator_args, *args)

    def txn_coordinator(self, index: int, port: int | None = None,
                        args: Sequence[str] = ()) -> ServiceProcess:
        process_id = f"txns-{index}"
        return self._service("transactions", process_id, port, *self._leased, "--id",
                             process_id, "--bootstrap", self.bootstrap, *self._gateway_user,
                             *self.spec.txn_coordinator_args, *args)

    @property
    def _leased(self) -> list[str]:
        ttl = self.spec.lease_ttl
        return ["--lease-ttl", str(ttl)] if ttl is not None else []

    def _service(self, name: str, process_id: str, port: int | None,
                 *args: str) -> ServiceProcess:
        if self.spec.metrics:
            metrics_port = self.metrics_ports.get(process_id) or self.unused_port()
            self.metrics_ports[process_id] = metrics_port  # kept across a restart
            args = (*args, "--metrics-port", str(metrics_port))
        return self._adopt(ServiceProcess(
            name, [*self.common, *args], self.spec.log_dir / f"{process_id}.log",
            port or self.unused_port(), id=process_id, launch=self.spec.launch,
            tls=self.spec.tls.client if self.spec.tls else None))

    def _adopt(self, process: P) -> P:
        process.on_spawn = self._spawned
        return process

    def _spawned(self, process: Process) -> None:
        if self.on_spawn is not None:
            self.on_spawn(process)

    def unused_port(self, preferred: int | None = None) -> int:
        """A free port no process of this cluster was given yet (``preferred`` if it
        is one)."""
        port = free_port(preferred)
        while port in self._ports:
            port = free_port()
        self._ports.add(port)
        return port

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        """Boot etcd, then the services in the spec's order; return once every storage
        node is registered and the coordinators serve and hold their shards. When that
        fails, processes that are not detached are stopped before the error is raised."""
        try:
            self.etcd.start()
            before, after = self._waves()
            for wave in before:
                self._boot(wave)
            self.wait_registered()
            for wave in after:
                self._boot(wave)
            self.wait_coordinators_settled()
        except BaseException:
            if not self.spec.launch.detached:
                self.stop()
            raise
        return self

    def _waves(self) -> tuple[list[list[ServiceProcess]], list[list[ServiceProcess]]]:
        """The services booted before every storage node is registered and after it,
        in waves (a wave's processes are spawned together, then waited for)."""
        nodes = [*self.controllers, *self.storage]
        coordinators = [*self.coordinators, *self.txn_coordinators]
        if self.spec.boot is Boot.ONE_BY_ONE:
            return [[p] for p in [*nodes, *self.gateways]], [[p] for p in coordinators]
        if self.spec.boot is Boot.IN_STAGES:
            return [nodes, self.gateways], [coordinators]
        return [[*nodes, *self.gateways, *coordinators]], []

    def _boot(self, wave: list[ServiceProcess]) -> None:
        for process in wave:
            process.spawn()
        for process in wave:
            process.wait_serving(self.spec.healthy_timeout)

    def wait_registered(self, timeout: float | None = None) -> None:
        """Until the gateway lists every storage node (nothing to wait for without one)."""
        if not self.gateways:
            return
        wanted = len(self.storage)
        tls = self.spec.tls.client if self.spec.tls else None
        wait_until(lambda: probes.registered_brokers(self.bootstrap, tls=tls,
                                                     user=self.spec.superuser) >= wanted,
                   timeout or self.spec.registered_timeout, "every storage node to register")

    def wait_coordinators_settled(self, timeout: float | None = None) -> None:
        """Until the group and the transaction coordinators running now are the
        registered ones of their kind and each shard is held by the one rendezvous
        hashing gives it (nothing to wait for without coordinators): a test that
        starts right away would otherwise see shards move, and in-memory state with
        them."""
        for processes, transactions in ((self.coordinators, False),
                                        (self.txn_coordinators, True)):
            running = {c.id for c in processes if c.running()}
            if not running:
                continue
            wait_until(lambda running=running, transactions=transactions:  # type: ignore[misc]
                       etcd_reads.shards_settled(self.etcd.endpoint, self.spec.name, running,
                                                 transactions, self.etcd_tls),
                       timeout or self.spec.settled_timeout,
                       f"the coordinators {sorted(running)} to settle their shards")

    def stop(self, timeout: float = 15.0) -> int:
        """Stop every running process (see stop_in_order); returns how many ran."""
        return stop_in_order(self.processes(), timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
